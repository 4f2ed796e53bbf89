"""The P4 device config of this target: a JSON bundle of P4 source files.

This target compiles P4 source itself, so the ``p4_device_config`` of a P4Runtime
``ForwardingPipelineConfig`` carries the program's source, not a compiled artefact::

    {
      "format": "softswitch-p4-source/1",
      "main": "basic.p4",                      # path of the top-level file inside "files"
      "files": {"basic.p4": "...", "lib/headers.p4": "..."},
      "defines": {"HOT_KEYS": "64"},           # -D NAME=VALUE, optional
      "include_dirs": ["lib"]                  # -I DIR relative to the bundle root, optional
    }

The bundle root is always on the include path. Paths are relative, '/'-separated and may not
leave the bundle (no absolute paths, no '..').
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from softswitch import P4Error, Switch

FORMAT = "softswitch-p4-source/1"
SOURCE_SUFFIXES = (".p4", ".h", ".p4h", ".def")
SKIP_DIRS = {"__pycache__", "node_modules", "build"}
MAX_BUNDLE_BYTES = 16 << 20


BUNDLE_KEY = "softswitch_bundle"  # the bundle inside the BMv2-style JSON `kvswitch p4c -o` writes


def embedded_bundle(data: bytes) -> Bundle | None:
    """The source bundle inside a BMv2-style JSON written by ``kvswitch p4c -o``, else None."""
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get(BUNDLE_KEY), dict):
        return None
    return Bundle.from_bytes(json.dumps(doc[BUNDLE_KEY]).encode())


class BundleError(ValueError):
    """A device config that is not a valid source bundle."""


@dataclass
class Bundle:
    main: str
    files: dict[str, str]
    defines: dict[str, str] = field(default_factory=dict)
    include_dirs: list[str] = field(default_factory=list)
    # bundle path -> the file it was read from (from_file only; not part of the device config),
    # so that P4 errors name the user's file, not the scratch copy compile() loads
    origins: dict[str, str] = field(default_factory=dict, compare=False)

    def to_bytes(self) -> bytes:
        doc = {
            "format": FORMAT,
            "main": self.main,
            "files": self.files,
            "defines": self.defines,
            "include_dirs": self.include_dirs,
        }
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Bundle:
        try:
            doc = json.loads(data.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BundleError(f"device config is not a JSON source bundle: {exc}") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise BundleError(f"device config must be a JSON object with format {FORMAT!r}")
        main, files = doc.get("main"), doc.get("files")
        defines, include_dirs = doc.get("defines") or {}, doc.get("include_dirs") or []
        if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            raise BundleError("bundle 'files' must map paths to source text")
        if not isinstance(main, str) or main not in files:
            raise BundleError("bundle 'main' must name one of its files")
        if not isinstance(defines, dict) or not isinstance(include_dirs, list):
            raise BundleError("bundle 'defines' must be an object, 'include_dirs' a list")
        for path in [*files, *include_dirs]:
            _check_relative(path)
        return cls(main, files, {str(k): str(v) for k, v in defines.items()}, include_dirs)

    @classmethod
    def from_file(
        cls,
        main: str | Path,
        defines: dict[str, str] | None = None,
        include_dirs: list[str | Path] | None = None,
    ) -> Bundle:
        """Pack a program on disk: the main file, the sources beside it and in ``include_dirs``."""
        main_path = Path(main)
        root = main_path.parent
        origins = {p.relative_to(root).as_posix(): str(p) for p in _sources(root)}
        origins[main_path.name] = str(main_path)
        dirs = []
        for i, inc in enumerate(include_dirs or []):
            prefix = f"_include{i}"
            dirs.append(prefix)
            for p in _sources(Path(inc)):
                origins[f"{prefix}/{p.relative_to(inc).as_posix()}"] = str(p)
        files = {rel: Path(path).read_text() for rel, path in origins.items()}
        return cls(main_path.name, files, dict(defines or {}), dirs, origins)

    def compile(self) -> Switch:
        """Write the files to a scratch directory and load the program (raises P4Error)."""
        with tempfile.TemporaryDirectory(prefix="softswitch-bundle-") as tmp:
            root = Path(tmp)
            for rel, text in self.files.items():
                target = root / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
            try:
                return Switch.from_file(
                    str(root / self.main),
                    defines=self.defines or None,
                    include_dirs=[str(root), *(str(root / d) for d in self.include_dirs)],
                )
            except P4Error as exc:
                raise self._user_paths(exc, f"{root}/") from None

    def _user_paths(self, exc: P4Error, scratch: str) -> P4Error:
        """The error with the scratch copy's paths replaced by the user's (or bundle) paths."""

        def user(path: str) -> str:
            if not path.startswith(scratch):
                return path
            rel = path[len(scratch) :]
            return self.origins.get(rel, rel)

        msg = re.sub(re.escape(scratch) + r"[^\s:,'\"]+", lambda m: user(m.group(0)), exc.msg)
        return P4Error(msg, user(exc.file), exc.line, exc.col)


def _sources(root: Path) -> list[Path]:
    """P4 sources below ``root`` (hidden folders skipped), refusing folders that are too big."""
    if not root.is_dir():
        return []
    found: list[Path] = []
    total = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
        for name in sorted(files):
            path = Path(folder) / name
            if path.suffix not in SOURCE_SUFFIXES:
                continue
            try:
                total += path.stat().st_size
            except OSError:
                continue
            found.append(path)
            if total > MAX_BUNDLE_BYTES:
                raise BundleError(
                    f"{root} holds over {MAX_BUNDLE_BYTES >> 20} MB of sources; "
                    "put the program in a folder of its own"
                )
    return found


def _check_relative(path: object) -> None:
    if not isinstance(path, str):
        raise BundleError(f"bundle path {path!r} is not a string")
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts:
        raise BundleError(f"bundle path {path!r} leaves the bundle")

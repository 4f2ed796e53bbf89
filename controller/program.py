"""The program the controller sets on the switch (SetForwardingPipelineConfig): its P4Info and the
target's device config.

- The software switch takes the P4 source itself: the bundle the software switch builds from it.
- BMv2 takes the JSON p4c-bm2-ss writes, with the P4Info p4c writes beside it: given as files, or
  compiled here from the P4 source with the ``p4c-bm2-ss`` found on PATH.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from finsy.proto import p4i
from google.protobuf import text_format

from kvswitch.controller.p4rt_driver import Program


class ProgramError(ValueError):
    """The program cannot be had: a compiler missing, a compile error, an unreadable file."""


def from_p4c_files(json_path: Path, p4info_path: Path) -> Program:
    """p4c's BMv2 JSON and P4Info text file."""
    try:
        info = text_format.Parse(p4info_path.read_text(), p4i.P4Info())
        return Program(info, json_path.read_bytes())
    except OSError as exc:
        raise ProgramError(f"{exc.filename}: {exc.strerror}") from exc
    except text_format.ParseError as exc:
        raise ProgramError(f"{p4info_path}: not a P4Info text file ({exc})") from exc


def p4c_bm2_ss(
    source: Path,
    out_dir: Path,
    defines: Mapping[str, str] | None = None,
    include_dirs: Sequence[Path] = (),
) -> tuple[Path, Path]:
    """Compile ``source`` with the p4c-bm2-ss on PATH into ``out_dir``: (the BMv2 JSON, the
    P4Info text file). What the compiler printed (its warnings) is kept beside them,
    :func:`compiler_log`."""
    p4c = shutil.which("p4c-bm2-ss")
    if p4c is None:
        raise ProgramError(
            "p4c-bm2-ss is not on PATH: install p4c, or give p4c's --bmv2-json and --p4info"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{source.stem}.json"
    info_path = out_dir / f"{source.stem}.p4info.txtpb"
    cmd = [p4c, "--std", "p4-16", "-o", str(json_path), "--p4runtime-files", str(info_path)]
    cmd += [f"-D{k}={v}" for k, v in (defines or {}).items()]
    cmd += [f"-I{d}" for d in (*include_dirs, source.parent)]
    done = subprocess.run([*cmd, str(source)], capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise ProgramError(f"p4c-bm2-ss {source.name}: {lines[0] if lines else done.returncode}")
    compiler_log(json_path).write_text(done.stdout + done.stderr)
    return json_path, info_path


def compiler_log(json_path: Path) -> Path:
    """Where :func:`p4c_bm2_ss` keeps what the compiler printed for ``json_path``."""
    return json_path.with_suffix(".p4c.log")


def cached_p4c_bm2_ss(
    source: Path,
    defines: Mapping[str, str] | None = None,
    include_dirs: Sequence[Path] = (),
    cache: Path | None = None,
) -> tuple[Path, Path]:
    """:func:`p4c_bm2_ss` into a folder of ``cache`` (default ``$XDG_CACHE_HOME/kvswitch/p4c``)
    named by what the output depends on: every ``.p4`` file under the source's and the include
    folders, the defines and the compiler binary. A second rack run with the same program skips
    the compile (p4c-bm2-ss takes 10-15 s for kvswitch.p4)."""
    p4c = shutil.which("p4c-bm2-ss")
    digest = hashlib.sha256()
    if p4c is not None:
        stat = Path(p4c).stat()
        digest.update(f"{Path(p4c).resolve()} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    # "log": entries keep the compiler's messages (compiler_log); older ones lack them
    digest.update(f"log {source.name} {sorted((defines or {}).items())}\n".encode())
    for folder in sorted({source.parent.resolve(), *(Path(d).resolve() for d in include_dirs)}):
        for path in sorted(folder.rglob("*.p4")):
            digest.update(f"{path.relative_to(folder)}\n".encode() + path.read_bytes())
    base = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = (base if cache else base / "kvswitch" / "p4c") / digest.hexdigest()[:24]
    json_path = folder / f"{source.stem}.json"
    info_path = folder / f"{source.stem}.p4info.txtpb"
    if json_path.is_file() and info_path.is_file():
        return json_path, info_path
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    try:
        p4c_bm2_ss(source, tmp, defines, include_dirs)
        with contextlib.suppress(OSError):  # another run may have put it there first
            tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return json_path, info_path


def compiled_for_bmv2(
    source: Path, defines: Mapping[str, str], include_dirs: Sequence[Path] = ()
) -> Program:
    """``source`` compiled by p4c-bm2-ss (:func:`cached_p4c_bm2_ss`) as a :class:`Program`."""
    return from_p4c_files(*cached_p4c_bm2_ss(source, defines, include_dirs))


def from_source(
    source: Path,
    defines: Mapping[str, str],
    include_dirs: Sequence[str] = (),
    cache: Path | None = None,
) -> Program:
    """The software switch's bundle of ``source`` (it compiles P4 itself), with the P4Info its
    frontend derives from the bundle. The P4Info is kept in a file of ``cache`` (default
    ``$XDG_CACHE_HOME/kvswitch/softswitch-p4info``) named by the bundle and the software switch's
    own sources: the compile took 1.5-3.5 s of every controller start on a loaded 2-core
    machine (2026-11-26), and the switch compiles the bundle again when the controller sets it."""
    import softswitch
    from softswitch.runtime.bundle import Bundle

    bundle = Bundle.from_file(source, dict(defines), list(include_dirs))
    config = bundle.to_bytes()
    digest = hashlib.sha256(config)
    frontend = Path(softswitch.__file__).parent  # its code and its own P4 headers
    for path in sorted(frontend.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(f"{path.relative_to(frontend)}\n".encode() + path.read_bytes())
    base = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = base if cache else base / "kvswitch" / "softswitch-p4info"
    info_path = folder / f"{digest.hexdigest()[:24]}.p4info.txtpb"
    with contextlib.suppress(OSError, text_format.ParseError):
        return Program(text_format.Parse(info_path.read_text(), p4i.P4Info()), config)
    info = bundle.compile().p4info
    with contextlib.suppress(OSError):  # not kept: the next start compiles again
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text_format.MessageToString(info))
            os.replace(tmp, info_path)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return Program(info, config)

"""Where the project's non-Python files are, in an installed copy and in a source checkout."""

from __future__ import annotations

from pathlib import Path


def p4src_dir() -> Path:
    """The folder holding the P4 programs (``p4src/``).

    An installed wheel carries it as package data next to this package; an editable install
    (a source checkout) has it at the repository's top level.
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / "p4src", here.parent / "p4src"):
        if (candidate / "kvswitch.p4").is_file():
            return candidate
    raise FileNotFoundError("p4src/ with kvswitch.p4 not found next to the kvswitch package")


def c_src_dir() -> Path:
    """The C client library's and load generator's sources with their Makefile (``client_lib/c``).

    An installed wheel carries them as package data (``kvswitch/csrc``), to build
    ``kvswitch-loadgen`` where it is not installed; an editable install has the checkout's folder.
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / "csrc", here.parent / "client_lib" / "c"):
        if (candidate / "Makefile").is_file():
            return candidate
    raise FileNotFoundError(
        "the C client's sources (Makefile) not found next to the kvswitch package"
    )


def repo_root() -> Path | None:
    """The source checkout's root, or None for an installed copy."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() else None

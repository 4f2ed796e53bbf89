"""What ``pip install .`` installs: every import package of the mapped folders, and the files the
rack and the demo need outside the checkout (pyproject.toml)."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from kvswitch.bench.c_client_bench import build_loadgen
from kvswitch.paths import repo_root

ROOT = repo_root()
pytestmark = pytest.mark.skipif(ROOT is None, reason="needs the source checkout")


def setuptools_config() -> dict:
    assert ROOT is not None
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_sub_package_is_listed() -> None:
    """A folder with an __init__.py under a mapped package is installed only if it is listed
    (the list is explicit): a missing one breaks an installed copy, never a checkout."""
    assert ROOT is not None
    cfg = setuptools_config()
    listed = set(cfg["packages"])
    missing = []
    for name, folder in cfg["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            if any(p.startswith(".") or p in ("build", "__pycache__") for p in rel):
                continue
            package = ".".join((name, *rel))
            mapped_elsewhere = any(
                (ROOT / other).resolve() == init.parent.resolve()
                for other in cfg["package-dir"].values()
            )
            if package not in listed and not mapped_elsewhere:
                missing.append(package)
    assert not missing, f"add to [tool.setuptools] packages: {missing}"


def test_the_loadgen_sources_are_package_data() -> None:
    """Every file the C Makefile needs for kvswitch-loadgen matches kvswitch.csrc's package-data
    patterns (an installed copy builds the loadgen from them)."""
    assert ROOT is not None
    cfg = setuptools_config()
    patterns = cfg["package-data"]["kvswitch.csrc"]
    makefile = (ROOT / "client_lib" / "c" / "Makefile").read_text()
    needed = ["Makefile"]
    for var in ("LIB_SRC", "LG_LIB_SRC", "LG_SRC", "HEADERS"):
        m = re.search(rf"^{var} := (.+)$", makefile, re.MULTILINE)
        assert m, var
        needed += m.group(1).split()
    uncovered = [f for f in needed if not any(fnmatch(f, p) for p in patterns)]
    assert not uncovered


def test_loadgen_built_once_from_sources(tmp_path: Path) -> None:
    """An installed copy's loadgen: built with the sources' Makefile into a cache folder named
    after their digest, once; a failed build is one line."""
    src = tmp_path / "src"
    src.mkdir()
    rule = "$(B)/kvswitch-loadgen:\n\techo built >> ../builds.txt\n\tprintf 'x' > $@\n"
    (src / "Makefile").write_text(rule)
    cache = tmp_path / "cache"
    first = build_loadgen(src, cache)
    assert first.read_text() == "x" and first.parent.parent == cache
    assert build_loadgen(src, cache) == first
    assert (tmp_path / "builds.txt").read_text() == "built\n"  # the second call built nothing
    (src / "Makefile").write_text(rule.replace("printf 'x'", "false"))
    with pytest.raises(FileNotFoundError, match="the build failed"):
        build_loadgen(src, cache)

"""The distribution installs every package of the source tree.

pyproject.toml lists the import packages by hand (the design's folders are mapped under one
namespace), so a new sub-package is easy to forget: an editable install still finds it, a
``pip install .`` does not, and the installed ``kvswitch`` fails on its first import of it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_installed() -> None:
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = tool["package-dir"]
    listed = set(tool["packages"])
    on_disk = set()
    for name, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            on_disk.add(".".join([name, *rel.parts]))
    missing = {p for p in on_disk if p not in listed}
    assert not missing, (
        f"packages not in pyproject.toml's [tool.setuptools] packages: {sorted(missing)}"
    )
    # a data-only package (p4src) has no __init__.py, only its folder
    stale = {p for p in listed if p not in on_disk and not (ROOT / dirs.get(p, "-")).is_dir()}
    assert not stale, f"listed packages with no folder: {sorted(stale)}"

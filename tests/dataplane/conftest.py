"""Fixtures of the data-plane tests: the target switch (built once per session and build) and
``dp``, a fresh test rack on it for every test. See base.py.

Every test runs on each build (fabric-tna style): the software switch on the v1model program
loaded from P4 source (``[source]``), on the BMv2 JSON and P4Info that p4c-bm2-ss writes for it
(``[p4c-json]``), on the TNA program ``kvswitch_tna.p4`` from source (``[tna]``), and BMv2's own
``simple_switch_grpc`` on p4c-bm2-ss's JSON (``[bmv2]``, bmv2_target.py). A build whose tools are
not on PATH (p4c-bm2-ss, simple_switch_grpc) or that needs root (BMv2's veth ports) is skipped
with a message. Optional filters: ``KVSWITCH_ARCH=v1model`` or ``tna`` keeps one architecture's
builds, ``KVSWITCH_TARGET=softswitch`` or ``bmv2`` one target's."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from p4c_bmv2.tools import p4c_compile

from kvswitch.paths import p4src_dir

from .base import DEFINES, Dataplane, SwitchTarget

# build -> (architecture, top-level program, loaded from, target)
BUILDS = {
    "source": ("v1model", "kvswitch.p4", "source", "softswitch"),
    "p4c-json": ("v1model", "kvswitch.p4", "p4c-json", "softswitch"),
    "tna": ("tna", "kvswitch_tna.p4", "source", "softswitch"),
    "bmv2": ("v1model", "kvswitch.p4", "p4c-json", "bmv2"),
}
TARGETS = ("softswitch", "bmv2")

_compiled: dict[str, tuple[Path, Any]] = {}


def _builds() -> list[Any]:
    """The builds the suite runs on: all, or those KVSWITCH_ARCH and KVSWITCH_TARGET keep."""
    arch = os.environ.get("KVSWITCH_ARCH")
    archs = {b[0] for b in BUILDS.values()}
    if arch is not None and arch not in archs:
        raise pytest.UsageError(f"KVSWITCH_ARCH={arch!r}: expected one of {sorted(archs)}")
    target = os.environ.get("KVSWITCH_TARGET")
    if target is not None and target not in TARGETS:
        raise pytest.UsageError(f"KVSWITCH_TARGET={target!r}: expected one of {list(TARGETS)}")
    return [
        pytest.param(b, marks=[pytest.mark.bmv2, pytest.mark.netns]) if t == "bmv2" else b
        for b, (a, _p, _l, t) in BUILDS.items()
        if arch in (None, a) and target in (None, t)
    ]


def _p4c(program: str, factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """p4c-bm2-ss's JSON and P4Info of ``program``, compiled once per session."""
    if program not in _compiled:
        source = p4src_dir() / program
        _compiled[program] = p4c_compile(source, factory.mktemp("p4c"), DEFINES, [source.parent])
    return _compiled[program]


def _build_target(build: str, factory: pytest.TempPathFactory) -> SwitchTarget:
    """The software switch on a build (not ``bmv2``: that one is a process, see ``target``)."""
    _arch, program, loaded_from, _target = BUILDS[build]
    source = p4src_dir() / program
    try:
        from softswitch import Switch
    except ImportError as exc:
        pytest.skip(f"software switch engine not available: {exc}")
    if loaded_from == "source":
        return Switch.from_file(str(source), defines=DEFINES, include_dirs=[str(source.parent)])
    json_path, info = _p4c(program, factory)
    return Switch.from_json(json_path, info)


@pytest.fixture(scope="session", params=_builds())
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SwitchTarget]:
    build = request.param
    if BUILDS[build][3] != "bmv2":
        yield _build_target(build, tmp_path_factory)
        return
    from .bmv2_target import bmv2_missing, bmv2_target

    why = bmv2_missing()
    if why:
        pytest.skip(f"BMv2 build: {why} (the software switch builds still run)")
    json_path, info = _p4c(BUILDS[build][1], tmp_path_factory)
    log = tmp_path_factory.mktemp("bmv2") / "simple_switch_grpc.log"
    with bmv2_target(json_path, info, log) as bmv2:
        yield bmv2  # type: ignore[misc]


@pytest.fixture
def dp(target: SwitchTarget) -> Iterator[Dataplane]:
    plane = Dataplane(target)
    wired = plane.wired
    if wired:
        target.drain()  # type: ignore[attr-defined]
    plane.reset()
    plane.setup_rack()
    yield plane
    with contextlib.ExitStack() as stack:
        stack.callback(plane.reset)
        if wired:
            target.assert_quiet()  # type: ignore[attr-defined]

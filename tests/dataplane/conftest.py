"""Fixtures of the data-plane tests: the target switch (built once per session and build) and
``dp``, a fresh test rack on it for every test. See base.py.

Every test runs on each build (fabric-tna style): the software switch on the v1model program
loaded from P4 source (``[source]``), on the BMv2 JSON and P4Info that p4c-bm2-ss writes for it
(``[p4c-json]``), on the TNA program ``kvswitch_tna.p4`` from source (``[tna]``), and BMv2's own
``simple_switch_grpc`` on p4c-bm2-ss's JSON (``[bmv2]``, bmv2_target.py). A build whose tools are
not on PATH (p4c-bm2-ss, simple_switch_grpc) or that needs root (BMv2's veth ports) is skipped
with a message. Optional filters: ``KVSWITCH_ARCH=v1model`` or ``tna`` keeps one architecture's
builds, ``KVSWITCH_TARGET=softswitch`` or ``bmv2`` one target's.

The fabric's two other programs have the same four builds each: the spine (``spine_target``,
``sp``: spine.py) and a fabric's leaf (``leaf_target``, ``lf``: leaf.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvswitch.paths import p4src_dir
from tests.p4c_bmv2.tools import p4c_compile

from .base import DEFINES, Dataplane, SwitchTarget
from .leaf import LeafPlane
from .spine import SPINE_DEFINES, SpinePlane

# build -> (architecture, top-level program, loaded from, target)
BUILDS = {
    "source": ("v1model", "kvswitch.p4", "source", "softswitch"),
    "p4c-json": ("v1model", "kvswitch.p4", "p4c-json", "softswitch"),
    "tna": ("tna", "kvswitch_tna.p4", "source", "softswitch"),
    "bmv2": ("v1model", "kvswitch.p4", "p4c-json", "bmv2"),
}
# the spine's builds (spine.py, test_spine.py): the same four of kvswitch_spine.p4 and its TNA twin
SPINE_BUILDS = {
    "spine-source": ("v1model", "kvswitch_spine.p4", "source", "softswitch"),
    "spine-p4c-json": ("v1model", "kvswitch_spine.p4", "p4c-json", "softswitch"),
    "spine-tna": ("tna", "kvswitch_spine_tna.p4", "source", "softswitch"),
    "spine-bmv2": ("v1model", "kvswitch_spine.p4", "p4c-json", "bmv2"),
}
# a fabric's leaf (leaf.py, test_fabric_leaf.py): kvswitch_leaf.p4 and its TNA twin
LEAF_BUILDS = {
    "leaf-source": ("v1model", "kvswitch_leaf.p4", "source", "softswitch"),
    "leaf-p4c-json": ("v1model", "kvswitch_leaf.p4", "p4c-json", "softswitch"),
    "leaf-tna": ("tna", "kvswitch_leaf_tna.p4", "source", "softswitch"),
    "leaf-bmv2": ("v1model", "kvswitch_leaf.p4", "p4c-json", "bmv2"),
}
# each family's BMv2 fixture
_BMV2 = {"bmv2": BUILDS, "spine_bmv2": SPINE_BUILDS, "leaf_bmv2": LEAF_BUILDS}
TARGETS = ("softswitch", "bmv2")

_compiled: dict[str, tuple[Path, Any]] = {}


def _build(build: str) -> tuple[str, str, str, str]:
    return BUILDS.get(build) or SPINE_BUILDS.get(build) or LEAF_BUILDS[build]


def _defines(program: str) -> dict[str, str]:
    return SPINE_DEFINES if "spine" in program else DEFINES


def _env(name: str, allowed: set[str]) -> str | None:
    value = os.environ.get(name)
    if value is not None and value not in allowed:
        raise pytest.UsageError(f"{name}={value!r}: expected one of {sorted(allowed)}")
    return value


def on_target(target: str, value: Any) -> list[Any]:
    """``value`` as a parameter for ``target``: [] when KVSWITCH_TARGET keeps another target;
    on BMv2, marked ``bmv2`` and ``netns`` (pyproject.toml's markers)."""
    if _env("KVSWITCH_TARGET", set(TARGETS)) not in (None, target):
        return []
    if target == "bmv2":
        return [pytest.param(value, marks=[pytest.mark.bmv2, pytest.mark.netns])]
    return [value]


def _builds(builds: dict[str, tuple[str, str, str, str]] = BUILDS) -> list[Any]:
    """The builds the suite runs on: all, or those KVSWITCH_ARCH and KVSWITCH_TARGET keep."""
    arch = _env("KVSWITCH_ARCH", {b[0] for b in builds.values()})
    return [p for b, (a, _p, _l, t) in builds.items() if arch in (None, a) for p in on_target(t, b)]


def _p4c(program: str, factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """p4c-bm2-ss's JSON and P4Info of ``program``, compiled once per session."""
    if program not in _compiled:
        source = p4src_dir() / program
        defines = _defines(program)
        _compiled[program] = p4c_compile(source, factory.mktemp("p4c"), defines, [source.parent])
    return _compiled[program]


def _build_target(build: str, factory: pytest.TempPathFactory) -> SwitchTarget:
    """The software switch on a build (not ``bmv2``: that one is a process, see ``target``)."""
    _arch, program, loaded_from, _target = _build(build)
    source = p4src_dir() / program
    try:
        from softswitch import Switch
    except ImportError as exc:
        pytest.skip(f"software switch engine not available: {exc}")
    if loaded_from == "source":
        defines = _defines(program)
        return Switch.from_file(str(source), defines=defines, include_dirs=[str(source.parent)])
    json_path, info = _p4c(program, factory)
    return Switch.from_json(json_path, info)


def _bmv2(program: str, factory: pytest.TempPathFactory) -> Iterator[SwitchTarget]:
    """BMv2's simple_switch_grpc on p4c-bm2-ss's JSON of ``program``."""
    from .bmv2_target import bmv2_missing, bmv2_target

    if not on_target("bmv2", "bmv2"):
        pytest.skip("KVSWITCH_TARGET keeps the software switch only")
    why = bmv2_missing()
    if why:
        pytest.skip(f"BMv2 build: {why} (the software switch builds still run)")
    json_path, info = _p4c(program, factory)
    log = factory.mktemp("bmv2") / "simple_switch_grpc.log"
    with bmv2_target(json_path, info, log) as switch:
        yield switch  # type: ignore[misc]


@pytest.fixture(scope="session")
def bmv2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwitchTarget]:
    """BMv2's simple_switch_grpc on p4c-bm2-ss's JSON of kvswitch.p4, one per session (the
    ``[bmv2]`` build; test_trust.py asks for it too)."""
    yield from _bmv2(BUILDS["bmv2"][1], tmp_path_factory)


@pytest.fixture(scope="session")
def spine_bmv2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwitchTarget]:
    """BMv2 on the spine's JSON (the ``[spine-bmv2]`` build), one per session."""
    yield from _bmv2(SPINE_BUILDS["spine-bmv2"][1], tmp_path_factory)


@pytest.fixture(scope="session")
def leaf_bmv2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwitchTarget]:
    """BMv2 on the fabric leaf's JSON (the ``[leaf-bmv2]`` build), one per session."""
    yield from _bmv2(LEAF_BUILDS["leaf-bmv2"][1], tmp_path_factory)


def _target(request: pytest.FixtureRequest, factory: pytest.TempPathFactory) -> SwitchTarget:
    """The switch of build ``request.param``: BMv2's process fixture, or the software switch."""
    build = request.param
    if _build(build)[3] == "bmv2":
        fixture = next(f for f, builds in _BMV2.items() if build in builds)
        return request.getfixturevalue(fixture)  # type: ignore[no-any-return]
    return _build_target(build, factory)


@pytest.fixture(scope="session", params=_builds())
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> SwitchTarget:
    return _target(request, tmp_path_factory)


@pytest.fixture(scope="session", params=_builds(SPINE_BUILDS))
def spine_target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> SwitchTarget:
    """The spine program on each of its builds (as ``target`` for the rack switch's)."""
    return _target(request, tmp_path_factory)


def fresh_plane(target: SwitchTarget, kind: type[Dataplane] = Dataplane) -> Iterator[Dataplane]:
    """A test rack (or ``kind``'s switch: spine.SpinePlane) on ``target`` from empty tables and
    zeroed state; on BMv2, checked at the end for packets that came out after a send's wait."""
    plane = kind(target)
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


@pytest.fixture
def dp(target: SwitchTarget) -> Iterator[Dataplane]:
    yield from fresh_plane(target)


@pytest.fixture
def sp(spine_target: SwitchTarget) -> Iterator[Dataplane]:
    """A fresh spine fabric (spine.py) on each spine build."""
    yield from fresh_plane(spine_target, SpinePlane)


@pytest.fixture(scope="session", params=_builds(LEAF_BUILDS))
def leaf_target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> SwitchTarget:
    """A fabric's leaf program on each of its builds."""
    return _target(request, tmp_path_factory)


@pytest.fixture
def lf(leaf_target: SwitchTarget) -> Iterator[Dataplane]:
    """The test rack (base.py) on a fabric's leaf, with two spines above it (leaf.py)."""
    yield from fresh_plane(leaf_target, LeafPlane)

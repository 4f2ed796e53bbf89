"""Fixtures of the data-plane tests: the target switch (built once per session and build, chosen
by ``KVSWITCH_TARGET``) and ``dp``, a fresh test rack on it for every test. See base.py.

On the software switch every test runs on each build (fabric-tna style): the v1model program
loaded from P4 source (``[source]``), the BMv2 JSON and P4Info that p4c-bm2-ss writes for it
(``[p4c-json]``, skipped with a message when p4c-bm2-ss is not on PATH), and the TNA program
``kvswitch_tna.p4`` from source (``[tna]``). ``KVSWITCH_ARCH=v1model`` or ``tna`` keeps one
architecture's builds."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from p4c_bmv2.tools import p4c_compile

from kvswitch.paths import p4src_dir

from .base import DEFINES, Dataplane, SwitchTarget

# build -> (architecture, top-level program, loaded from)
BUILDS = {
    "source": ("v1model", "kvswitch.p4", "source"),
    "p4c-json": ("v1model", "kvswitch.p4", "p4c-json"),
    "tna": ("tna", "kvswitch_tna.p4", "source"),
}


def _builds() -> list[str]:
    """The builds the suite runs on: all, or those of the architecture KVSWITCH_ARCH names."""
    arch = os.environ.get("KVSWITCH_ARCH")
    archs = {a for a, _p, _l in BUILDS.values()}
    if arch is not None and arch not in archs:
        raise pytest.UsageError(f"KVSWITCH_ARCH={arch!r}: expected one of {sorted(archs)}")
    return [b for b, (a, _p, _l) in BUILDS.items() if arch in (None, a)]


def _build_target(build: str, tmp: Path) -> SwitchTarget:
    target = os.environ.get("KVSWITCH_TARGET", "softswitch")
    _arch, program, loaded_from = BUILDS[build]
    source = p4src_dir() / program
    if target == "bmv2":
        if shutil.which("simple_switch_grpc") is None:
            pytest.skip("KVSWITCH_TARGET=bmv2: simple_switch_grpc is not installed on this machine")
        pytest.skip("KVSWITCH_TARGET=bmv2: no BMv2 adapter for the in-process test API yet")
    if target != "softswitch":
        pytest.fail(f"KVSWITCH_TARGET={target!r}: expected 'softswitch' or 'bmv2'")
    try:
        from softswitch import Switch
    except ImportError as exc:
        pytest.skip(f"software switch engine not available: {exc}")
    if loaded_from == "source":
        return Switch.from_file(str(source), defines=DEFINES, include_dirs=[str(source.parent)])
    json_path, info = p4c_compile(source, tmp, DEFINES, [source.parent])
    return Switch.from_json(json_path, info)


@pytest.fixture(scope="session", params=_builds())
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> SwitchTarget:
    return _build_target(request.param, tmp_path_factory.mktemp("p4c"))


@pytest.fixture
def dp(target: SwitchTarget) -> Iterator[Dataplane]:
    plane = Dataplane(target)
    plane.reset()
    plane.setup_rack()
    yield plane
    plane.reset()

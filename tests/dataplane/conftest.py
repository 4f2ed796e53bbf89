"""Fixtures of the data-plane tests: the target switch (built once per session and architecture:
``KVSWITCH_TARGET`` chooses the switch, ``KVSWITCH_ARCH`` one of the builds, v1model or tna; both
builds run by default) and ``dp``, a fresh test rack on it for every test. See base.py."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from kvswitch.paths import p4src_dir

from .base import DEFINES, Dataplane, SwitchTarget

ARCHS = {"v1model": "kvswitch.p4", "tna": "kvswitch_tna.p4"}


def _archs() -> list[str]:
    """The builds the suite runs on: both, or the one KVSWITCH_ARCH names."""
    arch = os.environ.get("KVSWITCH_ARCH")
    if arch is None:
        return list(ARCHS)
    if arch not in ARCHS:
        raise pytest.UsageError(f"KVSWITCH_ARCH={arch!r}: expected one of {sorted(ARCHS)}")
    return [arch]


def _build_target(arch: str) -> SwitchTarget:
    target = os.environ.get("KVSWITCH_TARGET", "softswitch")
    source = p4src_dir() / ARCHS[arch]
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
    return Switch.from_file(str(source), defines=DEFINES, include_dirs=[str(source.parent)])


@pytest.fixture(scope="session", params=_archs())
def target(request: pytest.FixtureRequest) -> SwitchTarget:
    """The KVSwitch data plane, once per build (fabric-tna's way: same tests, the target and the
    architecture chosen by parameters)."""
    return _build_target(request.param)


@pytest.fixture
def dp(target: SwitchTarget) -> Iterator[Dataplane]:
    plane = Dataplane(target)
    plane.reset()
    plane.setup_rack()
    yield plane
    plane.reset()

"""Fixtures of the data-plane tests: the target switch (built once per session, chosen by
``KVSWITCH_TARGET``) and ``dp``, a fresh test rack on it for every test. See base.py."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from kvswitch.paths import p4src_dir

from .base import DEFINES, Dataplane, SwitchTarget


def _build_target() -> SwitchTarget:
    target = os.environ.get("KVSWITCH_TARGET", "softswitch")
    source = p4src_dir() / "kvswitch.p4"
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


@pytest.fixture(scope="session")
def target() -> SwitchTarget:
    return _build_target()


@pytest.fixture
def dp(target: SwitchTarget) -> Iterator[Dataplane]:
    plane = Dataplane(target)
    plane.reset()
    plane.setup_rack()
    yield plane
    plane.reset()

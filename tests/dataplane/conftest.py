"""Fixtures of the data-plane tests: the target switch (built once per session, chosen by
``KVSWITCH_TARGET``) and ``dp``, a fresh test rack on it for every test. See base.py.

On the software switch every test runs twice (fabric-tna style): on the program loaded from P4
source (``[source]``) and on the BMv2 JSON and P4Info that p4c-bm2-ss writes for it
(``[p4c-json]``, skipped with a message when p4c-bm2-ss is not on PATH)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from p4c_bmv2.tools import p4c_compile

from kvswitch.paths import p4src_dir

from .base import DEFINES, Dataplane, SwitchTarget


def _build_target(loaded_from: str, tmp: Path) -> SwitchTarget:
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
    if loaded_from == "source":
        return Switch.from_file(str(source), defines=DEFINES, include_dirs=[str(source.parent)])
    json_path, info = p4c_compile(source, tmp, DEFINES, [source.parent])
    return Switch.from_json(json_path, info)


@pytest.fixture(scope="session", params=["source", "p4c-json"])
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

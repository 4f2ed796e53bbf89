"""The device config format: P4 source bundles."""

from __future__ import annotations

import json

import pytest

from softswitch import P4Error
from softswitch.runtime.bundle import FORMAT, Bundle, BundleError
from tests.softswitch.runtime.conftest import PROGRAM


def test_round_trip_and_defines() -> None:
    bundle = Bundle.from_file(PROGRAM, {"TABLE_SIZE": "77"})
    # every source of the folder travels: the TNA twin beside it too
    assert set(bundle.files) == {"runtime.p4", "runtime_tna.p4", "include/headers.p4"}
    again = Bundle.from_bytes(bundle.to_bytes())
    assert again == bundle
    [lpm] = [t for t in again.compile().p4info.tables if t.preamble.alias == "ipv4_lpm"]
    assert lpm.size == 77


@pytest.mark.parametrize(
    "doc",
    [
        {"format": "other", "main": "a.p4", "files": {"a.p4": ""}},
        {"format": FORMAT, "main": "b.p4", "files": {"a.p4": ""}},
        {"format": FORMAT, "main": "a.p4", "files": {"a.p4": "", "../escape.p4": ""}},
        {"format": FORMAT, "main": "/abs.p4", "files": {"/abs.p4": ""}},
        {"format": FORMAT, "main": "a.p4", "files": {"a.p4": 3}},
        {"format": FORMAT, "main": "a.p4", "files": {"a.p4": ""}, "include_dirs": ["../x"]},
    ],
)
def test_bad_bundles_refused(doc: dict[str, object]) -> None:
    with pytest.raises(BundleError):
        Bundle.from_bytes(json.dumps(doc).encode())


def test_not_json_refused() -> None:
    with pytest.raises(BundleError):
        Bundle.from_bytes(b"\xff\x00not json")


def test_program_error_names_the_file() -> None:
    bundle = Bundle("bad.p4", {"bad.p4": "#include <core.p4>\ncontrol C() { apply { x = ; } }\n"})
    with pytest.raises(P4Error) as exc:
        bundle.compile()
    assert "bad.p4:" in str(exc.value)

"""The software switch's P4Info kept between controller starts (``program.from_source``, about
1 s): named by the bundle (sources and defines), so another program or define compiles again."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvswitch.controller.program import from_source
from softswitch.runtime.bundle import Bundle

PROGRAM = Path(__file__).parents[2] / "softswitch" / "p4" / "preproc.p4"  # register<>(SLOTS)


def test_p4info_kept_by_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = from_source(PROGRAM, {"SLOTS": "4"}, cache=tmp_path)
    assert [r.size for r in first.p4info.registers] == [4]
    assert len(list(tmp_path.glob("*.p4info.txtpb"))) == 1

    compile_ = Bundle.compile
    monkeypatch.setattr(Bundle, "compile", lambda self: pytest.fail("compiled, not kept"))
    assert from_source(PROGRAM, {"SLOTS": "4"}, cache=tmp_path) == first
    monkeypatch.setattr(Bundle, "compile", compile_)

    other = from_source(PROGRAM, {"SLOTS": "16"}, cache=tmp_path)
    assert [r.size for r in other.p4info.registers] == [16]
    assert len(list(tmp_path.glob("*.p4info.txtpb"))) == 2
    # a damaged file is compiled again
    for kept in tmp_path.glob("*.p4info.txtpb"):
        kept.write_text("tables {")
    assert from_source(PROGRAM, {"SLOTS": "4"}, cache=tmp_path) == first

"""Actions called directly from an apply block, as p4c-bm2-ss compiles them now (the kept JSON in
tests/softswitch/p4 is one compile of the default build): p4c's P4Info lists them although their
hidden tables are not listed, and the software switch's P4Info from p4c's JSON must equal it, or
SetForwardingPipelineConfig refuses the pair. With -DMARK_DIRECT_ONLY, `mark` is called directly
only and p4c lists it without parameters. Needs p4c-bm2-ss (about 3 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch import Switch
from softswitch.runtime.p4runtime_server import p4info_mismatch
from tests.softswitch.test_bmv2_json import CALLS, names_and_ids, set_pipeline

from .tools import p4c_compile

SOURCE = Path(__file__).resolve().parents[1] / "softswitch" / "p4" / "direct_call.p4"


@pytest.mark.parametrize("defines", [{}, {"MARK_DIRECT_ONLY": "1"}], ids=["table", "direct-only"])
def test_p4c_json_of_direct_calls_keeps_p4c_p4info(defines: dict[str, str], tmp_path: Path) -> None:
    json_path, info = p4c_compile(SOURCE, tmp_path, defines)
    mark = next(a for a in info.actions if a.preamble.name == "MyIngress.mark")
    assert len(mark.params) == (0 if defines else 1)
    from_json = Switch.from_json(json_path, info)
    assert names_and_ids(from_json.p4info) == names_and_ids(info)
    assert p4info_mismatch(from_json.p4info, info) == ""
    assert set_pipeline(json_path.read_bytes(), info).pipeline is not None
    from_source = Switch.from_file(SOURCE, defines=defines)
    for pkt in CALLS:
        assert from_json.process(1, pkt) == from_source.process(1, pkt)

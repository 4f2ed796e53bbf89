"""``kvswitch p4c``: the P4Info in p4c's three formats, the source bundle, and a BMv2-style JSON
that the switch runs and simple_switch_CLI reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from finsy.proto import p4i
from google.protobuf import json_format, text_format

from kvswitch import cli
from softswitch.runtime.bundle import Bundle
from softswitch.runtime.device import Device
from softswitch.runtime.thrift_server import StandardHandler
from tests.softswitch.runtime.conftest import PROGRAM


def names_and_ids(info: p4i.P4Info) -> set[tuple[str, int, str, str]]:
    return {
        (kind, e.preamble.id, e.preamble.name, e.preamble.alias)
        for kind in ("tables", "actions", "counters", "direct_counters", "registers", "meters")
        for e in getattr(info, kind)
    }


def test_p4c_writes_p4info_device_config_and_json(tmp_path: Path) -> None:
    out = {ext: tmp_path / f"rt.{ext}" for ext in ("txtpb", "p4info.json", "bin")}
    argv = ["p4c", str(PROGRAM), "-o", str(tmp_path / "rt.json")]
    argv += ["--p4runtime-files", ",".join(str(p) for p in out.values())]
    argv += ["--device-config", str(tmp_path / "rt.cfg")]
    assert cli.main(argv) == 0

    want = Bundle.from_file(PROGRAM).compile().p4info
    text = text_format.Parse(out["txtpb"].read_text(), p4i.P4Info())
    as_json = json_format.Parse(out["p4info.json"].read_text(), p4i.P4Info())
    binary = p4i.P4Info.FromString(out["bin"].read_bytes())
    assert text == want and as_json == want and binary == want
    assert out["p4info.json"].read_text().lstrip().startswith("{")

    # the device config and the BMv2-style JSON both load; the JSON drives the Thrift API
    for name in ("rt.cfg", "rt.json"):
        device = Device()
        device.install(device.load_config((tmp_path / name).read_bytes()))
        assert device.require().p4info == want
    handler = StandardHandler(device)
    assert '"tables"' in handler.bm_get_config()
    assert handler.bm_mt_get_num_entries(0, "l2") == 0


def test_p4c_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.p4"
    bad.write_text("control C() { apply { x = 1; } }\n")
    assert cli.main(["p4c", str(bad), "-o", str(tmp_path / "x.json")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"kvswitch p4c: {bad}:1:") and "\n" not in err
    assert not (tmp_path / "x.json").exists()


def test_p4info_matches_p4c(tmp_path: Path) -> None:
    from tests.p4c_bmv2.tools import p4c_compile  # skips without p4c-bm2-ss

    _, ref = p4c_compile(PROGRAM, tmp_path, include_dirs=[PROGRAM.parent])
    ours = tmp_path / "ours.txtpb"
    assert cli.main(["p4c", str(PROGRAM), "--p4runtime-files", str(ours)]) == 0
    assert names_and_ids(text_format.Parse(ours.read_text(), p4i.P4Info())) == names_and_ids(ref)

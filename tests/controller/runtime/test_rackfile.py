"""The rack file: what the topology writes parses; everything else is a clear RackFileError."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from kvswitch.controller.rackfile import Host, RackFile, RackFileError
from tests.controller.runtime.conftest import RACK_JSON


def test_parse_contract_example(tmp_path: Path) -> None:
    raw = copy.deepcopy(RACK_JSON)
    raw["servers"][0]["control"] = "unix:/tmp/kvswitch-run/s1.ctl"
    path = tmp_path / "rack.json"
    path.write_text(json.dumps(raw))
    rack = RackFile.load(path)
    assert rack.kvs_port == 8900 and rack.switch_ip == 0x0A0000FE
    assert rack.switch_mac == 0x0200000000FE
    assert [s.name for s in rack.servers] == ["s1", "s2", "s3"]
    assert rack.servers[0].control == "unix:/tmp/kvswitch-run/s1.ctl"
    assert rack.servers[1].control is None and rack.servers[2].ip_text == "10.0.0.3"
    assert rack.clients[0].port == 9
    r = rack.rack()
    assert len(r) == 3 and r.servers[1].ip == 0x0A000002 and r.servers[1].port == 2


def _broken(change: Any) -> dict[str, Any]:
    raw = copy.deepcopy(RACK_JSON)
    change(raw)
    return raw


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "JSON object"),
        (_broken(lambda r: r.pop("switch")), "switch must be an object"),
        (_broken(lambda r: r["switch"].update(ip="10.0.0")), "switch.ip"),
        (_broken(lambda r: r["switch"].update(mac="02:00:00:00:00")), "switch.mac"),
        (_broken(lambda r: r["switch"].update(mac="02:00:00:00:00:zz")), "switch.mac"),
        (_broken(lambda r: r.update(servers=[])), "no servers"),
        (_broken(lambda r: r.update(servers={})), "servers must be a list"),
        (_broken(lambda r: r.update(kvs_port=0)), "kvs_port"),
        (_broken(lambda r: r.update(kvs_port=True)), "kvs_port"),
        (_broken(lambda r: r["servers"][1].update(port="2")), "servers[1].port"),
        (_broken(lambda r: r["servers"][1].update(port=511)), "servers[1].port"),
        (_broken(lambda r: r["servers"][1].update(name="")), "servers[1].name"),
        (_broken(lambda r: r["servers"][1].update(control=5)), "servers[1].control"),
        (_broken(lambda r: r["servers"][1].update(ip="10.0.0.1")), "share a ip"),
        (_broken(lambda r: r["clients"][0].update(mac="02:00:00:00:00:01")), "share a mac"),
        (_broken(lambda r: r["servers"][1].update(port=1)), "share a switch port"),
        (_broken(lambda r: r["clients"].append(7)), "clients[1] must be an object"),
    ],
)
def test_bad_rack_files(raw: Any, message: str) -> None:
    with pytest.raises(RackFileError, match=re.escape(message)):
        RackFile.parse(raw)


def test_unreadable(tmp_path: Path) -> None:
    with pytest.raises(RackFileError, match="absent"):
        RackFile.load(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(RackFileError, match=r"bad\.json"):
        RackFile.load(bad)


def test_write_round_trip(tmp_path: Path) -> None:
    """What RackFile writes is the contract's JSON and parses back to the same rack."""
    raw = copy.deepcopy(RACK_JSON)
    raw["servers"][0]["control"] = "unix:/tmp/kvswitch-run/s1.ctl"
    raw["servers"][2]["member"] = False
    rack = RackFile.parse(raw)
    assert rack.document() == raw
    path = tmp_path / "rack.json"
    rack.write(path)
    assert json.loads(path.read_text()) == raw
    again = RackFile.load(path)
    assert again == rack and not again.servers[2].member and again.servers[1].member
    assert again.servers[0].mac_text == "02:00:00:00:00:01"


def test_write_refuses_what_parse_refuses(tmp_path: Path) -> None:
    rack = RackFile.parse(RACK_JSON)
    twin = rack.servers[0]
    broken = RackFile(rack.kvs_port, rack.switch_ip, rack.switch_mac, (twin, twin), ())
    path = tmp_path / "rack.json"
    with pytest.raises(RackFileError, match="share a name"):
        broken.write(path)
    assert not path.exists()


def test_host_of_text() -> None:
    host = RackFile.parse(RACK_JSON).servers[1]
    assert Host.of("s2", "10.0.0.2", "02:00:00:00:00:02", 2) == host
    with pytest.raises(ValueError, match=r"s2\.mac"):
        Host.of("s2", "10.0.0.2", "02:00:00:00:00", 2)


FABRIC = ["10.9.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.9.0.2"]


def test_a_fabric_ring_round_trips_and_must_hold_the_rack_in_order() -> None:
    raw = copy.deepcopy(RACK_JSON)
    raw["fabric"] = {"servers": FABRIC, "first": 1}
    rack = RackFile.parse(raw)
    assert rack.fabric_first == 1 and len(rack.fabric_ring) == 5
    assert RackFile.parse(rack.document()) == rack
    for fabric, message in [
        ({"servers": FABRIC, "first": 0}, "must be the rack's servers"),
        ({"servers": FABRIC[:3], "first": 1}, "must be the rack's servers"),
        ({"servers": FABRIC, "first": 9}, "fabric.first"),
        ({"servers": [*FABRIC, "10.9.0.1"], "first": 1}, "address twice"),
        ({"servers": "10.0.0.1"}, "fabric.servers must be a list"),
    ]:
        raw["fabric"] = fabric
        with pytest.raises(RackFileError, match=re.escape(message)):
            RackFile.parse(raw)

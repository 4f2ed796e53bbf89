"""The engine on the BMv2 JSON p4c-bm2-ss wrote (p4/basic.p4c.json and its P4Info, written by
p4c-bm2-ss v1.2.4.8 from p4/basic.p4, kept here so these tests run without p4c): same P4Info and
same packets, registers and counters as from source; what it cannot run is refused, naming the
object and the primitive, and nothing is loaded."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from finsy.proto import p4i
from google.protobuf import text_format
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from softswitch import Switch
from softswitch.frontend.bmv2_json import Bmv2JsonError
from softswitch.runtime.bundle import Bundle
from softswitch.runtime.device import Device
from softswitch.switch import load_json_program
from tests.softswitch.conftest import P4_DIR

JSON = P4_DIR / "basic.p4c.json"
P4INFO = text_format.Parse((P4_DIR / "basic.p4c.p4info.txtpb").read_text(), p4i.P4Info())


def names_and_ids(info: Any) -> set[tuple[str, int, str, str]]:
    return {
        (kind, e.preamble.id, e.preamble.name, e.preamble.alias)
        for kind in ("tables", "actions", "counters", "direct_counters", "registers")
        for e in getattr(info, kind)
    }


def configured(sw: Switch) -> Switch:
    sw.table_add("ipv4_lpm", {"dst": (0x0A000000, 8)}, "ipv4_forward", {"dstAddr": 7, "port": 3})
    sw.table_add("ipv4_lpm", {"dst": (0x0B000000, 8)}, "set_mcast", {"grp": 4})
    sw.mc_group_set(4, [(1, 1), (2, 9)])
    return sw


PACKETS = [
    (1, bytes(Ether() / IP(dst="10.1.2.3", ttl=9) / UDP())),  # LPM hit, TTL, checksum
    (2, bytes(Ether() / IP(dst="11.0.0.1") / UDP())),  # multicast, egress_rid in ip id
    (3, bytes(Ether() / IP(dst="12.0.0.1") / UDP())),  # miss: default drop
    (2, bytes(Ether() / IP(dst="10.0.0.1", chksum=1) / UDP())),  # bad checksum
    (1, bytes(Ether(type=0x86DD) / (b"\x60" + bytes(40)))),  # not IPv4
    (4, bytes(Ether()) + b"\x45"),  # runt
]


def test_json_runs_as_the_source() -> None:
    from_json = configured(Switch.from_json(JSON, P4INFO))
    from_source = configured(Switch.from_file(P4_DIR / "basic.p4"))
    assert names_and_ids(from_json.p4info) == names_and_ids(P4INFO)
    for port, pkt in PACKETS:
        assert from_json.process(port, pkt) == from_source.process(port, pkt)
    assert from_json.register_read("last_ttl") == from_source.register_read("last_ttl")
    for i in range(5):
        assert from_json.counter_read("port_counter", i) == from_source.counter_read(
            "port_counter", i
        )
    assert Switch.from_json(JSON).p4info.tables[0].preamble.name == "MyIngress.ipv4_lpm"


def broken(edit: Any) -> bytes:
    doc = json.loads(JSON.read_text())
    edit(doc)
    return json.dumps(doc).encode()


def action(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(a for a in doc["actions"] if a["name"] == name)


def lpm_table(doc: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in doc["pipelines"][0]["tables"] if t["name"] == "MyIngress.ipv4_lpm")


def ipv4_type(doc: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in doc["header_types"] if t["name"] == "ipv4_t")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: action(d, "MyIngress.set_mcast")["primitives"].append(
                {"op": "generate_digest", "parameters": []}
            ),
            "action MyIngress.set_mcast, primitive 'generate_digest': primitive not supported",
        ),
        (
            lambda d: lpm_table(d).update(type="indirect"),
            "table MyIngress.ipv4_lpm: table type 'indirect' (action profiles) is not supported",
        ),
        (
            lambda d: d["pipelines"][0]["conditionals"][0]["expression"].update(
                value={"op": "two_comp_mod", "left": None, "right": None}
            ),
            "expression operator 'two_comp_mod' is not supported",
        ),
        (
            lambda d: ipv4_type(d)["fields"][0].__setitem__(2, True),
            "signed fields are not supported",
        ),
        (lambda d: d.pop("deparsers"), "not a BMv2 JSON"),
    ],
    ids=["primitive", "action-profile", "operator", "signed", "not-bmv2"],
)
def test_refused_with_the_object_named(edit: Any, message: str) -> None:
    with pytest.raises(Bmv2JsonError) as exc:
        load_json_program(broken(edit), "prog.json")
    assert str(exc.value).startswith("prog.json: ") and message in str(exc.value)


def test_a_refused_config_leaves_the_running_pipeline() -> None:
    device = Device()
    device.install(device.load(Bundle.from_file(P4_DIR / "basic.p4")))
    running = device.pipeline
    bad = broken(lambda d: lpm_table(d).update(type="indirect"))
    with pytest.raises(Bmv2JsonError):
        device.load_config(bad, copy.deepcopy(P4INFO))
    assert device.pipeline is running

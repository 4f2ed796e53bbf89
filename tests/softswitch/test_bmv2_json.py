"""The engine on the BMv2 JSON p4c-bm2-ss wrote (p4/basic.p4c.json, p4/direct_call.p4c.json and
their P4Info, written by p4c-bm2-ss v1.2.4.8 from p4/basic.p4 and p4/direct_call.p4, kept here so
these tests run without p4c): same P4Info and same packets, registers and counters as from source;
what it cannot run is refused, naming the object and the primitive, and nothing is loaded."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from finsy.proto import p4i, p4r
from google.protobuf import text_format
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from softswitch import Switch
from softswitch.frontend.bmv2_json import Bmv2JsonError
from softswitch.runtime.bundle import Bundle
from softswitch.runtime.device import ControlError, Device
from softswitch.runtime.p4runtime_server import P4RuntimeServicer, p4info_mismatch
from softswitch.switch import load_json_program
from tests.softswitch.conftest import P4_DIR

JSON = P4_DIR / "basic.p4c.json"
P4INFO = text_format.Parse((P4_DIR / "basic.p4c.p4info.txtpb").read_text(), p4i.P4Info())
CALLS_JSON = P4_DIR / "direct_call.p4c.json"
CALLS_P4INFO = text_format.Parse(
    (P4_DIR / "direct_call.p4c.p4info.txtpb").read_text(), p4i.P4Info()
)


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


def set_pipeline(device_config: bytes, info: Any) -> Device:
    """SetForwardingPipelineConfig (VERIFY_AND_COMMIT) as the P4Runtime server answers it."""
    device = Device()
    req = p4r.SetForwardingPipelineConfigRequest(
        action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
    )
    req.config.p4info.CopyFrom(info)
    req.config.p4_device_config = device_config
    P4RuntimeServicer(device).set_pipeline(req)
    return device


def calls_configured(sw: Switch) -> Switch:
    sw.table_add("by_dst", {"hdr.eth.dst": 0xB}, "mark", {"tag": 0x1234})
    sw.table_add("by_dst", {"hdr.eth.dst": 0xC}, "forward", {"port": 5})
    return sw


def mac(n: int) -> str:
    return ":".join(f"{b:02x}" for b in n.to_bytes(6, "big"))


CALLS = [  # (the table's action first, then the apply block's direct calls)
    bytes(Ether(dst=mac(0xC), src=mac(1), type=0x1111)),  # forward from the table
    bytes(Ether(dst=mac(0xC), src=mac(0), type=0x1111)),  # a direct refuse()
    bytes(Ether(dst=mac(0xA), src=mac(0), type=0xFFFF)),  # two direct refuse()
    bytes(Ether(dst=mac(0xD), src=mac(2), type=0x0800)),  # a direct mark(0x88b5)
    bytes(Ether(dst=mac(0xD), src=mac(2), type=0x0801)),  # a direct mark(0x1111)
    bytes(Ether(dst=mac(0xB), src=mac(2), type=0x0800)),  # mark(0x1234): no direct mark
    bytes(Ether(dst=mac(0xB), src=mac(2), type=0xFFFF)),  # mark(0x1234): no direct refuse
]


def test_directly_called_actions_keep_p4c_p4info() -> None:
    """p4c wraps each direct call (``refuse();``, ``mark(0x88b5);``) in a hidden table that its
    P4Info does not list, but the actions stay in its P4Info: the JSON's program keeps them with
    their ids, so the P4Runtime server accepts the pair, and runs as the source does."""
    from_json = Switch.from_json(CALLS_JSON, CALLS_P4INFO)
    assert names_and_ids(from_json.p4info) == names_and_ids(CALLS_P4INFO)
    assert p4info_mismatch(from_json.p4info, CALLS_P4INFO) == ""
    device = set_pipeline(CALLS_JSON.read_bytes(), CALLS_P4INFO)
    assert device.pipeline is not None
    from_source = calls_configured(Switch.from_file(P4_DIR / "direct_call.p4"))
    calls_configured(from_json)
    outs = [from_json.process(1, pkt) for pkt in CALLS]
    assert outs == [from_source.process(1, pkt) for pkt in CALLS]
    assert [(p, Ether(f).src, Ether(f).type) for [(p, f)] in outs] == [
        (5, "00:00:00:00:00:01", 0x1111),
        (2, "00:00:00:00:00:01", 0x1111),
        (2, "00:00:00:00:00:02", 0xFFFF),
        (1, "00:00:00:00:00:02", 0x88B5),
        (1, "00:00:00:00:00:02", 0x1111),
        (1, "00:00:00:00:00:02", 0x1234),
        (1, "00:00:00:00:00:02", 0x1234),
    ]


def mismatched(edit: Any) -> Any:
    info = copy.deepcopy(CALLS_P4INFO)
    edit(info)
    return info


def p4info_action(info: Any, name: str) -> Any:
    return next(a for a in info.actions if a.preamble.name == name)


@pytest.mark.parametrize(
    "edit",
    [
        lambda i: i.actions.remove(p4info_action(i, "MyIngress.forward")),
        lambda i: setattr(p4info_action(i, "MyIngress.refuse").preamble, "name", "MyIngress.no"),
        lambda i: setattr(p4info_action(i, "MyIngress.mark").params[0], "bitwidth", 8),
        lambda i: i.actions.add().preamble.MergeFrom(
            p4i.Preamble(id=0x01000123, name="MyIngress.other", alias="other")
        ),
    ],
    ids=["action-missing", "other-name", "other-width", "extra-action"],
)
def test_a_p4info_that_does_not_match_the_json_is_refused(edit: Any) -> None:
    """A table's action missing, a directly called action renamed, a parameter's width, an action
    the program has not: refused. (A P4Info without ``refuse`` matches: the JSON's program then
    writes that call out in place, as for p4c's own hidden actions.)"""
    with pytest.raises(ControlError) as exc:
        set_pipeline(CALLS_JSON.read_bytes(), mismatched(edit))
    assert exc.value.code == "INVALID_ARGUMENT"
    assert exc.value.message == "p4info does not match the program: actions differ"


def _saturating(doc: dict[str, Any]) -> None:
    """ipv4_forward also does diffserv = diffserv |-| 100 and identification = identification
    |+| 0xfff0, as p4c-bm2-ss writes them (usat_cast of the exact sum or difference)."""

    def usat(op: str, field: str, k: str, width: int) -> dict[str, Any]:
        exact = {"op": op, "left": {"type": "field", "value": ["ipv4", field]}}
        exact["right"] = {"type": "hexstr", "value": k}
        return {
            "type": "expression",
            "value": {
                "op": "usat_cast",
                "left": {"type": "expression", "value": exact},
                "right": {"type": "hexstr", "value": hex(width)},
            },
        }

    for field, op, k, width in (
        ("diffserv", "-", "0x64", 8),
        ("identification", "+", "0xfff0", 16),
    ):
        action(doc, "MyIngress.ipv4_forward")["primitives"].append(
            {
                "op": "assign",
                "parameters": [
                    {"type": "field", "value": ["ipv4", field]},
                    usat(op, field, k, width),
                ],
            }
        )


@pytest.mark.parametrize(
    ("tos", "ip_id", "out_tos", "out_id"),
    [(0, 5, 0, 0xFFF5), (150, 0x20, 50, 0xFFFF), (100, 0xF, 0, 0xFFFF), (255, 0, 155, 0xFFF0)],
)
def test_saturating_arithmetic_clamps(tos: int, ip_id: int, out_tos: int, out_id: int) -> None:
    sw = configured(Switch(load_json_program(broken(_saturating), "sat.json")))
    [(port, out)] = sw.process(1, bytes(Ether() / IP(dst="10.1.2.3", tos=tos, id=ip_id) / UDP()))
    assert port == 3 and (Ether(out)[IP].tos, Ether(out)[IP].id) == (out_tos, out_id)


@pytest.mark.parametrize(
    ("inner", "message"),
    [
        ({"op": "*", "left": None, "right": None}, "usat_cast of '*': only + and - saturate"),
        (
            {
                "op": "-",
                "left": {"type": "field", "value": ["ipv4", "srcAddr"]},
                "right": {"type": "hexstr", "value": "0x1"},
            },
            "usat_cast to 8 bits of a wider operand",
        ),
    ],
    ids=["product", "wider"],
)
def test_a_saturating_cast_it_cannot_run_is_refused(inner: dict[str, Any], message: str) -> None:
    def edit(doc: dict[str, Any]) -> None:
        cast = {"op": "usat_cast", "left": {"type": "expression", "value": inner}}
        cast["right"] = {"type": "hexstr", "value": "0x8"}
        field = {"type": "field", "value": ["ipv4", "diffserv"]}
        assign = {"op": "assign", "parameters": [field, {"type": "expression", "value": cast}]}
        action(doc, "MyIngress.ipv4_forward")["primitives"].append(assign)

    with pytest.raises(Bmv2JsonError) as exc:
        load_json_program(broken(edit), "prog.json")
    assert message in str(exc.value)

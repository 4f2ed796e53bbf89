"""End-to-end behaviour of the basic L3 program: forwarding, checksums, counters, PRE, drop."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from softswitch import SwitchError
from softswitch.p4info import p4info_text


def _pkt(dst: str = "10.1.2.3", ttl: int = 64) -> bytes:
    return bytes(
        Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02")
        / IP(dst=dst, ttl=ttl)
        / UDP(dport=9)
        / b"payload"
    )


def test_lpm_forward_rewrites_and_keeps_checksum_valid(basic_switch_factory) -> None:
    sw = basic_switch_factory()
    h = sw.table_add(
        "ipv4_lpm", {"dst": (0x0A000000, 8)}, "ipv4_forward", {"dstAddr": 0xAABBCCDDEEFF, "port": 3}
    )
    sw.table_add("ipv4_lpm", {"dst": (0x0A010000, 16)}, "ipv4_forward", {"dstAddr": 0x1, "port": 4})
    out = sw.process(1, _pkt("10.1.2.3"))
    assert [p for p, _ in out] == [4]
    out = sw.process(1, _pkt("10.2.2.3"))
    assert [p for p, _ in out] == [3]
    pkt = Ether(out[0][1])
    assert pkt.dst == "aa:bb:cc:dd:ee:ff"
    assert pkt[IP].ttl == 63
    chk = pkt[IP].chksum
    del pkt[IP].chksum
    assert IP(bytes(pkt[IP]))[IP].chksum == chk
    assert bytes(pkt[UDP].payload) == b"payload"
    size = len(_pkt())
    assert sw.direct_counter_read("ipv4_lpm", h) == (size, 1)
    assert sw.counter_read("port_counter", 1) == (2 * size, 2)
    assert sw.register_read("last_ttl", 1) == 64


def test_default_action_drops_and_can_be_changed(basic_switch_factory) -> None:
    sw = basic_switch_factory()
    assert sw.process(1, _pkt()) == []
    sw.table_set_default("ipv4_lpm", "ipv4_forward", {"dstAddr": 5, "port": 7})
    assert [p for p, _ in sw.process(1, _pkt())] == [7]


def test_multicast_runs_egress_per_copy_with_rid(basic_switch_factory) -> None:
    sw = basic_switch_factory()
    sw.table_add("ipv4_lpm", {"dst": (0, 0)}, "set_mcast", {"grp": 5})
    sw.mc_group_set(5, [(2, 11), (3, 0), (4, 13)])
    out = sw.process(1, _pkt())
    assert [p for p, _ in out] == [2, 3, 4]
    ids = [Ether(b)[IP].id for _, b in out]
    assert ids[0] == 11 and ids[2] == 13 and ids[1] == Ether(_pkt())[IP].id


def test_table_errors(basic_switch_factory) -> None:
    sw = basic_switch_factory(TABLE_SIZE="2")
    sw.table_add("MyIngress.ipv4_lpm", {"dst": (0x0A000000, 8)}, "drop", {})
    with pytest.raises(SwitchError):
        sw.table_add("ipv4_lpm", {"dst": (0x0A000000, 8)}, "drop", {})  # duplicate
    with pytest.raises(SwitchError):
        sw.table_add("ipv4_lpm", {"dst": (0x0A000001, 8)}, "drop", {})  # bits beyond prefix
    with pytest.raises(SwitchError):
        sw.table_add(
            "ipv4_lpm", {"dst": (0x0B000000, 8)}, "ipv4_forward", {"port": 1}
        )  # missing param
    with pytest.raises(SwitchError):
        sw.table_add("nope", {}, "drop", {})
    sw.table_add("ipv4_lpm", {"dst": (0x0B000000, 8)}, "drop", {})
    with pytest.raises(SwitchError, match="full"):
        sw.table_add("ipv4_lpm", {"dst": (0x0C000000, 8)}, "drop", {})


def test_p4info_ids_follow_p4c(basic_switch_factory) -> None:
    info = basic_switch_factory().p4info
    by_name = {a.preamble.name: a.preamble.id for a in info.actions}
    # the ids p4c gives these names (jenkins one-at-a-time hash, action prefix 0x01)
    assert by_name["NoAction"] == 21257015
    assert by_name["MyIngress.drop"] == 25652968
    assert info.tables[0].preamble.alias == "ipv4_lpm"
    assert info.tables[0].match_fields[0].name == "dst"
    assert info.registers[0].type_spec.bitstring.bit.bitwidth == 32
    assert "MyIngress.ipv4_lpm" in p4info_text(info)


def test_random_and_truncated_packets_never_crash(basic_switch_factory) -> None:
    import random

    sw = basic_switch_factory()
    sw.table_add("ipv4_lpm", {"dst": (0, 0)}, "ipv4_forward", {"dstAddr": 1, "port": 2})
    rng = random.Random(7)
    full = _pkt()
    for n in range(len(full)):
        sw.process(1, full[:n])
    for _ in range(300):
        sw.process(rng.randrange(8), bytes(rng.randrange(256) for _ in range(rng.randrange(80))))
    assert sw.internal_errors == 0
    # Ethernet + part of IPv4: PacketTooShort leaves ipv4 invalid; this program's ingress drops it
    assert sw.process(1, full[:20]) == []


def test_control_writes_and_packets_from_two_threads(basic_switch_factory) -> None:
    import threading

    sw = basic_switch_factory()
    pkt = _pkt("10.9.9.9")
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        try:
            for i in range(300):
                h = sw.table_add(
                    "ipv4_lpm", {"dst": (0x0A000000, 8)}, "ipv4_forward", {"dstAddr": i, "port": 2}
                )
                sw.table_delete("ipv4_lpm", h)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
        finally:
            stop.set()

    t = threading.Thread(target=writer)
    t.start()
    seen = set()
    while not stop.is_set():
        for port, _ in sw.process(1, pkt):
            seen.add(port)
    t.join()
    assert not errors
    assert seen <= {2}
    assert sw.internal_errors == 0


def test_id_annotations_keep_their_ids(v1) -> None:
    from softswitch import Switch

    src = v1(
        "",
        "state start { transition accept; }",
        "@id(0x01000077) action a() { }\n@id(5) table t { key = { sm.ingress_port: exact; } actions = { a; } }\napply { t.apply(); }",
    )
    info = Switch.from_source(src, "ids.p4").p4info
    assert {x.preamble.name: x.preamble.id for x in info.actions}["I.a"] == 0x01000077
    assert info.tables[0].preamble.id == 0x02000005

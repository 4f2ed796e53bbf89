"""Externs: hash algorithms (BMv2 bit for bit), hash() with base and max, registers, counters,
mark_to_drop / drop port, exit and return, parameterised controls instantiated twice."""

from __future__ import annotations

import zlib

import pytest

from softswitch import Switch, SwitchError
from softswitch.engine import hashes


def test_hash_vectors() -> None:
    data = b"123456789"
    assert hashes.crc32(data) == zlib.crc32(data) == 0xCBF43926
    assert hashes.crc16(data) == 0xBB3D  # CRC-16/ARC, BMv2's crc16
    assert hashes.crc16_custom(data) == 0xBB3D  # BMv2's default crc16_custom parameters
    assert hashes.crc32_custom(data) == 0xCBF43926
    assert hashes.crc_ccitt(data) == 0x29B1
    # csum16 is the Internet checksum: the RFC 1071 example sums to 0xddf2
    assert hashes.csum16(bytes.fromhex("0001f203f4f5f6f7")) == (~0xDDF2) & 0xFFFF
    assert hashes.csum16(b"\x01") == (~0x0100) & 0xFFFF
    assert hashes.xor16(bytes.fromhex("1234ff00ab")) == 0x1234 ^ 0xFF00 ^ 0xAB00
    assert hashes.identity(bytes(range(1, 11))) == 0x0102030405060708
    assert hashes.pack_fields([1, 0x3, 0xFF], [4, 4, 8]) == b"\x13\xff"
    assert hashes.pack_fields([1, 1], [3, 4]) == b"\x22"  # 7 bits, zero-padded at the end


HEADERS = """
header d_t { bit<16> x; bit<8> y; bit<16> h16; bit<32> h32; bit<16> hbase; bit<8> reg; bit<8> sub; }
"""
PARSER = "state start { pkt.extract(hdr.d); transition accept; }"

INGRESS = """
register<bit<8>>(4) regs;
counter(4, CounterType.packets) pkts;
Adder(8w1) add_one;
Adder(8w10) add_ten;
action finish() { sm.egress_spec = 3; return; sm.egress_spec = 4; }
apply {
    hash(hdr.d.h16, HashAlgorithm.crc16, 16w0, { hdr.d.x, hdr.d.y }, 32w0);
    hash(hdr.d.h32, HashAlgorithm.crc32, 32w0, { hdr.d.x, hdr.d.y }, 64w0);
    hash(hdr.d.hbase, HashAlgorithm.crc16, 16w100, { hdr.d.x, hdr.d.y }, 32w10);
    bit<8> r;
    regs.read(r, (bit<32>)hdr.d.y);
    regs.write((bit<32>)hdr.d.y, r + 1);
    hdr.d.reg = r;
    pkts.count((bit<32>)hdr.d.y);
    bit<8> acc = 0;
    add_one.apply(acc);
    add_ten.apply(acc);
    add_ten.apply(acc);
    hdr.d.sub = acc;
    if (hdr.d.x == 0xdead) { mark_to_drop(sm); exit; }
    if (hdr.d.x == 0x0511) { sm.egress_spec = 511; return; }
    finish();
    if (hdr.d.x == 0xe) { exit; }
    sm.egress_spec = 5;
}
"""

EXTRA = """
control Adder(inout bit<8> v)(bit<8> step) {
    register<bit<8>>(1) calls;
    apply {
        v = v + step;
        bit<8> c;
        calls.read(c, 0);
        calls.write(0, c + 1);
    }
}
"""

DEPARSER = "apply { pkt.emit(hdr.d); }"


@pytest.fixture
def sw(v1) -> Switch:
    return Switch.from_source(
        v1(EXTRA + HEADERS, PARSER, INGRESS, deparser=DEPARSER, hdr_fields="d_t d;"), "ext.p4"
    )


def send(sw: Switch, x: int, y: int) -> list[tuple[int, bytes]]:
    return sw.process(0, x.to_bytes(2, "big") + bytes([y]) + bytes(12))


def test_hash_in_p4_matches_bmv2(sw: Switch) -> None:
    ((_port, o),) = send(sw, 0x1234, 2)
    data = bytes([0x12, 0x34, 2])
    assert int.from_bytes(o[3:5], "big") == hashes.crc16(data)
    assert int.from_bytes(o[5:9], "big") == zlib.crc32(data)
    assert int.from_bytes(o[9:11], "big") == 100 + hashes.crc16(data) % 10


def test_registers_counters_and_control_instances(sw: Switch) -> None:
    for i in range(3):
        ((_p, o),) = send(sw, 1, 2)
        assert o[11] == i
        assert o[12] == 21  # 1 + 10 + 10: the constructor argument of each instance
    assert sw.register_read("regs", 2) == 3
    assert sw.register_read("regs") == [0, 0, 3, 0]
    assert sw.register_read("I.add_ten.calls", 0) == 6  # two applies per packet, own storage
    assert sw.register_read("I.add_one.calls", 0) == 3
    assert sw.counter_read("pkts", 2) == (3 * 15, 3)  # BMv2 counts bytes and packets always
    sw.register_write("regs", 2, 200)
    assert send(sw, 1, 2)[0][1][11] == 200
    sw.register_reset("regs")
    assert sw.register_read("regs", 2) == 0
    sw.counter_reset("pkts")
    assert sw.counter_read("pkts", 2)[1] == 0
    with pytest.raises(SwitchError):
        sw.register_write("regs", 9, 1)
    with pytest.raises(SwitchError):
        sw.register_write("regs", 0, 256)
    with pytest.raises(SwitchError):
        sw.register_read("calls")  # ambiguous alias: two instances


def test_drop_exit_return(sw: Switch) -> None:
    assert send(sw, 0xDEAD, 0) == []  # mark_to_drop then exit
    assert send(sw, 0x0511, 0) == []  # egress_spec = 511
    assert [p for p, _ in send(sw, 0xE, 0)] == [3]  # return inside the action, then exit
    assert [p for p, _ in send(sw, 0x1, 0)] == [5]


def test_direct_application_and_default_arguments(v1) -> None:
    src = v1(
        "control Shift(out bit<8> x, in bit<8> y = 8w200) { apply { x = y >> 2; } }"
        " header d_t { bit<8> a; bit<8> b; }",
        "state start { pkt.extract(hdr.d); transition accept; }",
        "apply { Shift.apply(hdr.d.a, hdr.d.b); Shift.apply(hdr.d.b); sm.egress_spec = 1; }",
        deparser="apply { pkt.emit(hdr.d); }",
        hdr_fields="d_t d;",
    )
    sw = Switch.from_source(src, "direct.p4")
    assert sw.process(0, b"\x00\x10")[0][1] == bytes([0x10 >> 2, 200 >> 2])


def test_digest_queue_and_p4info(v1) -> None:
    src = v1(
        "struct learn_t { bit<8> src; bit<9> port; } header d_t { bit<8> src; }",
        "state start { pkt.extract(hdr.d); transition accept; }",
        "apply { if (hdr.d.src != 0) { digest<learn_t>(1, { hdr.d.src, sm.ingress_port }); } "
        "sm.egress_spec = 1; }",
        deparser="apply { pkt.emit(hdr.d); }",
        hdr_fields="d_t d;",
    )
    sw = Switch.from_source(src, "digest.p4")
    calls = []
    sw.digest_callback = lambda: calls.append(1)
    sw.process(3, b"\x05")
    sw.process(4, b"\x00")
    sw.process(6, b"\x07")
    assert sw.digests_pop() == [
        ("learn_t", {"src": 5, "port": 3}),
        ("learn_t", {"src": 7, "port": 6}),
    ]
    assert sw.digests_pop() == [] and len(calls) == 2
    (d,) = sw.p4info.digests
    assert d.preamble.name == "learn_t" and d.type_spec.struct.name == "learn_t"
    members = sw.p4info.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [
        ("src", 8),
        ("port", 9),
    ]


def test_truncate(v1) -> None:
    src = v1(
        "header d_t { bit<8> n; }",
        "state start { pkt.extract(hdr.d); transition accept; }",
        "apply { if (hdr.d.n != 0) { truncate((bit<32>)hdr.d.n); } sm.egress_spec = 1; }",
        deparser="apply { pkt.emit(hdr.d); }",
        hdr_fields="d_t d;",
    )
    sw = Switch.from_source(src, "trunc.p4")
    assert sw.process(0, b"\x03abcdef") == [(1, b"\x03ab")]
    assert sw.process(0, b"\x00abcdef") == [(1, b"\x00abcdef")]


def test_tuple_typed_hash_data(v1) -> None:
    src = v1(
        "typedef tuple<bit<8>, bit<16>> pair_t; header d_t { bit<8> a; bit<16> b; bit<16> h; }",
        "state start { pkt.extract(hdr.d); transition accept; }",
        "apply { pair_t p = { hdr.d.a, hdr.d.b }; "
        "hash(hdr.d.h, HashAlgorithm.crc16, 16w0, p, 32w0); sm.egress_spec = 1; }",
        deparser="apply { pkt.emit(hdr.d); }",
        hdr_fields="d_t d;",
    )
    out = Switch.from_source(src, "tuple.p4").process(0, b"\x01\x02\x03\x00\x00")[0][1]
    assert int.from_bytes(out[3:5], "big") == hashes.crc16(b"\x01\x02\x03")


def test_meter_colours_follow_the_token_buckets(v1) -> None:
    src = v1(
        "header d_t { bit<8> color; }",
        "state start { pkt.extract(hdr.d); transition accept; }",
        "meter(4, MeterType.packets) m;\n"
        "apply { bit<2> c; m.execute_meter(32w1, c); hdr.d.color = (bit<8>)c; sm.egress_spec = 1; }",
        deparser="apply { pkt.emit(hdr.d); }",
        hdr_fields="d_t d;",
    )
    sw = Switch.from_source(src, "meter.p4")
    assert sw.process(0, b"\x09")[0][1] == b"\x00"  # unconfigured: GREEN
    sw.meter_set_rates("m", 1, (1e-9, 2), (1e-9, 3))  # no refill to speak of
    colors = [sw.process(0, b"\x09")[0][1][0] for _ in range(5)]
    assert colors == [0, 0, 1, 2, 2]  # GREEN while both buckets have tokens, YELLOW, then RED
    sw.meter_reset("m")
    assert sw.process(0, b"\x09")[0][1] == b"\x00"
    assert sw.p4info.meters[0].size == 4
    with pytest.raises(SwitchError):
        sw.meter_set_rates("m", 1, (2.0, 1), (1.0, 1))  # committed above peak


def test_direct_meter_per_entry(v1) -> None:
    src = v1(
        "header d_t { bit<8> k; bit<8> color; }",
        "state start { pkt.extract(hdr.d); transition accept; }",
        """
        direct_meter<bit<2>>(MeterType.packets) dm;
        action color() { bit<2> c; dm.read(c); hdr.d.color = (bit<8>)c; }
        table t { key = { hdr.d.k: exact; } actions = { color; NoAction; } meters = dm; }
        apply { t.apply(); sm.egress_spec = 1; }
        """,
        deparser="apply { pkt.emit(hdr.d); }",
        hdr_fields="d_t d;",
    )
    sw = Switch.from_source(src, "dmeter.p4")
    h = sw.table_add("t", {"hdr.d.k": 1}, "color", {})
    sw.table_add("t", {"hdr.d.k": 2}, "color", {})
    sw.direct_meter_set_rates("t", h, (1e-9, 1), (1e-9, 1))
    assert [sw.process(0, b"\x01\x09")[0][1][1] for _ in range(3)] == [0, 2, 2]
    assert sw.process(0, b"\x02\x09")[0][1][1] == 0  # its own, unconfigured meter
    (dm,) = sw.p4info.direct_meters
    assert dm.direct_table_id == sw.p4info.tables[0].preamble.id

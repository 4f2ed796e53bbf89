"""TNA externs on the software switch: Register/RegisterAction (rv, conditional updates, initial
values), Hash/CRCPolynomial against v1model's hash(), Checksum (verify, residual, update),
Counter/DirectCounter, Meter, Random; and the Tofino rules the loader enforces."""

from __future__ import annotations

import random

import pytest

from softswitch import P4Error, Switch, SwitchError
from softswitch.engine import hashes

HEADERS = "header d_t { bit<8> op; bit<8> idx; bit<32> v; bit<32> r; bit<16> h16; bit<32> h32; }"


def pkt(op: int, idx: int = 0, v: int = 0) -> bytes:
    return bytes([op, idx]) + v.to_bytes(4, "big") + bytes(4 + 2 + 4)


def out_fields(data: bytes) -> tuple[int, int]:
    return int.from_bytes(data[2:6], "big"), int.from_bytes(data[6:10], "big")


REGISTERS = """
Register<bit<32>, bit<8>>(4, 32w7) acc;
RegisterAction<bit<32>, bit<8>, bit<32>>(acc) fetch_add = {
    void apply(inout bit<32> value, out bit<32> rv) { rv = value; value = value + hdr.d.v; }
};
// predicate-style: the update and the result depend on a comparison the stateful ALU makes
RegisterAction<bit<32>, bit<8>, bit<32>>(acc) add_below_limit = {
    void apply(inout bit<32> value, out bit<32> rv) {
        if (value < hdr.d.v) { value = value + 1; rv = 1; } else { rv = 0; }
    }
};
RegisterAction<bit<32>, bit<8>, bit<32>>(acc) swap = {
    void apply(inout bit<32> value, out bit<32> rv) { rv = value; value = hdr.d.v; }
};
apply {
    ig_tm_md.ucast_egress_port = 1;
    if (hdr.d.op == 1) {
        hdr.d.r = fetch_add.execute(hdr.d.idx);
    } else if (hdr.d.op == 2) {
        hdr.d.r = add_below_limit.execute(hdr.d.idx);
    } else {
        hdr.d.r = swap.execute(hdr.d.idx);
    }
}
"""


@pytest.fixture
def reg_sw(tna) -> Switch:
    return Switch.from_source(tna(HEADERS, REGISTERS), "regs_tna.p4")


def test_register_action_rv_and_update(reg_sw: Switch) -> None:
    sw = reg_sw
    assert sw.register_read("acc") == [7, 7, 7, 7]  # Register(size, initial_value)
    (_, d) = sw.process(1, pkt(1, idx=2, v=5))[0]
    assert out_fields(d) == (5, 7)  # rv = the value before the update
    assert sw.register_read("acc", 2) == 12
    (_, d) = sw.process(1, pkt(3, idx=2, v=100))[0]
    assert out_fields(d)[1] == 12 and sw.register_read("acc", 2) == 100


def test_register_action_conditional_update(reg_sw: Switch) -> None:
    sw = reg_sw
    results = [out_fields(sw.process(1, pkt(2, idx=0, v=9))[0][1])[1] for _ in range(4)]
    assert results == [1, 1, 0, 0]  # 7 -> 8 -> 9, then 9 < 9 fails: no update
    assert sw.register_read("acc", 0) == 9
    sw.register_write("acc", 0, 1)
    assert out_fields(sw.process(1, pkt(2, idx=0, v=9))[0][1])[1] == 1


def test_register_action_out_of_range_index_touches_nothing(reg_sw: Switch) -> None:
    (_, d) = reg_sw.process(1, pkt(1, idx=200, v=5))[0]
    assert out_fields(d)[1] == 0
    assert reg_sw.register_read("acc") == [7, 7, 7, 7]


def test_p4info_lists_the_register_not_its_actions(reg_sw: Switch) -> None:
    regs = [r.preamble.name for r in reg_sw.p4info.registers]
    assert regs == ["Ig.acc"]
    assert reg_sw.p4info.registers[0].size == 4


PAIR_STRUCT = "struct pair_t { bit<32> lo; bit<32> hi; }"

# HashPipe's decision in miniature: lo is a tag, hi a count; op 1 merges (lo == v adds), takes
# (hi < 5: {v, 5}) or keeps, and returns the predicate; op 2 returns hi (a second action)
PAIRS = """
Register<pair_t, bit<8>>(4, {32w3, 32w1}) p;
RegisterAction<pair_t, bit<8>, bit<32>>(p) decide = {
    void apply(inout pair_t value, out bit<32> rv) {
        bool own = value.lo == hdr.d.v;
        bool larger = value.hi < 5;
        rv = this.predicate(own, larger);
        if (own) {
            value.hi = value.hi + 1;
        } else if (larger) {
            value.lo = hdr.d.v;
            value.hi = 5;
        }
    }
};
RegisterAction<pair_t, bit<8>, bit<32>>(p) read_hi = {
    void apply(inout pair_t value, out bit<32> rv) { rv = value.hi; }
};
apply {
    ig_tm_md.ucast_egress_port = 1;
    if (hdr.d.op == 1) {
        hdr.d.r = decide.execute(hdr.d.idx);
    } else {
        hdr.d.r = read_hi.execute(hdr.d.idx);
    }
}
"""


def test_paired_register_compares_and_updates_both_halves(tna) -> None:
    """Register<struct of two bit<32>>: one stateful ALU in paired mode. Cells read and write as
    the struct's bits, the first member high (initial value {3, 1}); this.predicate(cmplo, cmphi)
    is 1 << (cmplo + 2 * cmphi)."""
    sw = Switch.from_source(tna(HEADERS + PAIR_STRUCT, PAIRS), "pairs.p4")
    assert sw.register_read("p") == [3 << 32 | 1] * 4
    rv = [out_fields(sw.process(1, pkt(1, idx=0, v=v))[0][1])[1] for v in (3, 9, 9, 4, 4)]
    # own and larger (hi 1 < 5): 8, hi -> 2; another key, larger: 4, {9, 5}; own, not larger: 2,
    # hi -> 6; another key, not larger: 1 (kept), twice
    assert rv == [8, 4, 2, 1, 1]
    assert sw.register_read("p", 0) == 9 << 32 | 6
    assert out_fields(sw.process(1, pkt(2, idx=0))[0][1])[1] == 6
    sw.register_write("p", 1, 7 << 32 | 0xFFFFFFFF)
    assert out_fields(sw.process(1, pkt(1, idx=1, v=7))[0][1])[1] == 2  # own; hi wraps to 0
    assert sw.register_read("p", 1) == 7 << 32
    with pytest.raises(SwitchError, match="does not fit bit<64>"):
        sw.register_write("p", 1, 1 << 64)
    reg = next(r for r in sw.p4info.registers if r.preamble.name == "Ig.p")
    assert reg.type_spec.struct.name == "pair_t"
    members = sw.p4info.type_info.structs["pair_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [
        ("lo", 32),
        ("hi", 32),
    ]


def test_paired_register_over_p4runtime_and_thrift(tna) -> None:
    """P4Runtime carries a pair's cell as a struct of two bitstrings, Thrift as its 64 bits in an
    i64 (two's complement when the high bit is set; the write path masks it back)."""
    from finsy.proto import p4d

    from softswitch.runtime.p4info_index import P4InfoIndex
    from softswitch.runtime.p4runtime_server import ControlError, decode_cell, encode_cell
    from softswitch.runtime.thrift_server import thrift_i64

    sw = Switch.from_source(tna(HEADERS + PAIR_STRUCT, PAIRS), "pairs.p4")
    reg = P4InfoIndex(sw.p4info).register("Ig.p")
    assert reg is not None and (reg.bitwidth, reg.members) == (64, (32, 32))
    cell = 0xFFFFFFFE << 32 | 5
    data = encode_cell(reg, cell)
    assert [int.from_bytes(m.bitstring, "big") for m in data.struct.members] == [0xFFFFFFFE, 5]
    assert decode_cell(reg, data) == cell
    with pytest.raises(ControlError, match="struct of 2 bitstrings"):
        decode_cell(reg, p4d.P4Data(bitstring=b"\x01"))
    assert thrift_i64(reg, cell) == cell - (1 << 64) and thrift_i64(reg, 5) == 5


@pytest.mark.parametrize(
    ("ingress", "marker", "msg"),
    [
        (
            "Register<odd_t, bit<8>>(4) r;\napply { }",
            "Register<odd_t, bit<8>>(4) r",
            "a paired register's struct has two bit<W> members of one width",
        ),
        (
            "Register<pair_t, bit<8>>(4) r;\n"
            "RegisterAction<pair_t, bit<8>, bit<32>>(r) a = {\n"
            "    void apply(inout pair_t value, out bit<32> rv) { rv = 0; }\n"
            "};\n"
            "apply { hdr.d.r = a.predicate(true, false); }",
            "a.predicate(true, false)",
            "Ig.a.predicate() is called inside Ig.a's own apply",
        ),
        (
            "Register<pair_t, bit<8>>(4) r;\n"
            "RegisterAction<pair_t, bit<8>, bit<2>>(r) a = {\n"
            "    void apply(inout pair_t value, out bit<2> rv) { rv = this.predicate(true); }\n"
            "};\n"
            "apply { a.execute(0); }",
            "this.predicate(true)",
            "U must be bit<4> or wider",
        ),
        (
            "Register<pair_t, bit<8>>(4) r;\n"
            "RegisterAction<pair_t, bit<8>, bit<32>>(r) a = {\n"
            "    void apply(inout pair_t value, out bit<32> rv) { rv = value.lo; }\n"
            "};\n"
            "apply { hdr.d.r = a.execute(0); hdr.d.v = a.execute(1); }",
            "a.execute(1)",
            "register Ig.r is accessed twice on one path of the ingress pass",
        ),
    ],
)
def test_paired_register_misuse_is_a_load_error(tna, ingress: str, marker: str, msg: str) -> None:
    src = tna(HEADERS + PAIR_STRUCT + "struct odd_t { bit<32> lo; bit<16> hi; }", ingress)
    line = next(i for i, x in enumerate(src.splitlines(), 1) if marker in x)
    col = src.splitlines()[line - 1].index(marker) + 1
    with pytest.raises(P4Error) as e:
        Switch.from_source(src, "t.p4")
    assert str(e.value).startswith(f"t.p4:{line}:{col}: "), str(e.value)
    assert msg in str(e.value)


def test_hash_matches_v1model_hash(tna, v1) -> None:
    fields = "{ hdr.d.op, hdr.d.idx, hdr.d.v }"
    tna_ingress = f"""
    Hash<bit<32>>(HashAlgorithm_t.CRC32) h_crc32;
    Hash<bit<16>>(HashAlgorithm_t.CRC16) h_crc16;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) crc32p;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, crc32p) h_custom32;
    Hash<bit<16>>(HashAlgorithm_t.CUSTOM,
                  CRCPolynomial<bit<16>>(16w0x8005, true, false, false, 16w0, 16w0)) h_custom16;
    apply {{
        ig_tm_md.ucast_egress_port = 1;
        if (hdr.d.op[0:0] == 0) {{
            hdr.d.h32 = h_crc32.get({fields});
            hdr.d.h16 = h_crc16.get({fields});
        }} else {{
            hdr.d.h32 = h_custom32.get({fields});
            hdr.d.h16 = h_custom16.get({fields});
        }}
        hdr.d.r = (bit<32>)h_crc16.get({fields})[7:0];
    }}
    """
    v1_ingress = f"""
    apply {{
        sm.egress_spec = 1;
        if (hdr.d.op[0:0] == 0) {{
            hash(hdr.d.h32, HashAlgorithm.crc32, 32w0, {fields}, 64w0);
            hash(hdr.d.h16, HashAlgorithm.crc16, 16w0, {fields}, 32w0);
        }} else {{
            hash(hdr.d.h32, HashAlgorithm.crc32_custom, 32w0, {fields}, 64w0);
            hash(hdr.d.h16, HashAlgorithm.crc16_custom, 16w0, {fields}, 32w0);
        }}
        bit<16> low;
        hash(low, HashAlgorithm.crc16, 16w0, {fields}, 32w0);
        hdr.d.r = (bit<32>)low[7:0];
    }}
    """
    t = Switch.from_source(tna(HEADERS, tna_ingress))
    v = Switch.from_source(
        v1(
            HEADERS,
            "state start { pkt.extract(hdr.d); transition accept; }",
            v1_ingress,
            deparser="apply { pkt.emit(hdr.d); }",
            hdr_fields="d_t d;",
        )
    )
    rng = random.Random(14)
    for _ in range(200):
        p = pkt(rng.randrange(256), rng.randrange(256), rng.getrandbits(32))
        assert t.process(3, p) == v.process(3, p)
    data = b"\x00\x01" + (0x1234).to_bytes(4, "big")
    (_, d) = t.process(3, pkt(0, 1, 0x1234))[0]
    assert int.from_bytes(d[12:16], "big") == hashes.crc32(data)


def test_checksum_verify_residual_and_update(tna) -> None:
    # hcsum covers the header (as IPv4's), csum the header and the payload (as UDP's)
    headers = "header d_t { bit<16> x; bit<16> hcsum; bit<16> csum; }"
    ig_parser = """
    Checksum() verify_ck;
    Checksum() residual_ck;
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        pkt.extract(hdr.d);
        verify_ck.add({hdr.d.x, hdr.d.hcsum});
        meta.ok = (bit<8>)(bit<1>)verify_ck.verify();
        residual_ck.subtract({hdr.d.x, hdr.d.csum});
        meta.residual = residual_ck.get();
        transition accept;
    }
    """
    ingress = """
    apply {
        ig_tm_md.ucast_egress_port = 1;
        if (meta.ok == 1) { hdr.d.x = hdr.d.x + 1; }
    }
    """
    ig_deparser = """
    Checksum() ck;
    apply {
        hdr.d.hcsum = ck.update({hdr.d.x});
        hdr.d.csum = ck.update({hdr.d.x, meta.residual});
        pkt.emit(hdr.d);
    }
    """
    sw = Switch.from_source(
        tna(
            headers,
            ingress,
            ig_parser=ig_parser,
            ig_deparser=ig_deparser,
            meta_fields="bit<8> ok; bit<16> residual;",
        )
    )

    def with_csum(x: int, payload: bytes) -> bytes:
        xb = x.to_bytes(2, "big")
        hc, c = hashes.csum16(xb), hashes.csum16(xb + payload)
        return xb + hc.to_bytes(2, "big") + c.to_bytes(2, "big") + payload

    for payload in (b"", b"abc", bytes(range(40))):
        (_, d) = sw.process(1, with_csum(0x1234, payload))[0]
        assert d == with_csum(0x1235, payload)  # verified, changed, checksum follows
    bad = bytearray(with_csum(0x1234, b"abc"))
    bad[3] ^= 1  # the header checksum
    (_, d) = sw.process(1, bytes(bad))[0]
    assert d[:2] == b"\x12\x34"  # verify() said no: x unchanged


def test_counters_and_direct_counters_count_when_told(tna) -> None:
    ingress = """
    Counter<bit<32>, bit<8>>(8, CounterType_t.PACKETS_AND_BYTES) per_idx;
    DirectCounter<bit<32>>(CounterType_t.PACKETS_AND_BYTES) per_entry;
    action counted() { per_entry.count(); ig_tm_md.ucast_egress_port = 1; }
    action silent() { ig_tm_md.ucast_egress_port = 2; }
    table t {
        key = { hdr.d.op : exact; }
        actions = { counted; silent; }
        counters = per_entry;
        size = 16;
    }
    apply {
        per_idx.count(hdr.d.idx);
        t.apply();
    }
    """
    sw = Switch.from_source(tna(HEADERS, ingress))
    h1 = sw.table_add("t", {"hdr.d.op": 1}, "counted")
    h2 = sw.table_add("t", {"hdr.d.op": 2}, "silent")
    for op in (1, 1, 2, 3):
        sw.process(5, pkt(op, idx=4))
    assert sw.counter_read("per_idx", 4) == (4 * len(pkt(0)), 4)
    assert sw.direct_counter_read("t", h1) == (2 * len(pkt(0)), 2)
    assert sw.direct_counter_read("t", h2) == (0, 0)  # a TNA action that does not count()


def test_meter_colours_and_random(tna) -> None:
    ingress = """
    Meter<bit<8>>(4, MeterType_t.PACKETS) m;
    Random<bit<16>>() rnd;
    apply {
        ig_tm_md.ucast_egress_port = 1;
        hdr.d.r = (bit<32>)m.execute(hdr.d.idx);
        hdr.d.h16 = rnd.get();
    }
    """
    sw = Switch.from_source(tna(HEADERS, ingress))
    colours = [out_fields(sw.process(1, pkt(0, idx=1))[0][1])[1] for _ in range(2)]
    assert colours == [0, 0]  # unconfigured: GREEN
    sw.meter_set_rates("m", 1, (1e-9, 1), (1e-9, 1))
    colours = [out_fields(sw.process(1, pkt(0, idx=1))[0][1])[1] for _ in range(2)]
    assert colours == [0, 3]  # then RED is MeterColor_t.RED = 3
    rnds = {int.from_bytes(sw.process(1, pkt(0))[0][1][10:12], "big") for _ in range(20)}
    assert len(rnds) > 1


# ---------------------------------------------------------------- Tofino rules at load time
TWO_ON_ONE_PATH = """
Register<bit<32>, bit<8>>(4) r;
RegisterAction<bit<32>, bit<8>, bit<32>>(r) a = {
    void apply(inout bit<32> value) { value = value + 1; }
};
RegisterAction<bit<32>, bit<8>, bit<32>>(r) b = {
    void apply(inout bit<32> value, out bit<32> rv) { rv = value; }
};
apply {
    a.execute(0);
    if (hdr.d.op == 1) {
        hdr.d.r = b.execute(1);
    }
}
"""

EXCLUSIVE = """
Register<bit<32>, bit<8>>(4) r;
RegisterAction<bit<32>, bit<8>, bit<32>>(r) a = {
    void apply(inout bit<32> value) { value = value + 1; }
};
RegisterAction<bit<32>, bit<8>, bit<32>>(r) b = {
    void apply(inout bit<32> value, out bit<32> rv) { rv = value; }
};
action do_a() { a.execute(hdr.d.idx); }
action do_b() { hdr.d.r = b.execute(hdr.d.idx); }
table t { key = { hdr.d.op : exact; } actions = { do_a; do_b; } }
apply {
    if (hdr.d.op == 1) { a.execute(0); } else { t.apply(); }
    ig_tm_md.ucast_egress_port = 1;
}
"""


def test_what_a_stateful_alu_and_a_mask_can_do_is_accepted(tna) -> None:
    """Two comparisons (a local bool tested twice counts once), and % / by a power of two."""
    src = tna(
        HEADERS,
        """
        Register<bit<8>, bit<8>>(4) r;
        RegisterAction<bit<8>, bit<8>, bit<8>>(r) turn = {
            void apply(inout bit<8> value, out bit<8> rv) {
                bool stale = value > hdr.d.op;
                if (stale) { rv = 0; } else { rv = value; }
                if (value < hdr.d.op) { value = value + 1; } else if (!stale) { value = 0; }
            }
        };
        Hash<bit<32>>(HashAlgorithm_t.CRC32) h;
        apply {
            hdr.d.idx = turn.execute(0);
            hdr.d.r = h.get({hdr.d.v}) % 256;  // (one operation each: p4c-barefoot rejects
            hdr.d.v = hdr.d.v / 16;             // their sum, "action spanning multiple stages")
        }
        """,
    )
    sw = Switch.from_source(src, "t.p4")
    assert sw is not None


def test_register_actions_on_exclusive_paths_are_accepted(tna) -> None:
    sw = Switch.from_source(tna(HEADERS, EXCLUSIVE))
    sw.table_add("t", {"hdr.d.op": 2}, "do_b")
    sw.process(1, pkt(1))
    (_, d) = sw.process(1, pkt(2, idx=0))[0]
    assert out_fields(d)[1] == 1


@pytest.mark.parametrize(
    ("ingress", "marker", "msg"),
    [
        (
            TWO_ON_ONE_PATH,
            "b.execute(1)",
            "register Ig.r is accessed twice on one path of the ingress pass (first at t.p4:@a.execute(0)@)",
        ),
        (
            """
            Register<bit<32>, bit<8>>(4) r;
            RegisterAction<bit<32>, bit<8>, bit<32>>(r) a = {
                void apply(inout bit<32> value) { value = value + 1; }
            };
            action do_a() { a.execute(0); }
            table t { key = { hdr.d.op : exact; } actions = { do_a; } }
            apply { t.apply(); a.execute(1); }
            """,
            "a.execute(1)",
            "accessed twice on one path of the ingress pass (first at t.p4:@a.execute(0)@)",
        ),
        (
            """
            Register<bit<32>, bit<8>>(4) r;
            apply { hdr.d.r = r.read(0); }
            """,
            "r.read(0)",
            "Ig.r.read: on Tofino a register is read and written only by a RegisterAction",
        ),
        (
            """
            Register<bit<16>, bit<8>>(4) r;
            RegisterAction<bit<32>, bit<8>, bit<32>>(r) a = {
                void apply(inout bit<32> value) { value = 0; }
            };
            apply { }
            """,
            "RegisterAction<bit<32>, bit<8>, bit<32>>(r) a",
            "RegisterAction value type bit<32> differs from register Ig.r's bit<16>",
        ),
        (
            """
            Counter<bit<32>, bit<8>>(4, CounterType_t.PACKETS) c;
            RegisterAction<bit<32>, bit<8>, bit<32>>(c) a = {
                void apply(inout bit<32> value) { value = 0; }
            };
            apply { }
            """,
            "c) a = {",
            "a RegisterAction is declared over a Register instance",
        ),
        (
            """
            Register<bit<32>, bit<8>>(4) r;
            RegisterAction<bit<32>, bit<8>, bit<32>>(r) a = {
                void apply(inout bit<32> value) { value = value + 1; }
            };
            RegisterAction<bit<32>, bit<8>, bit<32>>(r) b = {
                void apply(inout bit<32> value) { a.execute(0); }
            };
            apply { }
            """,
            "a.execute(0); }",
            "the stateful ALU makes no calls",
        ),
        (  # the round-robin turn of issue 19 before its fix (bf-p4c: "needs 5 comparisons")
            """
            Register<bit<8>, bit<8>>(4) r;
            RegisterAction<bit<8>, bit<8>, bit<8>>(r) a = {
                void apply(inout bit<8> value, out bit<8> rv) {
                    bit<8> cur = value;
                    if (cur >= hdr.d.op) { cur = 0; }
                    if (cur == 0 && hdr.d.idx == 1 && hdr.d.op > 1) { cur = 1; }
                    rv = cur;
                    if (cur + 1 >= hdr.d.op) { value = 0; } else { value = cur + 1; }
                }
            };
            apply { hdr.d.op = a.execute(0); }
            """,
            "void apply(inout bit<8> value",
            "RegisterAction Ig.a.apply needs 5 comparisons but a stateful ALU has 2 comparison units",
        ),
        (  # three through a local bool and ||, && (bf-p4c: "needs 3 comparisons")
            """
            Register<bit<32>, bit<8>>(4) r;
            RegisterAction<bit<32>, bit<8>, bit<32>>(r) a = {
                void apply(inout bit<32> value) {
                    bool below = value <= hdr.d.v;
                    if (hdr.d.op == 1 || (hdr.d.idx == 2 && below)) { value = hdr.d.v; }
                }
            };
            apply { a.execute(0); }
            """,
            "void apply(inout bit<32> value)",
            "needs 3 comparisons",
        ),
        (  # HashPipe's index before issue 19's fix (bf-p4c: "could not evaluate expression")
            """
            Hash<bit<32>>(HashAlgorithm_t.CRC32) h;
            apply { hdr.d.r = h.get({hdr.d.v}) % 257; }
            """,
            "h.get({hdr.d.v}) % 257",
            "%: the target has no divider, only % by a constant power of two",
        ),
    ],
)
def test_tofino_rule_violations_are_load_errors(tna, ingress: str, marker: str, msg: str) -> None:
    src = tna(HEADERS, ingress)

    def where(text: str) -> str:  # line:col of the first occurrence of text in the program
        line = next(i for i, x in enumerate(src.splitlines(), 1) if text in x)
        return f"{line}:{src.splitlines()[line - 1].index(text) + 1}"

    with pytest.raises(P4Error) as e:
        Switch.from_source(src, "t.p4")
    text = str(e.value)
    assert text.startswith(f"t.p4:{where(marker)}: "), text
    parts = msg.split("@")
    assert "".join(where(p) if i % 2 else p for i, p in enumerate(parts)) in text


def test_a_register_belongs_to_one_gress(tna) -> None:
    extra = """
    Register<bit<32>, bit<8>>(4) shared;
    RegisterAction<bit<32>, bit<8>, bit<32>>(shared) bump = {
        void apply(inout bit<32> value) { value = value + 1; }
    };
    """
    src = tna(
        HEADERS,
        "apply { bump.execute(0); ig_tm_md.ucast_egress_port = 1; }",
        egress="apply { bump.execute(1); }",
        extra=extra,
    )
    with pytest.raises(P4Error, match="register shared is used by ingress and egress"):
        Switch.from_source(src, "g.p4")


def test_register_actions_stay_out_of_deparsers(tna) -> None:
    ig_deparser = """
    Register<bit<32>, bit<8>>(4) r;
    RegisterAction<bit<32>, bit<8>, bit<32>>(r) a = {
        void apply(inout bit<32> value) { value = value + 1; }
    };
    apply { a.execute(0); pkt.emit(hdr); }
    """
    with pytest.raises(P4Error, match=r"RegisterAction\.execute in the ingress_deparser"):
        Switch.from_source(tna(HEADERS, "apply { }", ig_deparser=ig_deparser), "d.p4")


def test_direct_register_per_table_entry(tna) -> None:
    ingress = """
    DirectRegister<bit<32>>(32w100) seen;
    DirectRegisterAction<bit<32>, bit<32>>(seen) bump = {
        void apply(inout bit<32> value, out bit<32> rv) { value = value + 1; rv = value; }
    };
    action hit() { hdr.d.r = bump.execute(); ig_tm_md.ucast_egress_port = 1; }
    table t { key = { hdr.d.op : exact; } actions = { hit; } registers = seen; }
    apply { t.apply(); }
    """
    sw = Switch.from_source(tna(HEADERS, ingress))
    h1 = sw.table_add("t", {"hdr.d.op": 1}, "hit")
    h2 = sw.table_add("t", {"hdr.d.op": 2}, "hit")
    rs = [out_fields(sw.process(1, pkt(op))[0][1])[1] for op in (1, 1, 2, 1)]
    assert rs == [101, 102, 101, 103]
    assert sw.direct_register_read("t", h1) == 103
    assert sw.direct_register_read("t", h2) == 101
    sw.direct_register_write("t", h2, 7)
    assert out_fields(sw.process(1, pkt(2))[0][1])[1] == 8


def test_load_time_constant_branches_and_deparser_sub_controls(tna) -> None:
    # A parameterised control picks one of two RegisterActions of one register by a constructor
    # argument, in two ifs: on each instance one of them is always false, so there is one
    # access per path (the check folds conditions known at load time).
    extra = """
    control Bump(inout bit<32> r)(bool twice) {
        Register<bit<32>, bit<8>>(1) n;
        RegisterAction<bit<32>, bit<8>, bit<32>>(n) one = {
            void apply(inout bit<32> value, out bit<32> rv) { value = value + 1; rv = value; }
        };
        RegisterAction<bit<32>, bit<8>, bit<32>>(n) two = {
            void apply(inout bit<32> value, out bit<32> rv) { value = value + 2; rv = value; }
        };
        apply {
            if (twice) { r = two.execute(0); }
            if (!twice) { r = one.execute(0); }
        }
    }
    control Emit(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.d); } }
    """
    ingress = """
    Bump(false) by_one;
    Bump(true) by_two;
    apply {
        ig_tm_md.ucast_egress_port = 1;
        by_one.apply(hdr.d.r);
        bit<32> second;
        by_two.apply(second);
        hdr.d.v = second;
    }
    """
    sw = Switch.from_source(
        tna(HEADERS, ingress, ig_deparser="Emit() e; apply { e.apply(pkt, hdr); }", extra=extra)
    )
    for i in (1, 2):
        (_, d) = sw.process(1, pkt(0))[0]
        assert out_fields(d) == (2 * i, i)

"""Expression semantics: wrap-around at odd widths, signed ints, shifts, slices, concat, casts."""

from __future__ import annotations

from softswitch import Switch

HEADERS = """
header in_t { bit<8> a; bit<8> b; }
header out_t {
    bit<5> add5; bit<3> mul3;
    bit<8> sub8;
    int<8> sadd;
    bit<8> shl_big;
    bit<8> shl;
    bit<8> shr;
    bit<4> slice_hi;
    bit<4> slice_lo;
    bit<16> cat;
    bit<8> slice_written;
    bit<8> cast_trunc;
    bit<16> cast_widen;
    bit<8> sat_add;
    bit<8> sat_sub;
    int<8> sneg;
    bit<8> signed_to_bits;
    bit<1> from_bool;
    bit<7> pad;
    bit<8> neg;
    bit<8> tern;
}
"""

PARSER = """
state start { pkt.extract(hdr.inp); transition accept; }
"""

INGRESS = """
apply {
    hdr.outp.setValid();
    bit<5> x = (bit<5>)hdr.inp.a;
    hdr.outp.add5 = x + 5w7;
    hdr.outp.mul3 = (bit<3>)hdr.inp.a * 3w3;
    hdr.outp.sub8 = hdr.inp.b - hdr.inp.a;
    int<8> s = (int<8>)hdr.inp.a;
    hdr.outp.sadd = s + 8s100;
    hdr.outp.shl_big = hdr.inp.a << 9;
    hdr.outp.shl = hdr.inp.a << hdr.inp.b[2:0];
    hdr.outp.shr = hdr.inp.a >> 3;
    hdr.outp.slice_hi = hdr.inp.a[7:4];
    hdr.outp.slice_lo = hdr.inp.a[3:0];
    hdr.outp.cat = hdr.inp.a ++ hdr.inp.b;
    bit<8> w = 8w0xff;
    w[5:2] = 4w0;
    hdr.outp.slice_written = w;
    hdr.outp.cast_trunc = (bit<8>)(hdr.inp.a ++ hdr.inp.b);
    hdr.outp.cast_widen = (bit<16>)hdr.inp.a;
    hdr.outp.sat_add = hdr.inp.a |+| hdr.inp.b;
    hdr.outp.sat_sub = hdr.inp.a |-| hdr.inp.b;
    hdr.outp.sneg = -s;
    hdr.outp.signed_to_bits = (bit<8>)(s - 8s1);
    hdr.outp.from_bool = (bit<1>)(hdr.inp.a > hdr.inp.b);
    hdr.outp.pad = 0;
    hdr.outp.neg = -hdr.inp.a;
    hdr.outp.tern = hdr.inp.a == 8w200 ? 8w1 : 8w2;
    sm.egress_spec = 1;
}
"""

DEPARSER = "apply { pkt.emit(hdr.outp); }"


def run(v1, a: int, b: int) -> bytes:
    sw = Switch.from_source(
        v1(HEADERS, PARSER, INGRESS, deparser=DEPARSER, hdr_fields="in_t inp; out_t outp;"),
        "expr.p4",
    )
    out = sw.process(0, bytes([a, b]))
    assert len(out) == 1 and out[0][0] == 1
    return out[0][1]


def wrap(v: int, w: int) -> int:
    return v & ((1 << w) - 1)


def test_arithmetic_and_bit_operations(v1) -> None:
    a, b = 200, 13
    o = run(v1, a, b)
    assert o[0] == (wrap((a & 31) + 7, 5) << 3) | wrap((a & 7) * 3, 3)
    assert o[1] == wrap(b - a, 8)
    s = a - 256  # int<8> of 200
    sadd = wrap(s + 100, 8)
    assert o[2] == sadd
    assert o[3] == 0  # shift by >= width gives 0
    assert o[4] == wrap(a << (b & 7), 8)
    assert o[5] == a >> 3
    assert o[6] == ((a >> 4) << 4) | (a & 15)
    assert o[7:9] == bytes([a, b])
    assert o[9] == 0b11000011
    assert o[10] == b
    assert o[11:13] == a.to_bytes(2, "big")
    assert o[13] == 213  # saturating add
    assert o[14] == a - b
    assert o[15] == wrap(-s, 8)
    assert o[16] == wrap(s - 1, 8)
    assert o[17] >> 7 == 1 and o[17] & 0x7F == 0
    assert o[18] == wrap(-a, 8)
    assert o[19] == 1


def test_saturation_and_signed_overflow(v1) -> None:
    o = run(v1, 250, 10)
    assert o[13] == 255 and o[14] == 240
    o = run(v1, 10, 250)
    assert o[13] == 255 and o[14] == 0
    # int<8> 10 + 100 = 110 fits; int<8> 127 + 100 wraps to -29
    o = run(v1, 127, 0)
    assert o[2] == wrap(127 + 100, 8)
    assert o[19] == 2


FUNCS = """
bit<8> max8(in bit<8> a, in bit<8> b) {
    if (a > b) { return a; }
    return b;
}
void bump(inout bit<8> x, out bit<8> old) {
    old = x;
    x = x + 1;
}
header p_t { bit<8> a; bit<8> b; bit<8> m; bit<8> old; }
"""


def test_functions_are_inlined_with_copy_in_out(v1) -> None:
    sw = Switch.from_source(
        v1(
            FUNCS,
            "state start { pkt.extract(hdr.p); transition accept; }",
            "apply { hdr.p.m = max8(hdr.p.a, hdr.p.b) + 1; bump(hdr.p.a, hdr.p.old); sm.egress_spec = 1; }",
            deparser="apply { pkt.emit(hdr.p); }",
            hdr_fields="p_t p;",
        ),
        "funcs.p4",
    )
    assert sw.process(0, bytes([3, 9, 0, 0]))[0][1] == bytes([4, 9, 10, 3])
    assert sw.process(0, bytes([12, 9, 0, 0]))[0][1] == bytes([13, 9, 13, 12])


def test_function_without_return_value_is_an_error(v1) -> None:
    import pytest

    from softswitch import P4Error

    src = v1(
        "bit<8> f(in bit<8> a) { if (a == 1) { return; } return a; }",
        "state start { transition accept; }",
        "apply { bit<8> x = f(1); }",
    )
    with pytest.raises(P4Error, match="must return a value"):
        Switch.from_source(src, "f.p4")


def test_compound_assignment_and_bool_header_fields(v1) -> None:
    sw = Switch.from_source(
        v1(
            "header p_t { bit<8> a; bool f; bit<7> pad; }",
            "state start { pkt.extract(hdr.p); transition accept; }",
            "apply { hdr.p.a += 250; hdr.p.a <<= 1; hdr.p.a |= 1; hdr.p.f = !hdr.p.f; sm.egress_spec = 1; }",
            deparser="apply { pkt.emit(hdr.p); }",
            hdr_fields="p_t p;",
        ),
        "ops.p4",
    )
    assert sw.process(0, bytes([10, 0x80]))[0][1] == bytes([((10 + 250) % 256 * 2 + 1) % 256, 0x00])
    assert sw.process(0, bytes([10, 0x00]))[0][1][1] == 0x80

"""Enums (plain and serializable, also as header fields), switch on values, header stacks,
header and struct assignment, lookahead of a header."""

from __future__ import annotations

from softswitch import Switch

HEADERS = """
enum bit<8> Kind { A = 1, B = 2, C = 7 }
enum Color { Red, Green }
header k_t { Kind kind; bit<8> n; }
header item_t { bit<8> v; }
header r_t { bit<8> kind; bit<8> col; bit<8> sum; bit<8> sw; bit<8> copy; bit<8> peek; }
"""

PARSER = """
state start {
    item_t la = pkt.lookahead<item_t>();
    meta.peek = la.v;
    pkt.extract(hdr.k);
    transition select(hdr.k.kind) {
        Kind.A: items;
        Kind.B: items;
        default: accept;
    }
}
state items {
    pkt.extract(hdr.items.next);
    transition select(hdr.items.lastIndex == (bit<32>)hdr.k.n - 1) {
        true: accept;
        false: items;
    }
}
"""

INGRESS = """
apply {
    hdr.r.setValid();
    Color c = Color.Green;
    if (hdr.k.kind == Kind.C) { c = Color.Red; }
    hdr.r.kind = (bit<8>)hdr.k.kind;
    hdr.r.col = c == Color.Red ? 8w1 : 8w2;
    hdr.r.sum = 0;
    if (hdr.items[0].isValid()) { hdr.r.sum = hdr.r.sum + hdr.items[0].v; }
    if (hdr.items[1].isValid()) { hdr.r.sum = hdr.r.sum + hdr.items[1].v; }
    if (hdr.items[2].isValid()) { hdr.r.sum = hdr.r.sum + hdr.items[2].v; }
    switch (hdr.k.n) {
        1: { hdr.r.sw = 10; }
        2:
        3: { hdr.r.sw = 23; }
        default: { hdr.r.sw = 99; }
    }
    item_t tmp = hdr.items[0];
    tmp.v = tmp.v + 1;
    hdr.r.copy = tmp.v;
    hdr.r.peek = meta.peek;
    if (hdr.k.kind == (Kind)8w7) { hdr.items[1] = hdr.items[0]; }
    sm.egress_spec = 1;
}
"""

DEPARSER = "apply { pkt.emit(hdr.r); pkt.emit(hdr.k); pkt.emit(hdr.items); }"


def switch(v1) -> Switch:
    return Switch.from_source(
        v1(
            HEADERS,
            PARSER,
            INGRESS,
            deparser=DEPARSER,
            hdr_fields="r_t r; k_t k; item_t[3] items;",
            meta_fields="bit<8> peek;",
        ),
        "enums.p4",
    )


def test_serializable_enum_fields_select_and_stack(v1) -> None:
    sw = switch(v1)
    out = sw.process(0, bytes([1, 3, 5, 6, 7]) + b"tail")[0][1]
    assert out[:6] == bytes([1, 2, 18, 23, 6, 1])
    assert out[6:] == bytes([1, 3, 5, 6, 7]) + b"tail"  # the stack is re-emitted


def test_plain_enum_and_header_copy_does_not_alias(v1) -> None:
    sw = switch(v1)
    out = sw.process(0, bytes([7, 1]) + b"zz")[0][1]
    assert out[:4] == bytes([7, 1, 0, 10])
    assert out[4] == 1  # tmp is a copy of an invalid header: 0 + 1
    assert out[6:8] == bytes([7, 1])


def test_serializable_enums_in_p4info(v1) -> None:
    spec = switch(v1).p4info.type_info.serializable_enums["Kind"]
    assert spec.underlying_type.bitwidth == 8
    assert {m.name: m.value for m in spec.members} == {"A": b"\x01", "B": b"\x02", "C": b"\x07"}


def test_header_union_members_exclude_each_other(v1) -> None:
    sw = Switch.from_source(
        v1(
            "header a_t { bit<8> x; } header b_t { bit<16> y; } header_union u_t { a_t a; b_t b; }"
            " header t_t { bit<8> kind; bit<8> valid; }",
            """
            state start {
                pkt.extract(hdr.t);
                transition select(hdr.t.kind) { 1: pa; 2: pb; default: accept; }
            }
            state pa { pkt.extract(hdr.u.a); transition accept; }
            state pb { pkt.extract(hdr.u.b); transition accept; }
            """,
            """
            apply {
                hdr.t.valid = (hdr.u.isValid() ? 8w1 : 8w0) | (hdr.u.a.isValid() ? 8w2 : 8w0);
                if (hdr.t.kind == 2) { hdr.u.a.setValid(); hdr.u.a.x = 7; }
                sm.egress_spec = 1;
            }
            """,
            deparser="apply { pkt.emit(hdr.t); pkt.emit(hdr.u); }",
            hdr_fields="t_t t; u_t u;",
        ),
        "union.p4",
    )
    assert sw.process(0, b"\x01\x00\x05rest")[0][1] == b"\x01\x03\x05rest"
    # b was valid; making a valid invalidates b: only a is emitted
    assert sw.process(0, b"\x02\x00\x12\x34rest")[0][1] == b"\x02\x01\x07rest"
    assert sw.process(0, b"\x03\x00rest")[0][1] == b"\x03\x00rest"


def test_header_and_struct_equality(v1) -> None:
    sw = Switch.from_source(
        v1(
            "header a_t { bit<8> x; bit<8> y; } header r_t { bit<8> eq; }",
            "state start { pkt.extract(hdr.a); pkt.extract(hdr.b); transition accept; }",
            """
            apply {
                hdr.r.setValid();
                a_t never;
                hdr.r.eq = (hdr.a == hdr.b ? 8w1 : 8w0) | (never == hdr.c ? 8w2 : 8w0)
                           | (hdr.a != hdr.c ? 8w4 : 8w0);
                sm.egress_spec = 1;
            }
            """,
            deparser="apply { pkt.emit(hdr.r); }",
            hdr_fields="a_t a; a_t b; a_t c; r_t r;",
        ),
        "eq.p4",
    )
    assert sw.process(0, b"\x01\x02\x01\x02")[0][1] == bytes([1 | 2 | 4])
    assert sw.process(0, b"\x01\x02\x01\x03")[0][1] == bytes([2 | 4])


def test_struct_inside_a_header(v1) -> None:
    sw = Switch.from_source(
        v1(
            "struct row_t { bit<4> a; bit<12> b; } header h_t { bit<8> x; row_t row; }",
            "state start { pkt.extract(hdr.h); transition accept; }",
            "apply { hdr.h.row.b = hdr.h.row.b + 1; hdr.h.x = (bit<8>)hdr.h.row.a; sm.egress_spec = 1; }",
            deparser="apply { pkt.emit(hdr.h); }",
            hdr_fields="h_t h;",
        ),
        "nested.p4",
    )
    assert sw.process(0, b"\x00\x5f\xffrest")[0][1] == b"\x05\x50\x00rest"

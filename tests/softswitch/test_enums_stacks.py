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

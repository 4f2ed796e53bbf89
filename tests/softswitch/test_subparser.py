"""Sub-parsers: a parser instantiated in a parser and applied from a state."""

from __future__ import annotations

from softswitch import Switch

HEADERS = """
header a_t { bit<8> n; }
header b_t { bit<16> v; }
parser Inner(packet_in p, inout b_t b, out bit<8> seen)(bit<8> mark) {
    state start {
        p.extract(b);
        seen = mark;
        transition accept;
    }
}
"""

PARSER = """
Inner(8w42) inner;
state start {
    pkt.extract(hdr.a);
    inner.apply(pkt, hdr.b, meta.seen);
    transition accept;
}
"""


def test_subparser_extracts_and_copies_out(v1) -> None:
    sw = Switch.from_source(
        v1(
            HEADERS,
            PARSER,
            "apply { hdr.a.n = meta.seen; sm.egress_spec = 1; }",
            deparser="apply { pkt.emit(hdr.a); pkt.emit(hdr.b); }",
            hdr_fields="a_t a; b_t b;",
            meta_fields="bit<8> seen;",
        ),
        "sub.p4",
    )
    assert sw.process(0, b"\x01\x02\x03rest") == [(1, b"\x2a\x02\x03rest")]
    # too short inside the sub-parser: a stays extracted, b invalid, the rest is payload
    assert sw.process(0, b"\x01\x02") == [(1, b"\x00\x02")]

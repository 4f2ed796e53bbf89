"""Parser semantics: select (values, masks, ranges, tuples, default), varbit, lookahead, advance,
parser errors that do not drop the packet (BMv2 v1model)."""

from __future__ import annotations

from softswitch import Switch

HEADERS = """
header a_t { bit<8> kind; bit<8> len; }
header b_t { bit<16> v; }
header opt_t { varbit<64> data; }
header res_t { bit<8> path; bit<8> err; bit<8> peek; bit<8> optlen; }
"""

PARSER = """
state start {
    pkt.extract(hdr.a);
    transition select(hdr.a.kind, hdr.a.len) {
        (8w1, _): one;
        (8w0x20 &&& 8w0xf0, _): masked;
        (8w0x40 .. 8w0x4f, 8w0): ranged;
        (8w2, _): with_opts;
        (8w3, _): peek;
        (8w4, _): too_short;
        (8w5, _): adv;
        (8w6, _): reject;
        default: accept;
    }
}
state one { meta.path = 1; transition accept; }
state masked { meta.path = 2; transition accept; }
state ranged { meta.path = 3; transition accept; }
state with_opts {
    pkt.extract(hdr.opt, (bit<32>)hdr.a.len * 8);
    meta.path = 4;
    transition accept;
}
state peek {
    meta.peek = pkt.lookahead<bit<8>>();
    meta.path = 5;
    transition accept;
}
state too_short {
    meta.path = 6;
    pkt.extract(hdr.b);
    meta.path = 66;
    transition accept;
}
state adv {
    pkt.advance(16);
    pkt.extract(hdr.b);
    meta.path = 7;
    transition accept;
}
"""

INGRESS = """
apply {
    hdr.res.setValid();
    hdr.res.path = meta.path;
    hdr.res.err = (bit<8>)(sm.parser_error == error.PacketTooShort ? 8w1 : 8w0)
                  | (sm.parser_error == error.NoError ? 8w0 : 8w2);
    hdr.res.peek = meta.peek;
    hdr.res.optlen = hdr.opt.isValid() ? 8w1 : 8w0;
    sm.egress_spec = 2;
}
"""

DEPARSER = "apply { pkt.emit(hdr.res); pkt.emit(hdr.a); pkt.emit(hdr.opt); pkt.emit(hdr.b); }"


def switch(v1) -> Switch:
    return Switch.from_source(
        v1(
            HEADERS,
            PARSER,
            INGRESS,
            deparser=DEPARSER,
            hdr_fields="res_t res; a_t a; opt_t opt; b_t b;",
            meta_fields="bit<8> path; bit<8> peek;",
        ),
        "parser.p4",
    )


def test_select_values_masks_ranges_default(v1) -> None:
    sw = switch(v1)
    assert sw.process(0, b"\x01\x09rest")[0][1][0] == 1
    assert sw.process(0, b"\x2a\x09rest")[0][1][0] == 2
    assert sw.process(0, b"\x45\x00rest")[0][1][0] == 3
    assert sw.process(0, b"\x45\x01rest")[0][1][0] == 0  # range matched but len != 0: default
    assert sw.process(0, b"\x99\x00rest")[0][1][0] == 0


def test_varbit_extract_and_reemit(v1) -> None:
    sw = switch(v1)
    pkt = b"\x02\x03ABCtail"
    out = sw.process(0, pkt)[0][1]
    assert out[0] == 4 and out[3] == 1
    assert out[4:] == pkt  # a, opt (3 bytes), payload


def test_lookahead_does_not_consume(v1) -> None:
    out = switch(v1).process(0, b"\x03\x00\x77rest")[0][1]
    assert out[0] == 5 and out[2] == 0x77
    assert out[4:] == b"\x03\x00\x77rest"


def test_packet_too_short_continues_into_ingress(v1) -> None:
    out = switch(v1).process(0, b"\x04\x00\x01")
    assert len(out) == 1  # not dropped
    res = out[0][1]
    assert res[0] == 6  # the state's statements before the failing extract ran
    assert res[1] == 1 | 2  # parser_error == PacketTooShort
    assert res[4:] == b"\x04\x00\x01"  # b was not extracted: its byte stays payload


def test_advance_and_explicit_reject(v1) -> None:
    out = switch(v1).process(0, b"\x05\x00XYzzrest")[0][1]
    assert out[0] == 7
    assert out[4:] == b"\x05\x00zzrest"  # the advanced bytes are gone, as in BMv2
    out = switch(v1).process(0, b"\x06\x00rest")
    assert len(out) == 1 and out[0][1][0] == 0


def test_varbit_too_long_is_a_parser_error(v1) -> None:
    out = switch(v1).process(0, b"\x02\x09ABC")[0][1]
    assert out[1] & 2  # HeaderTooShort (varbit larger than its maximum) sets an error


def test_value_set_in_select(v1) -> None:
    sw = Switch.from_source(
        v1(
            "header a_t { bit<8> kind; bit<8> v; }",
            """
            value_set<bit<8>>(4) kinds;
            state start {
                pkt.extract(hdr.a);
                transition select(hdr.a.kind) { kinds: mark; default: accept; }
            }
            state mark { hdr.a.v = 1; transition accept; }
            """,
            "apply { sm.egress_spec = 1; }",
            deparser="apply { pkt.emit(hdr.a); }",
            hdr_fields="a_t a;",
        ),
        "pvs.p4",
    )
    assert sw.process(0, b"\x07\x00")[0][1] == b"\x07\x00"
    sw.value_set_set("kinds", [7, (0x10, 0xF0)])
    assert sw.process(0, b"\x07\x00")[0][1] == b"\x07\x01"
    assert sw.process(0, b"\x1f\x00")[0][1] == b"\x1f\x01"
    assert sw.process(0, b"\x08\x00")[0][1] == b"\x08\x00"
    assert sw.value_set_get("P.kinds") == [(7, 0xFF), (0x10, 0xF0)]
    assert sw.p4info.value_sets[0].size == 4

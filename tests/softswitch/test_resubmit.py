"""resubmit and recirculate (v1model *_preserving_field_list): instance types, preserved metadata,
the loop bound."""

from __future__ import annotations

from softswitch import Switch

HEADERS = "header d_t { bit<8> count; bit<8> itype; bit<8> kept; bit<8> lost; }"
PARSER = "state start { pkt.extract(hdr.d); transition accept; }"

INGRESS = """
apply {
    if (hdr.d.count == 0 && sm.instance_type == 0) {
        meta.kept = 7;
        meta.lost = 9;
        resubmit_preserving_field_list(1);
    } else {
        hdr.d.itype = (bit<8>)sm.instance_type;
        hdr.d.kept = meta.kept;
        hdr.d.lost = meta.lost;
        sm.egress_spec = 2;
    }
}
"""

EGRESS = """
apply {
    if (hdr.d.count != 0 && hdr.d.count < 3) {
        hdr.d.count = hdr.d.count + 1;
        meta.kept = hdr.d.count;
        recirculate_preserving_field_list(1);
    }
    if (hdr.d.count == 200) { recirculate_preserving_field_list(1); }
}
"""


def switch(v1) -> Switch:
    return Switch.from_source(
        v1(
            HEADERS,
            PARSER,
            INGRESS,
            egress=EGRESS,
            deparser="apply { pkt.emit(hdr.d); }",
            hdr_fields="d_t d;",
            meta_fields="@field_list(1) bit<8> kept; bit<8> lost;",
        ),
        "resubmit.p4",
    )


def test_resubmit_preserves_only_the_field_list(v1) -> None:
    out = switch(v1).process(1, bytes([0, 0, 0, 0]) + b"payload")
    assert out == [(2, bytes([0, 6, 7, 0]) + b"payload")]  # instance_type 6 = resubmit


def test_recirculate_runs_the_deparsed_packet_again(v1) -> None:
    out = switch(v1).process(1, bytes([1, 0, 0, 0]))
    # egress counts 1 -> 2 -> 3, recirculating twice; the third pass leaves (instance_type 4)
    assert out == [(2, bytes([3, 4, 3, 0]))]


def test_endless_recirculation_is_cut(v1) -> None:
    sw = switch(v1)
    assert sw.process(1, bytes([200, 0, 0, 0])) == []
    assert sw.internal_errors == 0

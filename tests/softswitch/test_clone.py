"""clone (I2E and E2E) through mirroring sessions, with preserved field lists."""

from __future__ import annotations

import pytest

from softswitch import Switch, SwitchError

HEADERS = "header d_t { bit<8> mode; bit<8> itype; bit<8> kept; bit<8> ttl; }"
PARSER = "state start { pkt.extract(hdr.d); transition accept; }"

INGRESS = """
apply {
    meta.kept = 5;
    if (hdr.d.mode == 1) { clone_preserving_field_list(CloneType.I2E, 32w7, 1); }
    hdr.d.ttl = hdr.d.ttl - 1;  // the ingress clone does not see this
    sm.egress_spec = 2;
}
"""

EGRESS = """
apply {
    hdr.d.itype = (bit<8>)sm.instance_type;
    hdr.d.kept = meta.kept;
    if (hdr.d.mode == 2 && sm.instance_type == 0) { clone(CloneType.E2E, 32w7); }
    if (sm.instance_type == 2) { hdr.d.ttl = 99; }
}
"""


@pytest.fixture
def sw(v1) -> Switch:
    sw = Switch.from_source(
        v1(
            HEADERS,
            PARSER,
            INGRESS,
            egress=EGRESS,
            deparser="apply { pkt.emit(hdr.d); }",
            hdr_fields="d_t d;",
            meta_fields="@field_list(1) bit<8> kept;",
        ),
        "clone.p4",
    )
    sw.mirroring_session_set(7, port=9)
    return sw


def test_ingress_clone_is_the_original_packet_with_its_field_list(sw: Switch) -> None:
    out = sw.process(1, bytes([1, 0, 0, 10]))
    assert sorted(out) == [(2, bytes([1, 0, 5, 9])), (9, bytes([1, 1, 5, 10]))]


def test_egress_clone_copies_the_egress_result_with_metadata_reset(sw: Switch) -> None:
    out = sw.process(1, bytes([2, 0, 0, 10]))
    assert sorted(out) == [(2, bytes([2, 0, 5, 9])), (9, bytes([2, 2, 0, 99]))]


def test_unconfigured_session_clones_nothing(sw: Switch) -> None:
    sw.mirroring_session_delete(7)
    assert sw.process(1, bytes([1, 0, 0, 10])) == [(2, bytes([1, 0, 5, 9]))]
    with pytest.raises(SwitchError):
        sw.mirroring_session_get(7)

"""Minimal reproducers of software-switch engine bugs met while writing the KVSwitch program.

Each is ``xfail(strict=True)``: when the engine is fixed the test starts passing, pytest reports it
as XPASS-strict (a failure), and the workaround in p4src/ can go.
"""

from __future__ import annotations

import pytest

ENUM_FIELD_PROGRAM = """
#include <core.p4>
#include <v1model.p4>
enum bit<8> Kind { A = 1, B = 2 }
header h_t { Kind kind; bit<8> x; }
struct headers_t { h_t h; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control V(inout headers_t hdr, inout meta_t m) { apply { } }
control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t std) {
    apply {
        if (hdr.h.kind == Kind.B && hdr.h.x == 0x22) { std.egress_spec = 1; }
        else { mark_to_drop(std); }
    }
}
control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t std) { apply { } }
control C(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


@pytest.mark.xfail(
    strict=True,
    reason="engine: a header field typed with a serializable enum (enum bit<8>) is given width 0 "
    "when extracting (kvs_t was read as 34 bytes instead of 36); p4src/ declares op/status as "
    "bit<8> and casts to KvsOp instead",
)
def test_serializable_enum_header_field_has_its_width() -> None:
    from softswitch import Switch

    sw = Switch.from_source(ENUM_FIELD_PROGRAM, filename="enum_field.p4")
    packet = bytes([2, 0x22]) + b"payload"
    assert sw.process(0, packet) == [(1, packet)]

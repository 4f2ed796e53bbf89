// Preprocessor test program: includes, -D overrides, #if arithmetic, function-like macros.
#include <core.p4>
#include <v1model.p4>
#include "inc/sizes.p4"

header d_t { bit<8> slots; bit<8> twice; bit<8> big; }
struct h_t { d_t d; }
struct m_t { bit<8> unused; }

parser P(packet_in pkt, out h_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.d); transition accept; }
}
control VC(inout h_t hdr, inout m_t meta) { apply { } }
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    register<bit<8>>(SLOTS) r;
    apply {
        hdr.d.slots = SLOTS;
        hdr.d.twice = TWICE(SLOTS);
        hdr.d.big = BIG;
        sm.egress_spec = 1;
    }
}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout h_t hdr, inout m_t meta) { apply { } }
control D(packet_out pkt, in h_t hdr) { apply { pkt.emit(hdr.d); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;

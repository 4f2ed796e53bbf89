// What the TNA build adds to headers.p4: the bridged header (user metadata does not cross from
// ingress to egress on Tofino), the forwarding decision the features take, and the header and
// metadata structs of the two gresses.
#ifndef KVSWITCH_HEADERS_TNA_P4
#define KVSWITCH_HEADERS_TNA_P4

// Ingress -> egress, emitted first by the ingress deparser, extracted first by the egress parser,
// never sent on a wire. Not a byte more: the egress parser's longest path (the intrinsic metadata,
// this, the headers with ten TCP option words) is Tofino's 160 B already (docs/tofino.md, row 4).
header kvs_bridge_t {
    bit<16> residual;     // L4 checksum residual: the payload's ones' complement sum
    bit<1> kvs_ok;
    bit<1> mcast;
    bit<1> l4_dirty;
    bit<1> hp_count;      // kvs_meta_t.hp_count: HashPipe counts the packet (egress)
    bit<4> _pad;
}

// The ingress forwarding decision with v1model's ordering (the last word wins, as
// egress_spec/mcast_grp/mark_to_drop): a drop clears the group, a port clears a drop, a group
// wins over both. KvsIngress turns it into ucast_egress_port / mcast_grp_a / drop_ctl at its end
// (a TNA ucast_egress_port cannot be taken back once written).
// Bytes of kvs_bridge_t: egress byte counters leave them out (count's adjust_byte_count), so they
// count the packet as the v1model build's do.
const bit<32> KVS_BRIDGE_BYTES = 3;

struct kvs_fwd_t {
    PortId_t port;
    bool drop;
    MulticastGroupId_t grp;
}

// v1model's mark_to_drop on the decision.
void fwd_drop(inout kvs_fwd_t fwd) {
    fwd.drop = true;
    fwd.grp = 0;
}

struct kvs_tna_headers_t {
    kvs_bridge_t bridge;
    headers_t h;
}

struct kvs_tna_meta_t {
    kvs_meta_t kvs;
    kvs_fwd_t fwd;
}

// a CRC-32 hash unit with the parameters of v1model's crc32 (zlib's), W bits out (its low W bits):
// HashPipe's indices and tags (hashpipe_tna.p4), the rotation's writer (writer_table_tna.p4)
#define KVS_CRC32(W) \
    Hash<W>(HashAlgorithm_t.CUSTOM, CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, \
                                                           32w0xFFFFFFFF, 32w0xFFFFFFFF))

#endif  // KVSWITCH_HEADERS_TNA_P4

// Checksums on TNA, with the Checksum extern (checksums.p4 is the v1model build; the field lists
// are shared, checksum_fields.p4).
//
// IPv4: the ingress parser verifies the header checksum (KvsIngress drops a packet that fails, as
// the v1model build does); the egress deparser recomputes it on every packet.
//
// L4: Tofino's deparser cannot sum the payload, so the ingress parser takes the payload's share out
// of the sender's checksum: it subtracts the checksum field and every header field the L4 checksum
// covers but the TCP option words, which leaves the ones' complement sum of the payload and the
// options (the residual, bridged to egress). The switch never changes an option word, so the
// egress's TCP checksum takes them from the residual; a multicast copy of a TCP Set leaves as a UDP
// datagram without them, and its checksum takes them out again with opt_neg, the negated sum of the
// option words that the egress parser computes (0 without options). Options in no deparser checksum
// list leave the compiler no fields to reset when the copy's rewrite invalidates them (ten tables
// of a stage of their own: docs/tofino.md "The egress in 11 stages"). Tofino's parser does a
// checksum operation only in the state that extracts its fields, so the subtractions are hooks in
// the shared parser's states (parser.p4), and its pseudo-header length (UDP length, or IPv4 length
// minus 20 for TCP), which no extracted field holds for TCP, is taken out by a control
// (KvsResidual), in the egress, from the lengths as they arrived (the ingress changes none;
// docs/tofino.md "The ingress in 12 stages"). The egress deparser then computes the checksum of the
// final headers plus the residual when the switch changed a covered field (l4_dirty), which is what
// v1model's update_checksum_with_payload computes over the payload. This needs a correct checksum
// on arrival: a UDP datagram sent without one (checksum 0) and rewritten by the switch leaves with
// a wrong one (docs/tofino.md).
#ifndef KVSWITCH_CHECKSUMS_TNA_P4
#define KVSWITCH_CHECKSUMS_TNA_P4

#include "checksum_fields.p4"

// The hooks of KvsHeaderParser (parser.p4), which includes this file's definitions first.
#define KVS_PARSER_EXTERNS \
    Checksum() ipv4_csum; \
    Checksum() l4_csum; \
    Checksum() opt_csum;
#define KVS_CSUM_IPV4 \
    ipv4_csum.add({IPV4_CSUM_FIELDS, hdr.ipv4.hdr_checksum}); \
    meta.ipv4_csum_ok = ipv4_csum.verify(); \
    l4_csum.subtract({hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol});
#define KVS_CSUM_UDP \
    l4_csum.subtract({hdr.udp.checksum}); \
    l4_csum.subtract({hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length});
#define KVS_CSUM_TCP \
    l4_csum.subtract({hdr.tcp.checksum}); \
    l4_csum.subtract({TCP_HDR_FIELDS});
#define KVS_CSUM_TCP_OPTION(i) \
    opt_csum.subtract({hdr.tcp_options[i].word});
#define KVS_CSUM_KVS \
    l4_csum.subtract({KVS_CSUM_FIELDS}); \
    meta.residual = l4_csum.get(); \
    meta.opt_neg = opt_csum.get();

// Egress, after meta.l4_len and before the copy's rewrite (KvsEgress): the pseudo-header length L
// out of the parser's residual r, a ones' complement subtraction: r + ~L with the end-around carry,
// which is r - L when r > L (the carry) and r - L - 1 (mod 2^16) otherwise. One operation per step
// (a Tofino action's operations run in parallel, each on the values before it).
control KvsResidual(in headers_t hdr, inout kvs_meta_t meta) {
    bit<16> over = 0;
    bit<16> len_in = 0;
    action saturated() {  // r - L, or 0 when r <= L (a PHV field the gateway tests)
        over = meta.residual |-| len_in;
    }

    apply {
        len_in = meta.l4_len;
        bit<16> len_1 = meta.l4_len + 1;
        if (hdr.udp.isValid()) {
            len_in = hdr.udp.length;
            len_1 = hdr.udp.length + 1;
        }
        saturated();
        if (over != 0) {
            meta.residual = over;
        } else {
            meta.residual = meta.residual - len_1;
        }
    }
}

control KvsChecksumUpdate(inout headers_t hdr, in kvs_meta_t meta, in bit<16> residual) {
    Checksum() ipv4_csum;
    Checksum() udp_csum;
    Checksum() tcp_csum;

    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_csum.update({IPV4_CSUM_FIELDS});
        }
        // only on a KVS message (KvsEgress); one condition of one bit for both (a header that is
        // not valid is not emitted, nor its checksum): a compound one costs a table per update
        if (meta.l4_dirty) {
            hdr.udp.checksum = udp_csum.update({UDP_CSUM_FIELDS, residual, meta.opt_neg});
            hdr.tcp.checksum = tcp_csum.update({TCP_CSUM_HEAD, TCP_CSUM_TAIL, residual});
        }
    }
}

#endif  // KVSWITCH_CHECKSUMS_TNA_P4

// Checksums.
//
// IPv4 header checksum: verified on ingress (a packet that fails is dropped, like a router does) and
// recomputed on every packet, since forwarding decrements the TTL.
//
// L4 checksums: recomputed over the pseudo-header, the L4 header, the KVSwitch header and the payload
// (update_checksum_with_payload) on every packet whose addresses, KVSwitch fields or transport the
// switch changed (meta.l4_dirty): redirected Gets, stamped writes, multicast copies, TCP Sets turned
// into UDP, reflected SYNCs. We recompute rather than zero the UDP checksum because zero would also
// switch off end-to-end integrity for the values the replicas store, and TCP has no such escape.
// Untouched packets keep the sender's checksum byte for byte (no cost, no change).
// A UDP sum that comes out as 0x0000 is sent as 0 ("no checksum", RFC 768), which receivers accept.
#ifndef KVSWITCH_CHECKSUMS_P4
#define KVSWITCH_CHECKSUMS_P4

#include "checksum_fields.p4"

control KvsVerifyChecksum(inout headers_t hdr, inout kvs_meta_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && !meta.ipv4_refused,
            {IPV4_CSUM_FIELDS},
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control KvsComputeChecksum(inout headers_t hdr, inout kvs_meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            {IPV4_CSUM_FIELDS},
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        // UDP: pseudo-header (src, dst, zero, protocol, UDP length), UDP header without its
        // checksum, KVSwitch header, then the value bytes (the payload).
        update_checksum_with_payload(meta.l4_dirty && hdr.udp.isValid() && hdr.kvs.isValid(),
            {UDP_CSUM_FIELDS},
            hdr.udp.checksum, HashAlgorithm.csum16);
        // TCP: pseudo-header with the TCP length (meta.l4_len), TCP header without its checksum,
        // option words, KVSwitch header, payload.
        update_checksum_with_payload(meta.l4_dirty && hdr.tcp.isValid() && hdr.kvs.isValid(),
            {TCP_CSUM_HEAD, TCP_OPTION_FIELDS, TCP_CSUM_TAIL},
            hdr.tcp.checksum, HashAlgorithm.csum16);
    }
}

#endif  // KVSWITCH_CHECKSUMS_P4

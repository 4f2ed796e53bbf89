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

control KvsVerifyChecksum(inout headers_t hdr, inout kvs_meta_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && !hdr.ipv4_options.isValid(),
            {hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
             hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
             hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr},
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        verify_checksum(hdr.ipv4_options.isValid(),
            {hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
             hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
             hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4_options.options},
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control KvsComputeChecksum(inout headers_t hdr, inout kvs_meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && !hdr.ipv4_options.isValid(),
            {hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
             hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
             hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr},
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum(hdr.ipv4_options.isValid(),
            {hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
             hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
             hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4_options.options},
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        // UDP: pseudo-header (src, dst, zero, protocol, UDP length), UDP header without its
        // checksum, KVSwitch header, then the value bytes (the payload).
        update_checksum_with_payload(meta.l4_dirty && hdr.udp.isValid() && hdr.kvs.isValid(),
            {hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp.length,
             hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length,
             hdr.kvs.op, hdr.kvs.status, hdr.kvs.vlen, hdr.kvs.cid, hdr.kvs.seq, hdr.kvs.epoch,
             hdr.kvs.flags, hdr.kvs.ver, hdr.kvs.key},
            hdr.udp.checksum, HashAlgorithm.csum16);
        // TCP: pseudo-header with the TCP length (meta.l4_len), TCP header without its checksum,
        // options when present, KVSwitch header, payload.
        update_checksum_with_payload(meta.l4_dirty && hdr.tcp.isValid() && hdr.kvs.isValid()
                                     && !hdr.tcp_options.isValid(),
            {hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, meta.l4_len,
             hdr.tcp.src_port, hdr.tcp.dst_port, hdr.tcp.seq_no, hdr.tcp.ack_no,
             hdr.tcp.data_offset, hdr.tcp.res, hdr.tcp.tcp_flags, hdr.tcp.window,
             hdr.tcp.urgent_ptr,
             hdr.kvs.op, hdr.kvs.status, hdr.kvs.vlen, hdr.kvs.cid, hdr.kvs.seq, hdr.kvs.epoch,
             hdr.kvs.flags, hdr.kvs.ver, hdr.kvs.key},
            hdr.tcp.checksum, HashAlgorithm.csum16);
        update_checksum_with_payload(meta.l4_dirty && hdr.tcp.isValid() && hdr.kvs.isValid()
                                     && hdr.tcp_options.isValid(),
            {hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, meta.l4_len,
             hdr.tcp.src_port, hdr.tcp.dst_port, hdr.tcp.seq_no, hdr.tcp.ack_no,
             hdr.tcp.data_offset, hdr.tcp.res, hdr.tcp.tcp_flags, hdr.tcp.window,
             hdr.tcp.urgent_ptr, hdr.tcp_options.options,
             hdr.kvs.op, hdr.kvs.status, hdr.kvs.vlen, hdr.kvs.cid, hdr.kvs.seq, hdr.kvs.epoch,
             hdr.kvs.flags, hdr.kvs.ver, hdr.kvs.key},
            hdr.tcp.checksum, HashAlgorithm.csum16);
    }
}

#endif  // KVSWITCH_CHECKSUMS_P4

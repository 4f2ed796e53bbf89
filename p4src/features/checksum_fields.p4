// The fields each checksum covers, in wire order: one list for the v1model build (checksums.p4,
// update_checksum*) and the TNA build (checksums_tna.p4, the Checksum extern).
#ifndef KVSWITCH_CHECKSUM_FIELDS_P4
#define KVSWITCH_CHECKSUM_FIELDS_P4

// IPv4 header without its checksum (options, when present, follow).
#define IPV4_CSUM_FIELDS \
    hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, \
    hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, \
    hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr

// The KVSwitch header (the value bytes follow as the payload).
#define KVS_CSUM_FIELDS \
    hdr.kvs.op, hdr.kvs.status, hdr.kvs.vlen, hdr.kvs.cid, hdr.kvs.seq, hdr.kvs.epoch, \
    hdr.kvs.flags, hdr.kvs.ver, hdr.kvs.key

// UDP: pseudo-header (src, dst, zero, protocol, UDP length), UDP header without its checksum,
// KVSwitch header.
#define UDP_CSUM_FIELDS \
    hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp.length, \
    hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length, KVS_CSUM_FIELDS

// TCP: pseudo-header with the TCP length (meta.l4_len), TCP header without its checksum; then the
// options when present, then TCP_CSUM_TAIL.
#define TCP_CSUM_HEAD \
    hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, meta.l4_len, \
    hdr.tcp.src_port, hdr.tcp.dst_port, hdr.tcp.seq_no, hdr.tcp.ack_no, \
    hdr.tcp.data_offset, hdr.tcp.res, hdr.tcp.tcp_flags, hdr.tcp.window, hdr.tcp.urgent_ptr
#define TCP_CSUM_TAIL KVS_CSUM_FIELDS

#endif  // KVSWITCH_CHECKSUM_FIELDS_P4

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

// TCP: pseudo-header with the TCP length (meta.l4_len), TCP header without its checksum
// (TCP_HDR_FIELDS), the option words (an invalid word is zero: a ones' complement sum skips it),
// then TCP_CSUM_TAIL.
#define TCP_HDR_FIELDS \
    hdr.tcp.src_port, hdr.tcp.dst_port, hdr.tcp.seq_no, hdr.tcp.ack_no, \
    hdr.tcp.data_offset, hdr.tcp.res, hdr.tcp.tcp_flags, hdr.tcp.window, hdr.tcp.urgent_ptr
#define TCP_CSUM_HEAD \
    hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, meta.l4_len, TCP_HDR_FIELDS
#define TCP_OPTION_FIELDS \
    hdr.tcp_options[0].word, hdr.tcp_options[1].word, hdr.tcp_options[2].word, \
    hdr.tcp_options[3].word, hdr.tcp_options[4].word, hdr.tcp_options[5].word, \
    hdr.tcp_options[6].word, hdr.tcp_options[7].word, hdr.tcp_options[8].word, \
    hdr.tcp_options[9].word
#define TCP_CSUM_TAIL KVS_CSUM_FIELDS

#endif  // KVSWITCH_CHECKSUM_FIELDS_P4

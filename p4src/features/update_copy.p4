// The rewrite of a multicast copy for its replica (both builds: multicast.p4, multicast_tna.p4):
// SET -> UPDATE, DEL -> UPDATE_DEL; a copy of a TCP Set becomes a UDP datagram (flags |= F_TCP,
// same source port, destination KVS_PORT) because the replica has no TCP connection with the
// client.
#ifndef KVSWITCH_UPDATE_COPY_P4
#define KVSWITCH_UPDATE_COPY_P4

control UpdateCopy(inout headers_t hdr) {
    apply {
        if (hdr.kvs.op == KvsOp.SET) {
            hdr.kvs.op = KvsOp.UPDATE;
        } else {
            hdr.kvs.op = KvsOp.UPDATE_DEL;
        }
        if (hdr.tcp.isValid()) {
            hdr.udp.setValid();
            hdr.udp.src_port = hdr.tcp.src_port;
            hdr.udp.dst_port = KVS_PORT;
            hdr.udp.length = 8 + KVS_HDR_LEN + hdr.kvs.vlen;
            hdr.udp.checksum = 0;
            hdr.ipv4.protocol = IP_PROTO_UDP;
            // (the parser takes IPv4 headers of 5 words only; one add from vlen, not from the
            // UDP length just written: a Tofino action's operations run in parallel)
            hdr.ipv4.total_len = 20 + 8 + KVS_HDR_LEN + hdr.kvs.vlen;
            hdr.kvs.flags = hdr.kvs.flags | KVS_F_TCP;
            hdr.tcp.setInvalid();
            hdr.tcp_options[0].setInvalid();
            hdr.tcp_options[1].setInvalid();
            hdr.tcp_options[2].setInvalid();
            hdr.tcp_options[3].setInvalid();
            hdr.tcp_options[4].setInvalid();
            hdr.tcp_options[5].setInvalid();
            hdr.tcp_options[6].setInvalid();
            hdr.tcp_options[7].setInvalid();
            hdr.tcp_options[8].setInvalid();
            hdr.tcp_options[9].setInvalid();
        }
    }
}

#endif  // KVSWITCH_UPDATE_COPY_P4

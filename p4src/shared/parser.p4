// Parser, deparser and the KVSwitch header length check.
//
// Ethernet / IPv4 (options kept via ihl) / UDP or TCP (options kept via data_offset) / KVSwitch
// header when the destination or the source L4 port is KVS_PORT. TCP segments without payload (SYN,
// ACK, FIN) are not parsed as KVSwitch messages. A packet too short for a header it announces ends
// the parser with error.PacketTooShort: the headers before it stay valid, the KVSwitch header stays
// invalid, and the ingress forwards it as plain IP (KvsCheck never accepts a packet with a parser
// error), so no KVSwitch state is touched.
#ifndef KVSWITCH_PARSER_P4
#define KVSWITCH_PARSER_P4

error {
    Ipv4BadHeader,
    TcpBadHeader
}

// The headers, for every target, in two parts so that a TNA parser can verify the IPv4 checksum
// between them: KvsL3Parser (Ethernet, IPv4 and its options), then, for IPv4, KvsL4Parser (UDP/TCP
// and the KVSwitch header). v1model's KvsParser (parser_v1model.p4) and TNA's ingress and egress
// parsers (parser_tna.p4) apply them after their intrinsic metadata.
parser KvsL3Parser(packet_in pkt, out headers_t hdr, inout kvs_meta_t meta, out bit<8> l4_proto) {
    state start {
        l4_proto = 0;
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4 && hdr.ipv4.ihl >= 5, error.Ipv4BadHeader);
        meta.l4_len = hdr.ipv4.total_len - ((bit<16>)hdr.ipv4.ihl << 2);
        // only the first fragment carries the L4 header
        l4_proto = hdr.ipv4.frag_offset == 0 ? hdr.ipv4.protocol : 8w0;
        transition select(hdr.ipv4.ihl) {
            5: accept;
            default: parse_ipv4_options;
        }
    }

    state parse_ipv4_options {
        pkt.extract(hdr.ipv4_options, ((bit<32>)hdr.ipv4.ihl - 5) << 5);
        transition accept;
    }
}

parser KvsL4Parser(packet_in pkt, in bit<8> l4_proto, inout headers_t hdr, inout kvs_meta_t meta) {
    bit<16> tcp_payload_len;

    state start {
        transition select(l4_proto) {
            IP_PROTO_UDP: parse_udp;
            IP_PROTO_TCP: parse_tcp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port, hdr.udp.src_port) {
            (KVS_PORT, _): parse_kvs;
            (_, KVS_PORT): parse_kvs;
            default: accept;
        }
    }

    state parse_tcp {
        pkt.extract(hdr.tcp);
        verify(hdr.tcp.data_offset >= 5, error.TcpBadHeader);
        transition select(hdr.tcp.data_offset) {
            5: parse_tcp_payload;
            default: parse_tcp_options;
        }
    }

    state parse_tcp_options {
        pkt.extract(hdr.tcp_options, ((bit<32>)hdr.tcp.data_offset - 5) << 5);
        transition parse_tcp_payload;
    }

    // A segment whose IPv4 length ends with the TCP header (SYN, pure ACK, FIN) carries no request.
    // (A bogus IPv4 length makes tcp_payload_len wrap around; KvsCheck rejects that packet.)
    state parse_tcp_payload {
        tcp_payload_len = meta.l4_len - ((bit<16>)hdr.tcp.data_offset << 2);
        transition select(tcp_payload_len, hdr.tcp.dst_port, hdr.tcp.src_port) {
            (0, _, _): accept;
            (_, KVS_PORT, _): parse_kvs;
            (_, _, KVS_PORT): parse_kvs;
            default: accept;
        }
    }

    state parse_kvs {
        pkt.extract(hdr.kvs);
        transition accept;
    }
}


// Accepts the KVSwitch header only when the parser finished without error and the header plus its
// value fit in the datagram (UDP length) or segment (IPv4 length), and the frame really holds the
// IPv4 length it announces: docs/protocol.md "malformed".
// Ethernet padding can make a short datagram parse; this check is what rejects it.
// `parsed`: the parser ended without error; `frame_len`: the frame's length in bytes (v1model's
// packet_length; Tofino's ingress does not know it and passes the largest value: docs/tofino.md).
control KvsCheck(in headers_t hdr, inout kvs_meta_t meta, in bool parsed, in bit<32> frame_len) {
    apply {
        meta.kvs_ok = false;
        if (parsed && hdr.kvs.isValid()) {
            bit<32> need = (bit<32>)KVS_HDR_LEN + (bit<32>)hdr.kvs.vlen;
            bit<32> l4_len = (bit<32>)meta.l4_len;
            if (hdr.ipv4.total_len < ((bit<16>)hdr.ipv4.ihl << 2)
                || 14 + (bit<32>)hdr.ipv4.total_len > frame_len) {
                // A lying IPv4 length, or a frame cut short of it: the value is not all there.
                meta.kvs_ok = false;
            } else if (hdr.udp.isValid()) {
                bit<32> udp_len = (bit<32>)hdr.udp.length;
                meta.kvs_ok = udp_len <= l4_len && udp_len >= 8 + need;
            } else if (hdr.tcp.isValid()) {
                bit<32> tcp_hdr_len = (bit<32>)hdr.tcp.data_offset << 2;
                meta.kvs_ok = l4_len >= tcp_hdr_len + need;
            }
        }
    }
}

control KvsDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_options);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.tcp_options);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.kvs);
    }
}

#endif  // KVSWITCH_PARSER_P4

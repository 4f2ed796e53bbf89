// Parser, deparser and the KVSwitch header length check.
//
// Ethernet / IPv4 / UDP or TCP (options kept, up to 10 words) / KVSwitch header when the destination
// or the source L4 port is KVS_PORT. Only what Tofino's parser can do (docs/tofino.md): extracts,
// selects and constant assignments, no arithmetic. TCP segments without payload (SYN, ACK, FIN) are
// not parsed as KVSwitch messages. An IPv4 header of a version other than 4 or a length other than
// 5 words (options, or a malformed header) sets meta.ipv4_refused: the ingress drops the packet, as
// a data-centre switch that does not process IPv4 options does. A packet too short for a header it
// announces ends the parser with error.PacketTooShort: the headers before it stay valid, the
// KVSwitch header stays invalid, and the ingress forwards it as plain IP (KvsCheck never accepts a
// packet with a parser error), so no KVSwitch state is touched.
#ifndef KVSWITCH_PARSER_P4
#define KVSWITCH_PARSER_P4

// What a build adds in the states that extract the fields (Tofino: a checksum operation must be in
// the state that extracts its fields): the TNA build's IPv4 checksum verification and L4 residual
// (checksums_tna.p4 defines these before including this file); nothing for v1model.
#ifndef KVS_PARSER_EXTERNS
#define KVS_PARSER_EXTERNS
#define KVS_CSUM_IPV4
#define KVS_CSUM_UDP
#define KVS_CSUM_TCP
#define KVS_CSUM_TCP_OPTION(i)
#define KVS_CSUM_KVS
#endif

// The headers, for every target: v1model's KvsParser (parser_v1model.p4) and TNA's ingress and
// egress parsers (parser_tna.p4) apply it after their intrinsic metadata.
parser KvsHeaderParser(packet_in pkt, out headers_t hdr, inout kvs_meta_t meta) {
    KVS_PARSER_EXTERNS

    state start {
        meta.ipv4_refused = false;
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    // only the first fragment carries the L4 header
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        KVS_CSUM_IPV4
        transition select(hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4, 5, 0, IP_PROTO_UDP): parse_udp;
            (4, 5, 0, IP_PROTO_TCP): parse_tcp;
            (4, 5, _, _): accept;
            default: ipv4_refused;
        }
    }

    state ipv4_refused {
        meta.ipv4_refused = true;
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        KVS_CSUM_UDP
        transition select(hdr.udp.dst_port, hdr.udp.src_port) {
            (KVS_PORT, _): parse_kvs;
            (_, KVS_PORT): parse_kvs;
            default: accept;
        }
    }

    // A segment whose IPv4 length ends with the TCP header (20 + 4 * data_offset: SYN, pure ACK,
    // FIN) carries no request. A data offset below 5 is not a TCP header KVSwitch reads (plain IP).
    // n option words go to tcp_options[10 - n .. 9].
    state parse_tcp {
        pkt.extract(hdr.tcp);
        KVS_CSUM_TCP
        transition select(hdr.tcp.data_offset, hdr.ipv4.total_len) {
            (5, 40): accept;
            (6, 44): accept;
            (7, 48): accept;
            (8, 52): accept;
            (9, 56): accept;
            (10, 60): accept;
            (11, 64): accept;
            (12, 68): accept;
            (13, 72): accept;
            (14, 76): accept;
            (15, 80): accept;
            (5, _): tcp_ports;
            (6, _): tcp_option_9;
            (7, _): tcp_option_8;
            (8, _): tcp_option_7;
            (9, _): tcp_option_6;
            (10, _): tcp_option_5;
            (11, _): tcp_option_4;
            (12, _): tcp_option_3;
            (13, _): tcp_option_2;
            (14, _): tcp_option_1;
            (15, _): tcp_option_0;
            default: accept;
        }
    }

    state tcp_option_0 {
        pkt.extract(hdr.tcp_options[0]);
        KVS_CSUM_TCP_OPTION(0)
        transition tcp_option_1;
    }

    state tcp_option_1 {
        pkt.extract(hdr.tcp_options[1]);
        KVS_CSUM_TCP_OPTION(1)
        transition tcp_option_2;
    }

    state tcp_option_2 {
        pkt.extract(hdr.tcp_options[2]);
        KVS_CSUM_TCP_OPTION(2)
        transition tcp_option_3;
    }

    state tcp_option_3 {
        pkt.extract(hdr.tcp_options[3]);
        KVS_CSUM_TCP_OPTION(3)
        transition tcp_option_4;
    }

    state tcp_option_4 {
        pkt.extract(hdr.tcp_options[4]);
        KVS_CSUM_TCP_OPTION(4)
        transition tcp_option_5;
    }

    state tcp_option_5 {
        pkt.extract(hdr.tcp_options[5]);
        KVS_CSUM_TCP_OPTION(5)
        transition tcp_option_6;
    }

    state tcp_option_6 {
        pkt.extract(hdr.tcp_options[6]);
        KVS_CSUM_TCP_OPTION(6)
        transition tcp_option_7;
    }

    state tcp_option_7 {
        pkt.extract(hdr.tcp_options[7]);
        KVS_CSUM_TCP_OPTION(7)
        transition tcp_option_8;
    }

    state tcp_option_8 {
        pkt.extract(hdr.tcp_options[8]);
        KVS_CSUM_TCP_OPTION(8)
        transition tcp_option_9;
    }

    state tcp_option_9 {
        pkt.extract(hdr.tcp_options[9]);
        KVS_CSUM_TCP_OPTION(9)
        transition tcp_ports;
    }

    state tcp_ports {
        transition select(hdr.tcp.dst_port, hdr.tcp.src_port) {
            (KVS_PORT, _): parse_kvs;
            (_, KVS_PORT): parse_kvs;
            default: accept;
        }
    }

    state parse_kvs {
        pkt.extract(hdr.kvs);
        KVS_CSUM_KVS
        transition accept;
    }
}

// Accepts the KVSwitch header only when the parser finished without error and the header plus its
// value fit in the datagram (UDP length) or segment (IPv4 length), and the frame really holds the
// IPv4 length it announces: docs/protocol.md "malformed".
// Ethernet padding can make a short datagram parse; this check is what rejects it.
// `parsed`: the parser ended without error; `ip_room`: the frame's bytes after the Ethernet header
// (v1model: packet_length - 14; Tofino's ingress does not know the frame length and passes the
// IPv4 length itself, a field: a constant would cost a stage to load, docs/tofino.md). Lengths are compared through saturating differences (a |-| b: 0
// when b >= a) computed in an action: Tofino's gateways compare a field with a constant only.
// A gateway reads 4 bytes of exact match and 12 bits of range: d >= c (0 <= c < 4096) for a 16-bit
// difference d is "d's bits 15..12 are not all 0, or its low 12 bits are >= c".
// A TCP segment fits when its fill (IPv4 length - vlen) is at least 20 + 4 * data offset + 36:
// one constant row per data offset (5 .. 15) of TcpFitsTable.
#define KVS_TCP_FITS(doff) (doff, (bit<16>)(20 + 4 * doff) + KVS_HDR_LEN .. 0xFFFF): tcp_fits();
// `accepted`: the verdict again, in a field of its own that no later control writes (Trust's
// refusal clears meta.kvs_ok): the TNA ingress gates its lookups on it (kvswitch_tna.p4). The
// caller sets it and meta.kvs_ok false first (with its other defaults: one step on Tofino, where
// defaults written here took a stage of their own); the verdict sets both when it accepts.

// The lengths KvsCheck compares, as saturating differences (first step, from the headers alone).
struct kvs_lengths_t {
    bit<16> cut;       // != 0: a frame cut short of its IPv4 length
    bit<16> udp_room;  // >= 20: the datagram fits the IPv4 length
    bit<16> udp_fill;  // >= 8 + 36: the KVSwitch header and its value fit the datagram
    bit<16> tcp_fill;  // >= 20 + TCP header + 36: they fit the segment
}

// KvsCheck's first step, a control of its own so that a caller can apply other controls between
// the two (Tofino 1 places no table of a statement before those of an earlier one): the
// differences and the TCP pseudo-header length, one action.
control KvsLengths(in headers_t hdr, inout kvs_meta_t meta, in bit<32> ip_room,
                   out kvs_lengths_t len) {
    action differences() {
        meta.l4_len = hdr.ipv4.total_len - 20;  // (the parser takes IPv4 headers of 5 words only)
        len.cut = hdr.ipv4.total_len |-| (bit<16>)ip_room;
        len.udp_room = hdr.ipv4.total_len |-| hdr.udp.length;
        len.udp_fill = hdr.udp.length |-| hdr.kvs.vlen;
        len.tcp_fill = hdr.ipv4.total_len |-| hdr.kvs.vlen;
    }

    apply {
        differences();
    }
}

control KvsCheck(in headers_t hdr, inout kvs_meta_t meta, in bool parsed, in kvs_lengths_t len,
                 inout bool accepted) {
    @name("tcp_fits")
    action tcp_fits() {
        meta.kvs_ok = true;
        accepted = true;
    }

    // The segment's fill against its TCP header's length, by data offset. Constant entries, no
    // control-plane writes: on Tofino one table is one stage, where the same eleven tests as an
    // else-if chain of gateways took one stage more (docs/tofino.md, "Down to 26 stages").
    @name("TcpFitsTable")
    table tcp_fits_table {
        key = {
            hdr.tcp.data_offset: exact @name("data_offset");
            len.tcp_fill: range @name("fill");
        }
        actions = {
            tcp_fits;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        const entries = {
            KVS_TCP_FITS(5)
            KVS_TCP_FITS(6)
            KVS_TCP_FITS(7)
            KVS_TCP_FITS(8)
            KVS_TCP_FITS(9)
            KVS_TCP_FITS(10)
            KVS_TCP_FITS(11)
            KVS_TCP_FITS(12)
            KVS_TCP_FITS(13)
            KVS_TCP_FITS(14)
            KVS_TCP_FITS(15)
        }
    }

    apply {
        // The verdict in one step after the differences (one stage on Tofino): nested ifs on the
        // differences' bits and the headers, each writing kvs_ok itself, no bool computed in
        // between (a bool set in an if is a field a later stage tests: one stage more). An IPv4
        // length below its own header (20) fails every branch: the datagram's room needs
        // total_len >= 20 + udp.length, the segment's fill total_len >= 20 + TCP header + 36.
        if (parsed && hdr.kvs.isValid() && len.cut == 0) {
            if (hdr.udp.isValid()) {
                // the datagram fits the IPv4 length, then the header and its value fit the
                // datagram (a gateway reads 4 bytes + 12 bits: one difference per if)
                if (len.udp_room[15:12] != 0 || len.udp_room[11:0] >= 20) {
                    if (len.udp_fill[15:12] != 0 || len.udp_fill[11:0] >= 8 + KVS_HDR_LEN[11:0]) {
                        meta.kvs_ok = true;
                        accepted = true;
                    }
                }
            } else if (hdr.tcp.isValid()) {
                tcp_fits_table.apply();
            }
        }
    }
}

control KvsDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.tcp_options);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.kvs);
    }
}

#endif  // KVSWITCH_PARSER_P4

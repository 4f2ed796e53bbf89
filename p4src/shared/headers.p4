// Packet headers and the per-packet metadata of the KVSwitch pipeline.
#ifndef KVSWITCH_HEADERS_P4
#define KVSWITCH_HEADERS_P4

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<128> kvs_key_t;
typedef bit<SLOT_W> slot_t;
typedef bit<ORDINAL_W> ordinal_t;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8> IP_PROTO_TCP = 6;
const bit<8> IP_PROTO_UDP = 17;

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<8> diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4> data_offset;
    bit<4> res;
    bit<8> tcp_flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

// TCP options (data_offset > 5): up to 10 words, kept so that the deparser re-emits them unchanged.
// Fixed words, not a varbit: Tofino's checksum units take no varbit, and the L4 residual
// (checksums_tna.p4) must leave the options out. Word i of a segment with n words is
// tcp_options[10 - n + i] (the parser's states have fixed indices; the deparser emits the valid
// ones in order).
#define TCP_OPTION_WORDS 10
header tcp_option_t {
    bit<32> word;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// The KVSwitch header (docs/protocol.md, 36 bytes).
header kvs_t {
    KvsOp op;
    KvsStatus status;
    bit<16> vlen;
    bit<32> cid;
    bit<32> seq;
    bit<16> epoch;
    bit<16> flags;
    bit<32> ver;
    kvs_key_t key;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t ipv4;
    tcp_t tcp;
    tcp_option_t[TCP_OPTION_WORDS] tcp_options;
    udp_t udp;
    kvs_t kvs;
}

struct kvs_meta_t {
    // Parser: an IPv4 header the switch does not forward (a version other than 4, a header
    // length other than 5 words: options, which KVSwitch drops, or a malformed header).
    bool ipv4_refused;
    // KvsCheck: IPv4 payload length (L4 header + data), the TCP pseudo-header length.
    bit<16> l4_len;
    // TNA build only (checksums_tna.p4), set by the parser: the IPv4 header checksum is right; the
    // L4 residual (the payload's share of the sender's L4 checksum, after KvsResidual).
    bool ipv4_csum_ok;
    bit<16> residual;
    // TNA build only, set by the egress parser: the ones' complement of the TCP option words' sum
    // (checksums_tna.p4; the residual holds them).
    bit<16> opt_neg;
    // KvsCheck: the KVSwitch header is complete and its value fits the datagram/segment.
    bool kvs_ok;
    // The switch changed something an L4 checksum covers (addresses, header fields, transport).
    bool l4_dirty;
    // HotkeyTable hit (requests) or KeyindexTable hit (replies, confirms, syncs).
    bool hot;
    slot_t slot;
    ordinal_t n;
    bit<32> base;
    // KeyindexTable: confirms of versions <= floor are ignored (handed out before the key's
    // holders last changed).
    bit<32> floor;
    // A hot SET/DEL sent to a multicast group: egress rewrites every copy with egress_rid != 0.
    bool mcast;
    // The ingress's verdict for HashPipe, which counts in the egress (hashpipe.p4): a request that
    // passed the checks and trust, of a key that is not hot, whose origin is not down, the switch's
    // own (not steered). Never with a group (only a hot key takes one): counted once per packet.
    bool hp_count;
    // DownTable hit (liveness.p4): the request's origin is a server the controller declared dead.
    bool origin_down;
    // Replicas: a hot SET/DEL addressed to another server than the key's origin (a client with an
    // older ring, or a forged write). It takes no version and makes no copy; the server it names
    // answers MOVED (docs/protocol.md rule 1).
    bool misaddressed;
#ifdef KVS_SPINE
    // HotkeyTable (a spine's, requests): 1 = the key's writes rotate over its holders
    // (docs/protocol.md F7); MultigroupTable then makes no copies (multicast.p4).
    bit<1> rotate;
#endif
}

// A datagram sent back where it came from: IPv4 addresses and UDP ports swapped, a fresh TTL (the
// switch's answers: UNAVAILABLE, liveness.p4; a SYNC's, replicas*.p4). Called inside an action,
// where Tofino makes the swaps one step.
void reflect_ip_udp(inout headers_t hdr) {
    ipv4_addr_t ip = hdr.ipv4.dst_addr;
    hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
    hdr.ipv4.src_addr = ip;
    hdr.ipv4.ttl = 64;
    bit<16> port = hdr.udp.dst_port;
    hdr.udp.dst_port = hdr.udp.src_port;
    hdr.udp.src_port = port;
}

// The same with the Ethernet addresses swapped too (the SYNC's answer).
void reflect(inout headers_t hdr) {
    mac_addr_t mac = hdr.ethernet.dst_addr;
    hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
    hdr.ethernet.src_addr = mac;
    reflect_ip_udp(hdr);
}

#endif  // KVSWITCH_HEADERS_P4

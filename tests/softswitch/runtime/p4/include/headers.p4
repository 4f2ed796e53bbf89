/* Headers of the runtime test program (kept in an include to exercise source bundles). */
#ifndef RUNTIME_HEADERS_P4
#define RUNTIME_HEADERS_P4

typedef bit<48> mac_t;
typedef bit<32> ip4_t;
typedef bit<9> port_t;

@controller_header("packet_in")
header packet_in_t {
    port_t ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    port_t egress_port;
    bit<7> _pad;
}

header ethernet_t {
    mac_t dstAddr;
    mac_t srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<8> diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3> flags;
    bit<13> fragOffset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdrChecksum;
    ip4_t srcAddr;
    ip4_t dstAddr;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t packet_in;
    ethernet_t ethernet;
    ipv4_t ipv4;
}

struct metadata_t {
    bit<8> unused;
}

#endif

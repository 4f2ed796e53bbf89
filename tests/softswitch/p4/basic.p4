/* Small v1model program used by the engine tests: L2/L3 forwarding with the usual headers. */
#include <core.p4>
#include <v1model.p4>

#ifndef TABLE_SIZE
#define TABLE_SIZE 1024
#endif

const bit<16> TYPE_IPV4 = 0x800;
typedef bit<48> mac_t;
typedef bit<32> ip4_t;

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

struct metadata_t {
    bit<32> seen;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t ipv4;
}

parser MyParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(64, CounterType.packets_and_bytes) port_counter;
    direct_counter(CounterType.packets_and_bytes) lpm_counter;
    register<bit<32>>(16) last_ttl;

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action ipv4_forward(mac_t dstAddr, bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action set_mcast(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
    }
    @name("ipv4_lpm")
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm @name("dst"); }
        actions = { ipv4_forward; drop; set_mcast; NoAction; }
        size = TABLE_SIZE;
        default_action = drop();
        counters = lpm_counter;
    }
    apply {
        port_counter.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.ipv4.isValid()) {
            last_ttl.write((bit<32>)standard_metadata.ingress_port, (bit<32>)hdr.ipv4.ttl);
            ipv4_lpm.apply();
        } else {
            drop();
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_rid != 0) {
            hdr.ipv4.identification = standard_metadata.egress_rid;
        }
    }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;

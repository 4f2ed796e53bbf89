/* Program for the runtime tests: one table of each match kind, a direct counter, a counter
 * array, a register, multicast and packet-in/out through a CPU port. */
#include <core.p4>
#include <v1model.p4>
#include "include/headers.p4"

#ifndef CPU_PORT
#define CPU_PORT 255
#endif
#ifndef TABLE_SIZE
#define TABLE_SIZE 16384
#endif

parser RtParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control RtVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control RtIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(64, CounterType.packets_and_bytes) port_counter;
    direct_counter(CounterType.packets_and_bytes) lpm_counter;
    register<bit<32>>(16) last_ttl;
    register<bit<128>>(2) wide;  // wider than Thrift's i64

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action forward(port_t port) {
        standard_metadata.egress_spec = port;
    }
    action ipv4_forward(mac_t dstAddr, port_t port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action set_mcast(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
    }
    action punt() {
        standard_metadata.egress_spec = CPU_PORT;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm @name("dst"); }
        actions = { ipv4_forward; drop; set_mcast; NoAction; }
        size = TABLE_SIZE;
        default_action = NoAction();
        counters = lpm_counter;
    }
    table acl {
        key = { hdr.ethernet.etherType: ternary @name("ether_type"); }
        actions = { drop; punt; @defaultonly NoAction; }
        default_action = NoAction();
    }
    table l2 {
        key = { standard_metadata.ingress_port: exact @name("in_port"); }
        actions = { forward; set_mcast; drop; NoAction; }
        default_action = NoAction();
    }

    apply {
        port_counter.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            l2.apply();
            if (hdr.ipv4.isValid()) {
                last_ttl.write((bit<32>)standard_metadata.ingress_port, (bit<32>)hdr.ipv4.ttl);
                ipv4_lpm.apply();
            }
            acl.apply();
        }
    }
}

control RtEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
        }
    }
}

control RtComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control RtDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(RtParser(), RtVerifyChecksum(), RtIngress(), RtEgress(), RtComputeChecksum(),
         RtDeparser()) main;

/* The runtime test program for TNA: the control-plane names of runtime.p4 (tables, actions, match
 * fields, counters, register) on Tofino's architecture, so the same P4Runtime calls drive both. */
#include <core.p4>
#include <tna.p4>
#include "include/headers.p4"

#ifndef CPU_PORT
#define CPU_PORT 255
#endif
#ifndef TABLE_SIZE
#define TABLE_SIZE 16384
#endif

// What egress needs from ingress travels as a header (user metadata does not cross on TNA).
header bridge_t {
    port_t ingress_port;
    bit<7> _pad;
}

struct tna_headers_t {
    bridge_t bridge;
    packet_out_t packet_out;
    packet_in_t packet_in;
    ethernet_t ethernet;
    ipv4_t ipv4;
}

parser RtIngressParser(packet_in packet, out tna_headers_t hdr, out metadata_t meta,
                       out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        packet.extract(ig_intr_md);
        packet.advance(PORT_METADATA_SIZE);
        transition select(ig_intr_md.ingress_port) {
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

control RtIngress(inout tna_headers_t hdr, inout metadata_t meta,
                  in ingress_intrinsic_metadata_t ig_intr_md,
                  in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                  inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                  inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Counter<bit<64>, port_t>(64, CounterType_t.PACKETS_AND_BYTES) port_counter;
    DirectCounter<bit<64>>(CounterType_t.PACKETS_AND_BYTES) lpm_counter;
    Register<bit<32>, port_t>(16) last_ttl;
    Register<bit<128>, bit<1>>(2) wide;  // wider than Thrift's i64; the control plane's only
    RegisterAction<bit<32>, port_t, bit<32>>(last_ttl) store_ttl = {
        void apply(inout bit<32> value) { value = (bit<32>)hdr.ipv4.ttl; }
    };

    action drop() {
        ig_dprsr_md.drop_ctl = 1;
    }
    action forward(port_t port) {
        ig_tm_md.ucast_egress_port = port;
    }
    action ipv4_forward(mac_t dstAddr, port_t port) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        lpm_counter.count();  // TNA: a direct counter counts when the action says so
    }
    action set_mcast(bit<16> grp) {
        ig_tm_md.mcast_grp_a = grp;
    }
    action punt() {
        ig_tm_md.ucast_egress_port = CPU_PORT;
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
        key = { ig_intr_md.ingress_port: exact @name("in_port"); }
        actions = { forward; set_mcast; drop; NoAction; }
        default_action = NoAction();
    }

    apply {
        port_counter.count(ig_intr_md.ingress_port);
        hdr.bridge.setValid();
        hdr.bridge.ingress_port = ig_intr_md.ingress_port;
        if (hdr.packet_out.isValid()) {
            ig_tm_md.ucast_egress_port = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            l2.apply();
            if (hdr.ipv4.isValid()) {
                store_ttl.execute(ig_intr_md.ingress_port);
                ipv4_lpm.apply();
            }
            acl.apply();
        }
    }
}

control RtIngressDeparser(packet_out packet, inout tna_headers_t hdr, in metadata_t meta,
                          in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply {
        packet.emit(hdr.bridge);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

parser RtEgressParser(packet_in packet, out tna_headers_t hdr, out metadata_t meta,
                      out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        packet.extract(eg_intr_md);
        packet.extract(hdr.bridge);
        transition accept;
    }
}

control RtEgress(inout tna_headers_t hdr, inout metadata_t meta,
                 in egress_intrinsic_metadata_t eg_intr_md,
                 in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                 inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                 inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    apply {
        if (eg_intr_md.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = hdr.bridge.ingress_port;
        }
    }
}

control RtEgressDeparser(packet_out packet, inout tna_headers_t hdr, in metadata_t meta,
                         in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply {
        packet.emit(hdr.packet_in);
    }
}

Pipeline(RtIngressParser(), RtIngress(), RtIngressDeparser(), RtEgressParser(), RtEgress(),
         RtEgressDeparser()) pipe;
Switch(pipe) main;

// TNA parsers and deparsers. Both parsers take the headers with KvsL3Parser and KvsL4Parser
// (parser.p4) after the intrinsic metadata; the ingress parser verifies the IPv4 checksum between
// the two and takes the L4 residual after them (checksums_tna.p4). The egress parser sees what the
// ingress deparser emitted: the bridged header, then the packet.
#ifndef KVSWITCH_PARSER_TNA_P4
#define KVSWITCH_PARSER_TNA_P4

parser KvsIngressParser(packet_in pkt, out kvs_tna_headers_t hdr, out kvs_tna_meta_t meta,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    KvsL3Parser() l3;
    KvsIpv4Verify() ipv4_verify;
    KvsL4Parser() l4;
    KvsL4Residual() l4_residual;
    bit<8> l4_proto;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        l3.apply(pkt, hdr.h, meta.kvs, l4_proto);
        ipv4_verify.apply(pkt, hdr.h, meta.ipv4_csum_ok);
        transition select(hdr.h.ipv4.isValid()) {
            true: parse_l4;
            default: accept;
        }
    }

    state parse_l4 {
        l4.apply(pkt, l4_proto, hdr.h, meta.kvs);
        l4_residual.apply(pkt, hdr.h, meta.kvs, meta.residual);
        transition accept;
    }
}

control KvsIngressDeparser(packet_out pkt, inout kvs_tna_headers_t hdr, in kvs_tna_meta_t meta,
                           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    KvsDeparser() headers;

    apply {
        pkt.emit(hdr.bridge);
        headers.apply(pkt, hdr.h);
    }
}

parser KvsEgressParser(packet_in pkt, out kvs_tna_headers_t hdr, out kvs_tna_meta_t meta,
                       out egress_intrinsic_metadata_t eg_intr_md) {
    KvsL3Parser() l3;
    KvsL4Parser() l4;
    bit<8> l4_proto;

    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridge);
        l3.apply(pkt, hdr.h, meta.kvs, l4_proto);
        transition select(hdr.h.ipv4.isValid()) {
            true: parse_l4;
            default: accept;
        }
    }

    state parse_l4 {
        l4.apply(pkt, l4_proto, hdr.h, meta.kvs);
        transition accept;
    }
}

control KvsEgressDeparser(packet_out pkt, inout kvs_tna_headers_t hdr, in kvs_tna_meta_t meta,
                          in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    KvsChecksumUpdate() checksums;
    KvsDeparser() headers;

    apply {
        checksums.apply(hdr.h, meta.kvs, hdr.bridge.residual);
        headers.apply(pkt, hdr.h);
    }
}

#endif  // KVSWITCH_PARSER_TNA_P4

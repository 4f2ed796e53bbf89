// TNA parsers and deparsers. Both parsers take the headers with KvsHeaderParser (parser.p4) after
// the intrinsic metadata; in its states the ingress parser verifies the IPv4 checksum and takes the
// L4 residual (checksums_tna.p4; the egress parser computes them too and nothing reads them). The
// egress parser sees what the ingress deparser emitted: the bridged header, then the packet.
#ifndef KVSWITCH_PARSER_TNA_P4
#define KVSWITCH_PARSER_TNA_P4

parser KvsIngressParser(packet_in pkt, out kvs_tna_headers_t hdr, out kvs_tna_meta_t meta,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    KvsHeaderParser() headers;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        headers.apply(pkt, hdr.h, meta.kvs);
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
    KvsHeaderParser() headers;

    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridge);
        headers.apply(pkt, hdr.h, meta.kvs);
        transition accept;
    }
}

control KvsEgressDeparser(packet_out pkt, inout kvs_tna_headers_t hdr, in kvs_tna_meta_t meta,
                          in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    KvsChecksumUpdate() checksums;
    KvsDeparser() headers;

    apply {
        checksums.apply(hdr.h, meta.kvs, meta.kvs.residual);
        headers.apply(pkt, hdr.h);
    }
}

#endif  // KVSWITCH_PARSER_TNA_P4

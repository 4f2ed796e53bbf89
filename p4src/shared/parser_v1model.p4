// The v1model parser: the shared header parsers (parser.p4); v1model has no intrinsic metadata in
// front of the packet.
#ifndef KVSWITCH_PARSER_V1MODEL_P4
#define KVSWITCH_PARSER_V1MODEL_P4

parser KvsParser(packet_in pkt, out headers_t hdr, inout kvs_meta_t meta,
                 inout standard_metadata_t std) {
    KvsL3Parser() l3;
    KvsL4Parser() l4;
    bit<8> l4_proto;

    state start {
        l3.apply(pkt, hdr, meta, l4_proto);
        transition select(l4_proto) {
            0: accept;
            default: parse_l4;
        }
    }

    state parse_l4 {
        l4.apply(pkt, l4_proto, hdr, meta);
        transition accept;
    }
}

#endif  // KVSWITCH_PARSER_V1MODEL_P4

// The v1model parser: the shared header parser (parser.p4); v1model has no intrinsic metadata in
// front of the packet.
#ifndef KVSWITCH_PARSER_V1MODEL_P4
#define KVSWITCH_PARSER_V1MODEL_P4

parser KvsParser(packet_in pkt, out headers_t hdr, inout kvs_meta_t meta,
                 inout standard_metadata_t std) {
    KvsHeaderParser() headers;

    state start {
        headers.apply(pkt, hdr, meta);
        transition accept;
    }
}

#endif  // KVSWITCH_PARSER_V1MODEL_P4

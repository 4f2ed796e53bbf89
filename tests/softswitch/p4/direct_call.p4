/* Actions called directly from an apply block: p4c-bm2-ss wraps each call in a hidden keyless
 * table (tbl_refuse, tbl_refuse_0, tbl_mark) that its P4Info does not list, but its P4Info lists
 * the actions, and so must the switch's P4Info from p4c's JSON (tests/softswitch/test_bmv2_json.py).
 * `refuse` is called directly only (as trust.p4's refuse in kvswitch.p4). `mark` is a table's
 * action too; p4c writes `mark(0x88b5)` as a copy of `mark` with the argument in its body. With
 * -DMARK_DIRECT_ONLY, `mark` is called directly only, and p4c's P4Info lists it without parameters
 * although its two calls run two different copies (tests/p4c_bmv2/test_direct_calls.py). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type;
}

struct headers_t {
    ethernet_t eth;
}

struct meta_t {
    bit<8> refusals;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    bool refused = false;

    action refuse() {
        refused = true;
        meta.refusals = meta.refusals + 1;
    }

    action mark(bit<16> tag) {
        hdr.eth.type = tag;
    }

    action forward(bit<9> port) {
        sm.egress_spec = port;
    }

    table by_dst {
        key = { hdr.eth.dst: exact; }
#ifdef MARK_DIRECT_ONLY
        actions = { forward; NoAction; }
#else
        actions = { forward; mark; NoAction; }
#endif
        default_action = NoAction();
        size = 64;
    }

    apply {
        sm.egress_spec = 1;
        by_dst.apply();
        if (hdr.eth.src == 0) {
            refuse();
        }
        if (hdr.eth.type == 0x0800) {
            mark(0x88b5);
        } else if (hdr.eth.type == 0x0801) {
            mark(0x1111);
        } else if (hdr.eth.type == 0xffff) {
            refuse();
        }
        if (refused) {
            hdr.eth.src = (bit<48>)meta.refusals;
            sm.egress_spec = 2;
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.eth);
    }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;

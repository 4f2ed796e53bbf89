// KVSwitch data plane, v1model top level (BMv2 simple_switch_grpc and the project's software
// switch). Includes, instantiates and orders the feature controls; everything else lives in
// shared/ (protocol, sizes, headers, parser) and features/ (one feature per file).
// Build options: -DHOT_KEYS=.. -DMAX_SERVERS=.. -DHP_STAGES=.. (see shared/sizes.p4); test-only
// -DKVS_TEST_NO_TRUST_* (features/trust.p4). KVS_SPINE builds a fabric's spine instead of a
// rack's switch (kvswitch_spine.p4 defines it and includes this file); KVS_FABRIC_LEAF a rack's
// switch that steers the fabric-hot keys to their spines (kvswitch_leaf.p4, features/steering.p4).
#include <core.p4>
#include <v1model.p4>

#include "shared/v1model_compat.p4"
#include "shared/sizes.p4"
#include "shared/protocol.p4"
#include "shared/headers.p4"
#include "shared/parser.p4"
#include "shared/parser_v1model.p4"
#include "features/checksums.p4"
#include "features/forwarding.p4"
#include "features/trust.p4"
#include "features/liveness.p4"
#include "features/hot_keys.p4"
#include "features/key_index.p4"
#include "features/replicas.p4"
#ifndef KVS_SPINE  // a spine counts its hot keys only (docs/fabric.md)
#include "features/hashpipe.p4"
#endif
#include "features/multicast.p4"
#include "features/load_count.p4"
#ifdef KVS_FABRIC_LEAF
#include "features/steering.p4"
#endif
#ifdef KVS_SPINE
#include "features/spine_hold.p4"
#endif

control KvsIngress(inout headers_t hdr, inout kvs_meta_t meta, inout standard_metadata_t std) {
    Forwarding() forwarding;
    KvsLengths() kvs_lengths;
    KvsCheck() kvs_check;
    TrustFacts() trust_facts;
    TrustVersions() trust_versions;
    TrustRefusal() trust_refusal;
    Liveness() liveness;
    HotKeys() hot_keys;
    KeyIndex() key_index;
    Replicas() replicas;
    MulticastIngress() multicast;
#ifdef KVS_FABRIC_LEAF
    Steering() steering;
#endif
#ifdef KVS_SPINE
    SpineHold() spine_hold;
#endif

    mac_addr_t client_mac = 0;
    // UNAVAILABLE out of the port the request came in (liveness.p4): one action, as the TNA build
    action answer_unavailable() {
        unavailable_reply(hdr, meta.l4_dirty, client_mac);
        std.egress_spec = std.ingress_port;
    }

    apply {
        meta.l4_dirty = false;
        meta.mcast = false;
        meta.hot = false;
        meta.origin_down = false;
        meta.misaddressed = false;
        meta.hp_count = false;
        meta.kvs_ok = false;    // KvsCheck's verdict sets them; the TNA build gates its
        bool accepted = false;  // lookups on `accepted`, here meta.kvs_ok is tested
        if (meta.ipv4_refused || std.checksum_error == 1) {
            mark_to_drop(std);
        } else {
            client_mac = hdr.ethernet.src_addr;  // for a refusal (liveness.p4)
            forwarding.apply(hdr, std);
            kvs_lengths_t len;
            kvs_lengths.apply(hdr, meta, std.packet_length - 14, len);
            kvs_check.apply(hdr, meta, std.parser_error == error.NoError, len, accepted);
            bool uplink = false;   // from a spine (a fabric's leaf only)
            bool steered = false;  // a fabric-hot key's message: its spine's business
#ifdef KVS_FABRIC_LEAF
            bool up;
            bool held;
            PortId_t spine_port;
            mac_addr_t spine_mac;
            steering.apply(hdr, meta, std.ingress_port, uplink, steered, up, held, spine_port,
                           spine_mac);
#endif
            // Who may send what (docs/protocol.md "Trust"): may drop and clear meta.kvs_ok.
            bool refused = false;
            bool distrust = false;
            if (!uplink) {
                bool spoofed;
                bool from_server;
                bool to_kvs;
                trust_facts.apply(hdr, std.ingress_port, distrust, spoofed, from_server, to_kvs);
                trust_versions.apply(hdr, meta);
                trust_refusal.apply(hdr, meta, distrust, spoofed, from_server, to_kvs, refused);
            }
            if (refused) {
                mark_to_drop(std);
            }
#ifdef KVS_FABRIC_LEAF
            if (meta.kvs_ok && held) {
                mark_to_drop(std);  // restarted, steering table not installed yet (steering.p4)
                meta.kvs_ok = false;
            }
#endif
#ifdef KVS_SPINE
            bool spine_held;
            spine_hold.apply(meta, spine_held);
            if (spine_held) {
                mark_to_drop(std);  // restarted, not reinstalled yet (spine_hold.p4)
                meta.kvs_ok = false;
            }
#endif
            if (meta.kvs_ok) {
                KvsOp op = hdr.kvs.op;
                // A steered message (a fabric's leaf) is counted by liveness and forwarded: none of
                // the rules below are the leaf's to apply to it.
                bool own = !steered;
                bool request = own && (op == KvsOp.GET || op == KvsOp.SET || op == KvsOp.DEL);
                bool consumed = own && (op == KvsOp.CONFIRM || op == KvsOp.SYNC
                                        || op == KvsOp.SYNC_DONE);
                bool maintenance = consumed || (own && (op == KvsOp.SET_REPLY
                                                        || op == KvsOp.DEL_REPLY
                                                        || op == KvsOp.GET_REPLY));
                // Every control is applied at one call site (BMv2 applies a table once per packet).
                // Replies counted per server; requests for a dead origin flagged (liveness.p4).
                liveness.apply(hdr, meta);
                // A write for a dead origin takes no version and makes no copy: answered below.
                bool down_write = meta.origin_down && op != KvsOp.GET;
                ipv4_addr_t requested = hdr.ipv4.dst_addr;
                if (request) {
                    hot_keys.apply(hdr, meta);
                } else if (maintenance) {
                    key_index.apply(hdr, meta);
                }
                // (two exclusive branches: Tofino runs them side by side, docs/tofino.md)
                if (meta.hot) {
                    if (!down_write) {
                        // Rules 1-6: versions, round-robin redirect, confirms, syncs, read replies.
                        replicas.apply(hdr, meta, std);
                    }
                }
#ifndef KVS_SPINE
                else if (request && !meta.origin_down) {
                    meta.hp_count = true;  // HashPipe counts it in the egress (hashpipe.p4)
                }
#endif
                if (request && meta.hot && op != KvsOp.GET && !down_write && !meta.misaddressed) {
                    multicast.apply(hdr, meta, std);
                }
                if (request && meta.origin_down && hdr.ipv4.dst_addr == requested) {
                    // Still addressed to the dead origin (not redirected to a replica by rule 4).
                    answer_unavailable();
                }
                if (consumed && !meta.hot) {
                    // Not a hot key (any more): nothing to confirm or stamp; consumed all the same.
                    mark_to_drop(std);
                }
                if (own && (op == KvsOp.UPDATE || op == KvsOp.UPDATE_DEL)) {
                    // Only this switch's egress makes these: one arriving from a host is forged
                    // (a fabric's leaf: or its spine's copy, steered down).
                    mark_to_drop(std);
                }
#ifdef KVS_FABRIC_LEAF
                if (up) {
                    std.egress_spec = spine_port;
                    hdr.ethernet.dst_addr = spine_mac;
                    meta.kvs_ok = false;  // counted where it comes down, not on its way up
                }
#endif
                // GET_REPLY (unless rule 6 dropped it), PUSH, REMOVE, REMOVE_REPLY and unknown
                // ops: plain IP forwarding.
            }
        }
    }
}

control KvsEgress(inout headers_t hdr, inout kvs_meta_t meta, inout standard_metadata_t std) {
    MulticastEgress() multicast_egress;
    LoadCount() load_count;
#ifndef KVS_SPINE
    HashPipe() hashpipe;
#endif

    apply {
#ifndef KVS_SPINE
        // HashPipe in the egress, as in the TNA build (where the ingress has no stages to spare):
        // a packet the ingress dropped is not counted (hashpipe.p4)
        hashpipe.apply(hdr.kvs.key, meta.hp_count);
#endif
        if (meta.kvs_ok) {
            if (meta.mcast && std.egress_rid != 0) {
                multicast_egress.apply(hdr, meta, std);
            }
            load_count.apply(hdr);
        }
    }
}

V1Switch(KvsParser(), KvsVerifyChecksum(), KvsIngress(), KvsEgress(), KvsComputeChecksum(),
         KvsDeparser()) main;

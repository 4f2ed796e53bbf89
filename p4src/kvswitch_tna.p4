// KVSwitch data plane, TNA top level (Tofino; the project's software switch runs it too). The
// v1model top level is kvswitch.p4: both include shared/ and the features; where a feature's
// shape differs on Tofino (externs, intrinsic metadata, one RegisterAction per register) its TNA
// twin sits beside it as <feature>_tna.p4. Same tables, actions, match fields, registers and
// counters as the v1model build. Build options: as kvswitch.p4 (shared/sizes.p4; KVS_SPINE:
// kvswitch_spine_tna.p4; KVS_FABRIC_LEAF: kvswitch_leaf_tna.p4).
// Where each Tofino rule is followed: docs/tofino.md.
#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>  // Tofino 2 (--target tofino2 --arch t2na): the same externs and metadata
#else
#include <tna.p4>
#endif

// Feature files that differ only in an extern or two say so under this name (liveness.p4).
#define KVSWITCH_TNA

// d on Tofino: HashPipe runs in the egress, four or five MAU stages per HashPipe stage: d = 2 is
// the largest that fits Tofino 1's 12 egress stages (p4c-barefoot: 11 in all; d = 3 takes 15,
// docs/tofino.md "The egress in 11 stages"); v1model's default is 4 (sizes.p4). The controller
// reads d from the P4Info. Tofino 2 (20 stages) takes -DHP_STAGES=4.
#ifndef HP_STAGES
#define HP_STAGES 2
#endif

#include "shared/sizes.p4"
#include "shared/protocol.p4"
#include "shared/headers.p4"
#include "shared/headers_tna.p4"
#include "features/checksums_tna.p4"
#include "shared/parser.p4"
#include "shared/parser_tna.p4"
#include "features/forwarding_tna.p4"
#include "features/trust.p4"
#include "features/liveness.p4"
#include "features/hot_keys_tna.p4"
#include "features/key_index.p4"
#include "features/replicas_tna.p4"
#ifndef KVS_SPINE  // a spine counts its hot keys only (docs/fabric.md)
#include "features/hashpipe_tna.p4"
#endif
#include "features/multicast_tna.p4"
#include "features/load_count_tna.p4"
#ifdef KVS_FABRIC_LEAF
#include "features/steering.p4"
#endif
#ifdef KVS_SPINE
#include "features/spine_hold.p4"
#endif

#if __TARGET_TOFINO__ == 2
// Tofino 2's PHV allocation (p4c-barefoot --target tofino2, docs/tofino.md message 23): without
// these, it overlays three fields of exclusive branches in one container ("contains fields which
// overlap"), then splits HashPipe's stateful-ALU outputs across containers the ALU cannot write
// ("invalid container action"). Tofino 1 needs none of them. HashPipe's were measured with
// HashPipe in the ingress; it runs in the egress now (not compiled for Tofino 2 since).
@pa_no_overlay("ingress", "replicas_sm_ip")
#ifndef KVS_SPINE
@pa_no_overlay("egress", "hashpipe_hp_stage0_same")
@pa_container_size("egress", "hashpipe_hp_stage0_w0", 32)
@pa_container_size("egress", "hashpipe_carry.key", 32, 32, 32, 32)
@pa_container_size("egress", "hashpipe_hp_stage1_decision", 32)
#endif
#endif
#ifdef KVS_SPINE
// The spine (p4c-barefoot, Tofino 1): without these the back end stops, "Compiler Bug: Metadata
// initialization analysis incorrect. Live ranges between cond-N and replicas_ServermapTable
// overlap", N each of the refusal's facts in turn (they share containers with what
// ServermapTable writes on the gate's other branch). With them: 0 errors (docs/tofino.md).
@pa_no_overlay("ingress", "distrust_0")
@pa_no_overlay("ingress", "spoofed_0")
@pa_no_overlay("ingress", "from_server_0")
@pa_no_overlay("ingress", "to_kvs_0")
@pa_no_overlay("ingress", "refused_0")
@pa_no_overlay("ingress", "held_0")
#endif
control KvsIngress(inout kvs_tna_headers_t hdr, inout kvs_tna_meta_t meta,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
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
    // UNAVAILABLE out of the port the request came in (liveness.p4): one action, so one step (the
    // reply's op chain and the port's three writes were two stages in a row on p4c-barefoot)
    action answer_unavailable() {
        unavailable_reply(hdr.h, meta.kvs.l4_dirty, client_mac);
        meta.fwd.port = ig_intr_md.ingress_port;
        meta.fwd.drop = false;
        meta.fwd.grp = 0;
    }

    apply {
        meta.kvs.l4_dirty = false;
        meta.kvs.mcast = false;
        meta.kvs.hot = false;
        meta.kvs.origin_down = false;
        meta.kvs.misaddressed = false;
        meta.kvs.hp_count = false;
        meta.kvs.kvs_ok = false;  // KvsCheck's verdict sets them (one action with these: a stage
        bool accepted = false;    // for the defaults of bools that share their containers)
        // The operation's class, from the header alone, before the checks (it does not depend
        // on them): the lookups below then wait only for the checks' verdict and trust's facts,
        // not for bools computed after them (docs/tofino.md, "Down to 26 stages"). Read only
        // where kvs_ok holds (a valid header).
        bool request_op = false;      // GET, SET, DEL
        bool consumed_op = false;     // CONFIRM, SYNC, SYNC_DONE: the switch's, never forwarded
        bool maintenance_op = false;  // the consumed ones and the replies (KeyindexTable)
        if (hdr.h.kvs.op == KvsOp.GET || hdr.h.kvs.op == KvsOp.SET || hdr.h.kvs.op == KvsOp.DEL) {
            request_op = true;
        } else if (hdr.h.kvs.op == KvsOp.CONFIRM || hdr.h.kvs.op == KvsOp.SYNC
                   || hdr.h.kvs.op == KvsOp.SYNC_DONE) {
            consumed_op = true;
            maintenance_op = true;
        } else if (hdr.h.kvs.op == KvsOp.SET_REPLY || hdr.h.kvs.op == KvsOp.DEL_REPLY
                   || hdr.h.kvs.op == KvsOp.GET_REPLY) {
            maintenance_op = true;
        }
        if (meta.kvs.ipv4_refused || (hdr.h.ipv4.isValid() && !meta.kvs.ipv4_csum_ok)) {
            fwd_drop(meta.fwd);
        } else {
            client_mac = hdr.h.ethernet.src_addr;  // for a refusal (liveness.p4)
            forwarding.apply(hdr.h, meta.fwd);
            // KvsCheck's differences, then Trust's facts (the headers and HostportTable), then
            // KvsCheck's verdict: Tofino 1 places no table of a statement before an earlier one's
            // (Tofino's ingress does not know the frame length: the IPv4 length, docs/tofino.md)
            kvs_lengths_t len;
            kvs_lengths.apply(hdr.h, meta.kvs, (bit<32>)hdr.h.ipv4.total_len, len);
            bool distrust = false;  // of a message KvsCheck accepted: refused (trust.p4)
            bool spoofed;
            bool from_server;
            bool to_kvs;
            trust_facts.apply(hdr.h, ig_intr_md.ingress_port, distrust, spoofed, from_server,
                              to_kvs);
            kvs_check.apply(hdr.h, meta.kvs, ig_prsr_md.parser_err == PARSER_ERROR_OK, len,
                            accepted);
            bool uplink = false;   // as in kvswitch.p4
            bool steered = false;
            bool held = false;     // a fabric's leaf or spine, restarted: not reinstalled yet
#ifdef KVS_FABRIC_LEAF
            bool up;
            PortId_t spine_port;
            mac_addr_t spine_mac;
            steering.apply(hdr.h, meta.kvs, ig_intr_md.ingress_port, uplink, steered, up, held,
                           spine_port, spine_mac);
#endif
            bool refused = false;  // Trust's refusal (in the gate's else, below)
#ifdef KVS_SPINE
            spine_hold.apply(meta.kvs, held);  // restarted, not reinstalled yet (spine_hold.p4)
#endif
            // meta.kvs.kvs_ok as it stands now (KvsCheck's verdict, cleared by a refusal or a
            // hold), tested as the facts it is made of: Trust's refusal writes kvs_ok a step
            // after KvsCheck's verdict and distrust are known, and this gate (the lookups' below)
            // would wait for it (docs/tofino.md, "Down to 26 stages"). kvswitch.p4 tests
            // meta.kvs_ok itself; tests/dataplane/test_builds_agree.py compares the two.
            if (accepted && (uplink || !distrust) && !held) {
                KvsOp op = hdr.h.kvs.op;
                // A steered message (a fabric's leaf) is counted by liveness and forwarded: none of
                // the rules below are the leaf's to apply to it.
                // (bools set in ifs or from the op's class above: on Tofino a bool computed from
                // comparisons is folded into every test that reads it, and the gateways'
                // conditions grow past what the compiler handles)
                bool own = !steered;
                bool request = own && request_op;
                bool consumed = own && consumed_op;
                // The lookups, side by side in the stage after the verdict and trust's facts:
                // liveness's tables (replies counted per server; a request's dead origin flagged,
                // liveness.p4) and the hot-key tables. Each reads the headers and the gate only.
                liveness.apply(hdr.h, meta.kvs);
                if (own) {
                    if (request_op) {
                        hot_keys.apply(hdr.h, meta.kvs);
                    } else if (maintenance_op) {
                        key_index.apply(hdr.h, meta.kvs);
                    }
                }
                // Rule V (trust.p4) on what passed the gate: beside or after the lookups, before
                // Replicas stamps (its gateways would take the lookups' search buses in their
                // stage); a refused message, which kvswitch.p4 rewrites before dropping, is
                // dropped here unrewritten
                if (!uplink) {
                    trust_versions.apply(hdr.h, meta.kvs);
                }
                // A write for a dead origin takes no version and makes no copy: answered below.
                bool down_write = false;
                if (meta.kvs.origin_down) {
                    if (op != KvsOp.GET) {
                        down_write = true;
                    }
                }
                ipv4_addr_t requested = hdr.h.ipv4.dst_addr;
                // (two exclusive branches: Tofino runs them side by side, docs/tofino.md)
                // (Replicas' gate tests origin_down itself, not down_write: that bool is set a
                // stage after the lookups, and Replicas would wait for it)
                if (meta.kvs.hot) {
                    if (!meta.kvs.origin_down || op == KvsOp.GET) {
                        replicas.apply(hdr.h, meta.kvs, meta.fwd, ig_intr_md.ingress_port);
                    }
                }
#ifndef KVS_SPINE
                else if (request && !meta.kvs.origin_down) {
                    meta.kvs.hp_count = true;  // HashPipe counts it in the egress (bridged)
                }
#endif
                // The verdict's last words, as kvswitch.p4's four ifs: at most one holds (a
                // multicast write has a live origin, a refused one a dead origin; CONFIRM, SYNC,
                // SYNC_DONE and UPDATE are not requests), so one else-if chain: Tofino places its
                // branches in one stage, where separate ifs writing meta.fwd take a stage each.
                if (request && meta.kvs.hot && op != KvsOp.GET && !down_write
                    && !meta.kvs.misaddressed) {
                    multicast.apply(hdr.h, meta.kvs, meta.fwd);
                } else if (request && meta.kvs.origin_down && hdr.h.ipv4.dst_addr == requested) {
                    // Still addressed to the dead origin (not redirected to a replica by rule 4):
                    // the switch answers, out of the port the request came in.
                    answer_unavailable();
                } else if (consumed && !meta.kvs.hot) {
                    fwd_drop(meta.fwd);
                } else if (own && (op == KvsOp.UPDATE || op == KvsOp.UPDATE_DEL)) {
                    fwd_drop(meta.fwd);
                }
#ifdef KVS_FABRIC_LEAF
                if (up) {
                    meta.fwd.port = spine_port;
                    meta.fwd.drop = false;
                    meta.fwd.grp = 0;
                    hdr.h.ethernet.dst_addr = spine_mac;
                    meta.kvs.kvs_ok = false;
                }
#endif
            } else {
                // The drops that clear kvs_ok (as kvswitch.p4 orders them, before its test of
                // kvs_ok): here in the gate's else, where they hold whenever they apply (a
                // refused or held message fails the gate), so the lookups above do not follow
                // them in the control flow (a stage later on Tofino 1).
                if (!uplink) {
                    trust_refusal.apply(hdr.h, meta.kvs, distrust, spoofed, from_server, to_kvs,
                                        refused);
                }
                if (refused) {
                    fwd_drop(meta.fwd);
                }
#ifdef KVS_FABRIC_LEAF
                if (meta.kvs.kvs_ok && held) {
                    fwd_drop(meta.fwd);
                    meta.kvs.kvs_ok = false;
                }
#endif
#ifdef KVS_SPINE
                if (held) {
                    fwd_drop(meta.fwd);
                    meta.kvs.kvs_ok = false;
                }
#endif
            }
        }
        // The decision to the traffic manager: a group (the PRE gives each copy its rid), a drop,
        // or one port.
        if (meta.fwd.grp != 0) {
            ig_tm_md.mcast_grp_a = meta.fwd.grp;
        } else if (meta.fwd.drop) {
            ig_dprsr_md.drop_ctl = 1;
        } else {
            ig_tm_md.ucast_egress_port = meta.fwd.port;
        }
        hdr.bridge.setValid();
        hdr.bridge.residual = meta.kvs.residual;
        hdr.bridge.kvs_ok = (bit<1>)meta.kvs.kvs_ok;
        hdr.bridge.mcast = (bit<1>)meta.kvs.mcast;
        hdr.bridge.l4_dirty = (bit<1>)meta.kvs.l4_dirty;
        hdr.bridge.hp_count = (bit<1>)meta.kvs.hp_count;
    }
}

control KvsEgress(inout kvs_tna_headers_t hdr, inout kvs_tna_meta_t meta,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    KvsResidual() kvs_residual;
    MulticastEgress() multicast_egress;
    LoadCount() load_count;
#ifndef KVS_SPINE
    HashPipe() hashpipe;
#endif

    apply {
        meta.kvs.l4_dirty = false;  // (set in an if: a stage writes no comparison into a field)
        if (hdr.bridge.l4_dirty == 1) {
            meta.kvs.l4_dirty = true;
        }
        meta.kvs.l4_len = hdr.h.ipv4.total_len - 20;  // as KvsCheck
        // the ingress parser's residual less the pseudo-header length, from the lengths as they
        // arrived (the ingress changes none; the copy's rewrite below does, after this)
        meta.kvs.residual = hdr.bridge.residual;
        kvs_residual.apply(hdr.h, meta.kvs);
        // A packet the ingress forwarded as plain IP may stop the egress parser too (a truncated
        // message): it leaves as it came, as on v1model.
        bool parsed = eg_prsr_md.parser_err == PARSER_ERROR_OK;
        if (hdr.bridge.kvs_ok == 1 && parsed) {
            if (hdr.bridge.mcast == 1 && eg_intr_md.egress_rid != 0) {
                multicast_egress.apply(hdr.h, meta.kvs, eg_intr_md.egress_port,
                                       eg_intr_md.egress_rid, eg_dprsr_md.drop_ctl);
            }
            load_count.apply(hdr.h);
        }
        // the deparser's checksum update takes one bit (bf-p4c: a 1-bit condition only)
        if (!hdr.h.kvs.isValid()) {
            meta.kvs.l4_dirty = false;
        }
#ifndef KVS_SPINE
        // HashPipe, whose stages the egress has room for (the ingress has none to spare:
        // docs/tofino.md "HashPipe in the egress"). Its mark starts the carry (no if around it):
        // p4c-barefoot then places the tables above beside its first stages, not after its last.
        bool count = false;
        if (hdr.bridge.hp_count == 1) {
            count = true;
        }
        hashpipe.apply(hdr.h.kvs.key, count);
#endif
    }
}

Pipeline(KvsIngressParser(), KvsIngress(), KvsIngressDeparser(), KvsEgressParser(), KvsEgress(),
         KvsEgressDeparser()) pipe;
Switch(pipe) main;

// Replica selection and the version registers: docs/protocol.md "Consistency", rules 1-6.
//
// Registers (the controller writes `epoch` at start-up, larger after every switch restart, and
// resets rr/slot_ver/origin_ver/valid_ver of a slot before reusing it for another key):
//   global_ver[1]   newest version handed out (32 bits)
//   epoch[1]        switch incarnation (16 bits), stamped next to every version
//   slot_ver[K]     version of the newest write (or SYNC) of the slot's key that crossed the switch
//   origin_ver[K]   newest version the key's origin reported holding (its write replies, SYNC_DONE
//                   and read replies): the latest *completed* version
//   valid_ver[M*K]  valid_ver[base + offset(s)]: the newest version holder s confirmed
//   rr[K]           the slot's next round-robin turn, 0 .. n'-1 (below)
//
// The read set of a key is {origin} + {replica s : valid_ver[s] >= origin_ver}: every holder known
// to hold the latest completed version or a newer one. A write in flight changes neither register,
// so reads keep spreading over the read set until the origin reports the new version; a replica
// reply carrying any other version than the one the origin last reported is dropped (rule 6), so
// no client sees a value before the origin holds it, nor one at a version the origin never held.
//
// Tofino shape: each register is accessed at one place per packet, in the order rr, global_ver and
// origin_ver, slot_ver, valid_ver, and every access is one read-modify-write a stateful ALU can do
// (increment; max; compare-and-set against a value computed earlier); replicas_tna.p4 says which
// step waits for what.
//
// Tables (controller contract):
//   ServermapTable    (slot, ordinal) -> set_server(vidx, ip, mac, port): for ordinal 0 the key's
//                     origin, for 1 .. n-1 its replicas; vidx = base + offset of that server.
//   ServeroffsetTable server IPv4 -> set_server_offset(offset, port): every server of the rack, with
//                     the switch port it hangs off. A CONFIRM/SYNC/SYNC_DONE/reply changes a
//                     register only if its source address hits here and it arrived on that port.
// A spine (KVS_SPINE, docs/fabric.md "Spine program") has the same rules, registers and tables over
// holders anywhere in the fabric: `port` is the port of the holder's leaf and `mac` that leaf's,
// ServeroffsetTable is keyed (slot, server IPv4) -> (ordinal, leaf port) for each holder of each
// key, and valid_ver has MAX_HOLDERS cells per slot (vidx = base + ordinal), not one per server.
#ifndef KVSWITCH_REPLICAS_P4
#define KVSWITCH_REPLICAS_P4

#include "valid_ver_parts.p4"

#define VALID_VER_DECLARE(name, size) @name(#name) register<bit<32>>(size) name;
#define VALID_VER_READ(reg, cell) reg.read(vv, (bit<32>)cell);
#define VALID_VER_MAX(reg, cell)                                                                \
    reg.read(cur, (bit<32>)cell);                                                               \
    if (hdr.kvs.ver > cur) {                                                                    \
        reg.write((bit<32>)cell, hdr.kvs.ver);                                                  \
    }

control Replicas(inout headers_t hdr, inout kvs_meta_t meta, inout standard_metadata_t std) {
    @name("global_ver") register<bit<32>>(1) global_ver;
    @name("epoch") register<bit<16>>(1) epoch;
    @name("slot_ver") register<bit<32>>(HOT_KEYS) slot_ver;
    @name("origin_ver") register<bit<32>>(HOT_KEYS) origin_ver;
    VALID_VER_REGISTERS(VALID_VER_DECLARE)
    @name("rr") register<bit<ORDINAL_W>>(HOT_KEYS) rr;
#ifdef KVS_SPINE
    @name("done_by") register<bit<ORDINAL_W>>(HOT_KEYS) done_by;
    @name("rotated") register<bit<8>>(HOT_KEYS) rotated;
    ipv4_addr_t so_ip = 0;  // ServeroffsetTable's address: a write's destination, else its source
#endif

    bool sm_hit = false;
    bit<32> sm_vidx = 0;
    ipv4_addr_t sm_ip = 0;
    mac_addr_t sm_mac = 0;
    PortId_t sm_port = 0;
    bool so_hit = false;
    bit<32> so_offset = 0;
    PortId_t so_port = 0;
    ordinal_t ordinal = 0;

    // Versions are compared as serial numbers through a difference's sign. The TNA build
    // (replicas_tna.p4) takes the differences with a register's value (ov_sv, vv_ov, sv_ver) from
    // the stateful ALU and floor_ver from confirm_diffs, the action both builds have.
    bit<32> ov = 0;
    bit<32> sv = 0;
    bit<32> vv = 0;
    bit<32> ov_sv = 0;
    bit<32> vv_ov = 0;
    bit<32> floor_ver = 0;
    bit<32> sv_ver = 0;
    action confirm_diffs() {
        floor_ver = meta.floor - hdr.kvs.ver;
        sv_ver = sv - hdr.kvs.ver;
    }

    @name("set_server")
    action set_server(bit<32> vidx, ipv4_addr_t ip, mac_addr_t mac, PortId_t port) {
        sm_hit = true;
        sm_vidx = vidx;
        sm_ip = ip;
        sm_mac = mac;
        sm_port = port;
    }

    @name("ServermapTable")
    table servermap_table {
        key = {
            meta.slot: exact @name("slot");
            ordinal: exact @name("ordinal");
        }
        actions = {
            set_server;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = VALID_VER_ENTRIES;
    }

    @name("set_server_offset")
    action set_server_offset(bit<32> offset, PortId_t port) {
        so_hit = true;
        so_offset = offset;
        so_port = port;
    }

    @name("ServeroffsetTable")
    table serveroffset_table {
        key = {
#ifdef KVS_SPINE
            meta.slot: exact @name("slot");  // a spine names the holders of each key
#endif
#ifdef KVS_SPINE
            so_ip: exact @name("server_ip");
#else
            hdr.ipv4.src_addr: exact @name("server_ip");
#endif
        }
        actions = {
            set_server_offset;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = SERVEROFFSET_ENTRIES;
    }

    // the origin's SYNC answered out of the port it came in (one action: replicas_tna.p4)
    action sync_reflect() {
        hdr.kvs.status = KvsStatus.OK;
        std.egress_spec = std.ingress_port;
        reflect(hdr);
    }

    apply {
        KvsOp op = hdr.kvs.op;
        bit<32> slot = (bit<32>)meta.slot;
        // Rule 4 input: the next round-robin ordinal (Gets only). The turn t = rr[slot] rotates
        // over n' = n ordinals 0 .. n-1, or n' = n-1 ordinals 1 .. n-1 when the origin is down
        // (liveness.p4: its turns go to the replicas) and n > 1; ordinal = t + that first ordinal.
        // Everything but the two comparisons of t with n'-1 is computed before the access (the
        // TNA build's stateful ALU has two comparison units). A t beyond n'-1 (n, or the origin's
        // liveness, changed) counts as turn 0 and restarts the rotation: one extra turn for the
        // first ordinal, then exact again.
#ifdef KVS_SPINE
        // F7: whether the key's writes rotate. A request carries HotkeyTable's flag and records it
        // in `rotated`; a reply, CONFIRM or SYNC (KeyindexTable: no flag) reads the record.
        bit<8> rot = (bit<8>)meta.rotate;
        if (op == KvsOp.GET || op == KvsOp.SET || op == KvsOp.DEL) {
            rotated.write(slot, rot);
        } else {
            rotated.read(rot, slot);
        }
        bool rotated_key = rot == 1;
        if (rotated_key && op == KvsOp.GET) {
            // R4: the holder whose report last raised origin_ver (no round robin)
            done_by.read(ordinal, slot);
        } else if (rotated_key && (op == KvsOp.SET || op == KvsOp.DEL)) {
            // R1: the writer, ordinal (crc32(cid, seq) mod 256) mod n (rules.rotated_write), a
            // function of the request id; a TCP write stays with the origin (ordinal 0)
            if (hdr.udp.isValid() && meta.n != 0) {
                bit<8> h8;
                hash(h8, HashAlgorithm.crc32, 8w0, {hdr.kvs.cid, hdr.kvs.seq}, 16w256);
                hash(ordinal, HashAlgorithm.identity, (ordinal_t)0, {h8}, meta.n);
            }
        } else
#endif
        if (op == KvsOp.GET) {
            bool skip = meta.origin_down && meta.n > 1;
            ordinal_t first = skip ? (ordinal_t)1 : 0;
            ordinal_t turns = meta.n - first;
            ordinal_t last = turns == 0 ? (ordinal_t)0 : turns - 1;
            ordinal_t t;
            rr.read(t, slot);
            rr.write(slot, t < last ? t + 1 : 0);
            ordinal = (t > last ? (ordinal_t)0 : t) + first;
        }
        servermap_table.apply();
#ifdef KVS_SPINE
        // A spine names the holders of each key with their ordinals: the reports' sender by its
        // source address, and the origin a write is addressed to (ordinal 0) by its destination.
        so_ip = hdr.ipv4.src_addr;
        if (op == KvsOp.SET || op == KvsOp.DEL) {
            so_ip = hdr.ipv4.dst_addr;
        }
        if (op != KvsOp.GET) {
            serveroffset_table.apply();
        }
#else
        if (op != KvsOp.GET && op != KvsOp.SET && op != KvsOp.DEL) {
            serveroffset_table.apply();
        }
#endif

        bit<16> cur_epoch;
        epoch.read(cur_epoch, 0);
        bool current = hdr.kvs.epoch == cur_epoch;
        // The sender is a server of the rack, on its own port; `from_origin`: and the key's origin.
        bool sender_ok = so_hit && so_port == std.ingress_port;
#ifdef KVS_SPINE
        bool from_origin = sender_ok && so_offset == 0;  // ordinal 0
#else
        bool from_origin = sender_ok && sm_hit && sm_ip == hdr.ipv4.src_addr;
#endif
        // Rule 6 judges a read reply from a server the table names. A leaf's names every server of
        // its rack; a spine's only each key's holders, and a replica that left the key may still
        // answer a Get redirected to it before: a spine judges every read reply but the origin's.
#ifdef KVS_SPINE
        bool replier = true;
#else
        bool replier = sender_ok;
#endif
        // Rule 1 applies to a write addressed to the key's origin (ServermapTable's ordinal 0 for
        // a write); one addressed elsewhere goes there as it is, and that server answers MOVED.
        bool any_write = op == KvsOp.SET || op == KvsOp.DEL;
#ifdef KVS_SPINE
        bool write = any_write && so_hit && so_offset == 0;  // addressed to the origin
#else
        bool write = any_write && sm_hit && sm_ip == hdr.ipv4.dst_addr;
#endif
        meta.misaddressed = any_write && !write;
        // Rule 2 input: the origin says it holds the key at (epoch, ver): a write's OK reply (a
        // repeated request id's too: it carries the version the origin holds, flag F_DUP) or
        // STALE reply (a newer write got there first; it carries the version the origin holds),
        // its SYNC_DONE, or any read reply (found or not: both carry the stored version).
        bool write_reply = op == KvsOp.SET_REPLY || op == KvsOp.DEL_REPLY;
        bool acked = (write_reply && (hdr.kvs.status == KvsStatus.OK
                                      || hdr.kvs.status == KvsStatus.STALE))
                     || (op == KvsOp.SYNC_DONE && hdr.kvs.status == KvsStatus.OK);
        bool origin_report = from_origin && current && (acked || op == KvsOp.GET_REPLY);
#ifdef KVS_SPINE
        // R2: a rotated key's write replies and SYNC_DONE from ANY holder of it (its address and
        // leaf port as ServeroffsetTable names them) report; no read reply does.
        if (rotated_key) {
            origin_report = sender_ok && current && acked;
        }
#endif

        // origin_ver, rule 2: max(origin_ver, ver) on an origin report; read otherwise.
        ov = 0;
        origin_ver.read(ov, slot);
        bool raised = false;
        if (origin_report && hdr.kvs.ver > ov) {
            ov = hdr.kvs.ver;
            origin_ver.write(slot, ov);
            raised = true;
        }

#ifdef KVS_SPINE
        // done_by: the ordinal of the holder whose report last raised origin_ver (it holds that
        // version; rules.holder_report), read by a rotated key's Gets (above) and SYNCs (R5).
        // R5: a rotated key's SYNC is stamped only from that holder, or from the origin while
        // origin_ver is 0 (the key's make); anyone else's is dropped. Else rule 5's origin.
        bool sync = false;
        if (raised) {
            done_by.write(slot, (ordinal_t)so_offset);
        } else if (rotated_key && op == KvsOp.SYNC && sender_ok && hdr.udp.isValid()) {
            ordinal_t db;
            done_by.read(db, slot);
            if (ov == 0) {
                sync = so_offset == 0;
            } else {
                sync = (ordinal_t)so_offset == db;
            }
        } else {
            sync = !rotated_key && op == KvsOp.SYNC && from_origin && hdr.udp.isValid();
        }
#else
        bool sync = op == KvsOp.SYNC && from_origin && hdr.udp.isValid();
#endif

        // global_ver: a fresh version for a write (rule 1) or the origin's SYNC (rule 5).
        bit<32> gv = 0;
        if (write || sync) {
            global_ver.read(gv, 0);
            gv = gv + 1;
            global_ver.write(0, gv);
        }

        // slot_ver, rules 1 and 5: a write always takes the fresh version; a SYNC only when no
        // write is on its way to the origin (slot_ver <= origin_ver). Stamped after such a write,
        // it could reach the origin first and give the old value the newer version; instead it is
        // reflected unstamped (ver 0) and the origin asks again later. A write stamped while no
        // write is on its way is flagged F_SETTLED: no other write's version lies between the
        // origin's last report and this one, so a repeat of a request id may adopt it (the agent
        // rules; the explorer's resend-overtaken).
        slot_ver.read(sv, slot);
        // Versions are compared as serial numbers (RFC 1982): a <= b when b - a < 2^31, as
        // Tofino's gateways can (they compare a field with a constant: a difference's sign);
        // the same as <= while the versions compared are below 2^31, and across the wrap.
        ov_sv = ov - sv;
        bool settled = ov_sv[31:31] == 0;
        bool stamp = write || (sync && settled);
        if (stamp) {
            slot_ver.write(slot, gv);
        }

        if (op == KvsOp.GET) {
            // Rule 4: redirect to the chosen replica only if it is in the read set (it confirmed
            // the latest completed version or newer). Only UDP Gets: a TCP segment sent elsewhere
            // would land outside its connection.
            vv = 0;
            if (sm_hit) {
                VALID_VER_AT(sm_vidx, VALID_VER_READ)
            }
            vv_ov = vv - ov;  // vv >= ov (serial)
            if (ordinal != 0 && sm_hit && ov != 0 && vv_ov[31:31] == 0 && hdr.udp.isValid()) {
                std.egress_spec = sm_port;
                hdr.ethernet.dst_addr = sm_mac;
                hdr.ipv4.dst_addr = sm_ip;
                hdr.kvs.flags = hdr.kvs.flags | KVS_F_REDIRECT;  // the agent serves it as a replica
                meta.l4_dirty = true;
            }
        } else if (op == KvsOp.CONFIRM) {
            // Rule 3: max(valid_ver, ver) for a version this switch handed out (<= slot_ver)
            // after the key's holders last changed (> floor, from KeyindexTable: a confirm from a
            // replica's earlier membership cannot validate its new one). Then consumed.
            confirm_diffs();  // ver > floor, ver <= sv (serial)
            if (sender_ok && current && floor_ver[31:31] == 1 && sv_ver[31:31] == 0) {
                bit<32> idx = meta.base + so_offset;
                bit<32> cur;
                VALID_VER_AT(idx, VALID_VER_MAX)
            }
            mark_to_drop(std);
#ifdef KVS_SPINE
        } else if (rotated_key && origin_report) {
            // R2: the reporting holder's own cell, as its CONFIRM would (rule 3's test)
            confirm_diffs();
            if (floor_ver[31:31] == 1 && sv_ver[31:31] == 0) {
                bit<32> idx = meta.base + so_offset;
                bit<32> cur;
                VALID_VER_AT(idx, VALID_VER_MAX)
            }
            if (op == KvsOp.SYNC_DONE) {
                mark_to_drop(std);
            }
#endif
        } else if (op == KvsOp.GET_REPLY) {
            // Rule 6: a replica's read reply must carry exactly the version the origin last
            // reported (current epoch, ver == origin_ver): a newer one is of a write still in
            // flight, an older one may be a version the origin never held (a repeat's copy,
            // docs/protocol.md "Agent rules"), an older epoch or a miss (ver 0) is a copy that is
            // not current. Dropped; the client retries and the next Get is routed again.
            // A MOVED or RETRY answer carries no read result (docs/protocol.md "Membership"): a
            // client with another ring must get it, so it passes.
            bool no_result = hdr.kvs.status == KvsStatus.MOVED
                             || hdr.kvs.status == KvsStatus.RETRY;
#ifdef KVS_SPINE
            // R6: a rotated key's read replies are all judged, the origin's included
            bool judged = !from_origin || rotated_key;
#else
            bool judged = !from_origin;
#endif
            if (replier && judged && !no_result
                && (!current || hdr.kvs.ver != ov || hdr.kvs.ver == 0)) {
                mark_to_drop(std);
            }
        } else if (op == KvsOp.SYNC) {
            // Rule 5: only the key's origin gets a version; answered out of the port it came in,
            // addresses and L4 ports swapped. Anyone else's SYNC is dropped.
            if (sync) {
                sync_reflect();
                if (!stamp) {
                    hdr.kvs.epoch = 0;
                    hdr.kvs.ver = 0;
                    meta.l4_dirty = true;
                }
            } else {
                mark_to_drop(std);
            }
        } else if (op == KvsOp.SYNC_DONE) {
            mark_to_drop(std);
        }

        // Rules 1 and 5: the fresh version stamped on the packet. A write's copies to the
        // replicas are made by MultigroupTable (multicast.p4).
        if (stamp) {
            hdr.kvs.epoch = cur_epoch;
            hdr.kvs.ver = gv;
            meta.l4_dirty = true;
        }
#ifdef KVS_SPINE
        if (write && rotated_key) {
            // R1: to the writer only (MultigroupTable skipped, multicast.p4), flagged F_REDIRECT
            // (served by a holder that is not the origin), never F_SETTLED
            hdr.kvs.flags = hdr.kvs.flags | KVS_F_REDIRECT;
            if (ordinal != 0 && sm_hit) {
                std.egress_spec = sm_port;
                hdr.ethernet.dst_addr = sm_mac;
                hdr.ipv4.dst_addr = sm_ip;
            }
        } else if (write && settled) {
            hdr.kvs.flags = hdr.kvs.flags | KVS_F_SETTLED;  // copied into the UPDATEs too
        }
#else
        if (write && settled) {
            hdr.kvs.flags = hdr.kvs.flags | KVS_F_SETTLED;  // copied into the UPDATEs too
        }
#endif
    }
}

#endif  // KVSWITCH_REPLICAS_P4

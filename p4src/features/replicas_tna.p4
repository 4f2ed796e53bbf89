// Replica selection and the version registers, TNA build: the rules 1-6 of replicas.p4 (read its
// header for what they mean and for the controller contract), with every register reached through
// one RegisterAction per packet, in the order rr, epoch, global_ver, origin_ver, slot_ver,
// valid_ver. Each RegisterAction is one stateful-ALU program: a read, an increment, a wrapping
// increment, a max, or a compare-and-set against values the packet carries (PHV inputs computed
// before). valid_ver has two RegisterActions, on exclusive paths (a GET reads it, a CONFIRM raises
// it). Same registers, tables, actions and names as the v1model build.
#ifndef KVSWITCH_REPLICAS_TNA_P4
#define KVSWITCH_REPLICAS_TNA_P4

#include "valid_ver_parts.p4"
#ifdef KVS_SPINE
#include "writer_table_tna.p4"
#endif

// a part of valid_ver and its two RegisterActions: the GET's read, rule 3's max(valid_ver, ver)
#define VALID_VER_DECLARE(name, size)                                                           \
    @name(#name) Register<bit<32>, bit<VALID_VER_INDEX_W>>(size) name;                          \
    RegisterAction<bit<32>, bit<VALID_VER_INDEX_W>, bit<32>>(name) name##_read = {              \
        void apply(inout bit<32> value, out bit<32> rv) { rv = value; }                        \
    };                                                                                          \
    RegisterAction<bit<32>, bit<VALID_VER_INDEX_W>, bit<32>>(name) name##_max = {               \
        void apply(inout bit<32> value) {                                                       \
            if (hdr.kvs.ver > value) {                                                          \
                value = hdr.kvs.ver;                                                            \
            }                                                                                   \
        }                                                                                       \
    };
#define VALID_VER_READ(reg, cell) vv = reg##_read.execute(cell);
#define VALID_VER_MAX(reg, cell) reg##_max.execute(cell);

control Replicas(inout headers_t hdr, inout kvs_meta_t meta, inout kvs_fwd_t fwd,
                 in PortId_t ingress_port) {
    @name("global_ver") Register<bit<32>, bit<32>>(1) global_ver;
    @name("epoch") Register<bit<16>, bit<32>>(1) epoch;
    @name("slot_ver") Register<bit<32>, bit<32>>(HOT_KEYS) slot_ver;
    @name("origin_ver") Register<bit<32>, bit<32>>(HOT_KEYS) origin_ver;
    @name("rr") Register<ordinal_t, bit<32>>(HOT_KEYS) rr;

    bool sm_hit = false;
    bit<32> sm_vidx = 0;
    ipv4_addr_t sm_ip = 0;
    mac_addr_t sm_mac = 0;
    PortId_t sm_port = 0;
    bool so_hit = false;
    bit<32> so_vidx = 0;
#ifdef KVS_SPINE
    bit<32> so_offset = 0;
#endif
    PortId_t so_port = 0;
    ordinal_t ordinal = 0;
    // PHV inputs of the stateful ALUs, computed before the access
    bool origin_report = false;
    bool write = false;
    bool sync = false;
    bit<32> gv = 0;
    bit<32> ov = 0;
    bit<32> sv = 0;
    bit<32> vv = 0;
    // Versions are compared as serial numbers through a difference's sign, as replicas.p4; each
    // difference is computed in an action (a PHV field), which the gateway tests: a local computed
    // in the apply block is folded into the if ("condition expression too complex").
    bit<32> ov_sv = 0;
    bit<32> vv_ov = 0;
    bit<32> floor_ver = 0;
    bit<32> sv_ver = 0;
    action settled_diff() {
        ov_sv = ov - sv;
    }
    action read_set_diff() {
        vv_ov = vv - ov;
    }
    action confirm_diffs() {
        floor_ver = meta.floor - hdr.kvs.ver;
        sv_ver = sv - hdr.kvs.ver;
    }

    // rule 4 input, as in replicas.p4: the turn t rotates over n' ordinals from `first`; `last`
    // = n' - 1 is a PHV input, so the stateful ALU makes two comparisons (t < last: the next turn
    // is t + 1, else 0; t > last: turn 0, after a change of n or of the origin's liveness)
    ordinal_t last = 0;
    RegisterAction<ordinal_t, bit<32>, ordinal_t>(rr) rr_next = {
        void apply(inout ordinal_t value, out ordinal_t rv) {
            if (value > last) {
                rv = 0;
            } else {
                rv = value;
            }
            if (value < last) {
                value = value + 1;
            } else {
                value = 0;
            }
        }
    };
    RegisterAction<bit<16>, bit<32>, bit<16>>(epoch) epoch_read = {
        void apply(inout bit<16> value, out bit<16> rv) { rv = value; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(global_ver) global_ver_next = {
        void apply(inout bit<32> value, out bit<32> rv) { value = value + 1; rv = value; }
    };
    // rule 2: max(origin_ver, ver) on an origin report; the (new) value either way
    RegisterAction<bit<32>, bit<32>, bit<32>>(origin_ver) origin_ver_max = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (origin_report && hdr.kvs.ver > value) {
                value = hdr.kvs.ver;
            }
            rv = value;
        }
    };
    // rules 1 and 5: the old value; a write takes the fresh version, a SYNC only if no write is on
    // its way to the origin (slot_ver <= origin_ver); anything else reads. Three actions on
    // exclusive paths: a stateful ALU takes at most two PHV inputs (here gv, and ov for a SYNC)
    RegisterAction<bit<32>, bit<32>, bit<32>>(slot_ver) slot_ver_write = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = gv;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(slot_ver) slot_ver_sync = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            if (value <= ov) {
                value = gv;
            }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(slot_ver) slot_ver_read = {
        void apply(inout bit<32> value, out bit<32> rv) { rv = value; }
    };
    VALID_VER_REGISTERS(VALID_VER_DECLARE)
#ifdef KVS_SPINE
    // F7 (replicas.p4): `rotated` is written by requests (HotkeyTable's flag) and read by the rest;
    // `done_by` read by a rotated key's Gets and SYNCs, written when a report raised origin_ver;
    // origin_ver_raise is rule 2/R2 on a report, returning whether it raised origin_ver (done_by
    // follows; no later step of a report needs origin_ver's value).
    @name("done_by") Register<ordinal_t, bit<32>>(HOT_KEYS) done_by;
    @name("rotated") Register<bit<8>, bit<32>>(HOT_KEYS) rotated;
    RegisterAction<bit<8>, bit<32>, bit<8>>(rotated) rotated_record = {
        void apply(inout bit<8> value, out bit<8> rv) {
            value = (bit<8>)meta.rotate;
            rv = value;
        }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(rotated) rotated_read = {
        void apply(inout bit<8> value, out bit<8> rv) { rv = value; }
    };
    RegisterAction<ordinal_t, bit<32>, ordinal_t>(done_by) done_by_read = {
        void apply(inout ordinal_t value, out ordinal_t rv) { rv = value; }
    };
    ordinal_t reporter = 0;
    RegisterAction<ordinal_t, bit<32>, ordinal_t>(done_by) done_by_write = {
        void apply(inout ordinal_t value) { value = reporter; }
    };
    RegisterAction<bit<32>, bit<32>, bit<1>>(origin_ver) origin_ver_raise = {
        void apply(inout bit<32> value, out bit<1> rv) {
            rv = 0;
            if (hdr.kvs.ver > value) {
                value = hdr.kvs.ver;
                rv = 1;
            }
        }
    };
    WriterOrdinal() writer_ordinal;
    ipv4_addr_t so_ip = 0;  // ServeroffsetTable's address: a write's destination, else its source
#endif

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
        so_vidx = meta.base + offset;  // (a register index is one field on Tofino, not a sum)
#ifdef KVS_SPINE
        so_offset = offset;  // a spine's: the holder's ordinal
#endif
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

    apply {
        KvsOp op = hdr.kvs.op;
        bit<32> slot = (bit<32>)meta.slot;
#ifdef KVS_SPINE
        // F7 as in replicas.p4. Stage order: rotated, rr, ServeroffsetTable, epoch, origin_ver,
        // done_by, ServermapTable, global_ver, slot_ver, valid_ver: a report's done_by follows
        // origin_ver, a Get's precedes ServermapTable and valid_ver, a SYNC's precedes slot_ver.
        bit<8> rot;
        if (op == KvsOp.GET || op == KvsOp.SET || op == KvsOp.DEL) {
            rot = rotated_record.execute(slot);
        } else {
            rot = rotated_read.execute(slot);
        }
        bool rotated_key = false;
        if (rot == 1) {
            rotated_key = true;
        }
        if (op == KvsOp.GET && !rotated_key) {
#else
        if (op == KvsOp.GET) {
#endif
            // (ifs, not ?:: a match-action stage selects a value only in an if)
            // (one operation per step: a Tofino action's operations run in parallel)
            ordinal_t first = 0;
            last = 0;
            if (meta.origin_down && meta.n > 1) {
                first = 1;
                last = meta.n - 2;
            } else if (meta.n != 0) {
                last = meta.n - 1;
            }
            ordinal = rr_next.execute(slot) + first;
        }
#ifdef KVS_SPINE
        so_ip = hdr.ipv4.src_addr;
        if (op == KvsOp.SET || op == KvsOp.DEL) {
            so_ip = hdr.ipv4.dst_addr;
        }
        if (op != KvsOp.GET) {
            serveroffset_table.apply();
        }
#else
        servermap_table.apply();
        if (op != KvsOp.GET && op != KvsOp.SET && op != KvsOp.DEL) {
            serveroffset_table.apply();
        }
#endif

        bit<16> cur_epoch = epoch_read.execute(0);
        // (bools set in ifs: replicas.p4's conditions, one test each, for Tofino's gateways)
        bool current = false;
        if (hdr.kvs.epoch == cur_epoch) {
            current = true;
        }
        bool sender_ok = false;
        if (so_hit) {
            if (so_port == ingress_port) {
                sender_ok = true;
            }
        }
        bool from_origin = false;
#ifdef KVS_SPINE
        if (sender_ok && so_offset == 0) {  // ordinal 0
            from_origin = true;
        }
#else
        if (sender_ok && sm_hit) {
            if (sm_ip == hdr.ipv4.src_addr) {
                from_origin = true;
            }
        }
#endif
        // rule 6's sender: as in replicas.p4 (a spine judges every read reply but the origin's)
#ifdef KVS_SPINE
        bool replier = true;
#else
        bool replier = sender_ok;
#endif
        // rule 1 only for a write addressed to the key's origin, as in replicas.p4 (a bool a
        // stateful ALU reads, or the metadata takes, is set in an if's branches on Tofino)
        write = false;
        meta.misaddressed = false;
        if (op == KvsOp.SET || op == KvsOp.DEL) {
#ifdef KVS_SPINE
            if (so_hit && so_offset == 0) {  // addressed to the origin
#else
            if (sm_hit && sm_ip == hdr.ipv4.dst_addr) {
#endif
                write = true;
            } else {
                meta.misaddressed = true;
            }
        }
        sync = false;
#ifndef KVS_SPINE
        if (op == KvsOp.SYNC && from_origin && hdr.udp.isValid()) {
            sync = true;
        }
#endif
        // rule 2 as in replicas.p4: OK or STALE write replies (both carry the origin's version)
        origin_report = false;
#ifdef KVS_SPINE
        if (rotated_key) {
            // R2: any holder's write reply or SYNC_DONE; no read reply
            if (sender_ok && current) {
                if (op == KvsOp.SYNC_DONE && hdr.kvs.status == KvsStatus.OK) {
                    origin_report = true;
                } else if (op == KvsOp.SET_REPLY || op == KvsOp.DEL_REPLY) {
                    if (hdr.kvs.status == KvsStatus.OK || hdr.kvs.status == KvsStatus.STALE) {
                        origin_report = true;
                    }
                }
            }
        } else
#endif
        if (from_origin && current) {
            if (op == KvsOp.GET_REPLY) {
                origin_report = true;
            } else if (op == KvsOp.SYNC_DONE && hdr.kvs.status == KvsStatus.OK) {
                origin_report = true;
            } else if (op == KvsOp.SET_REPLY || op == KvsOp.DEL_REPLY) {
                if (hdr.kvs.status == KvsStatus.OK || hdr.kvs.status == KvsStatus.STALE) {
                    origin_report = true;
                }
            }
        }

#ifdef KVS_SPINE
        bool raised = false;
        if (origin_report) {
            if (origin_ver_raise.execute(slot) == 1) {
                raised = true;
            }
        } else {
            ov = origin_ver_max.execute(slot);
        }
        // done_by (replicas.p4): the raiser's ordinal; a rotated Get's holder; R5's test
        if (raised) {
            reporter = (ordinal_t)so_offset;
            done_by_write.execute(slot);
        } else if (rotated_key && op == KvsOp.GET) {
            ordinal = done_by_read.execute(slot);
        } else if (rotated_key && op == KvsOp.SYNC) {
            if (sender_ok && hdr.udp.isValid()) {
                ordinal_t db = done_by_read.execute(slot);
                if (ov == 0) {
                    if (so_offset == 0) {
                        sync = true;
                    }
                } else if ((ordinal_t)so_offset == db) {
                    sync = true;
                }
            }
        } else if (op == KvsOp.SYNC && from_origin && hdr.udp.isValid()) {
            sync = true;
        }
        // R1: the writer, WriterTable on (n, crc32(cid, seq)'s low 8 bits); TCP: the origin
        if (rotated_key && (op == KvsOp.SET || op == KvsOp.DEL)) {
            if (hdr.udp.isValid()) {
                writer_ordinal.apply(hdr, meta.n, ordinal);
            }
        }
        servermap_table.apply();
        gv = 0;
        if (write || sync) {
            gv = global_ver_next.execute(0);
        }
#else
        gv = 0;
        if (write || sync) {
            gv = global_ver_next.execute(0);
        }
        ov = origin_ver_max.execute(slot);
#endif
        if (write) {
            sv = slot_ver_write.execute(slot);
        } else if (sync) {
            sv = slot_ver_sync.execute(slot);
        } else {
            sv = slot_ver_read.execute(slot);
        }
        settled_diff();
        bool settled = false;  // no write on its way to the origin (F_SETTLED, replicas.p4)
        if (ov_sv[31:31] == 0) {
            settled = true;
        }
        bool stamp = false;
        if (write) {
            stamp = true;
        } else if (sync && settled) {
            stamp = true;
        }

        if (op == KvsOp.GET) {
            vv = 0;
            if (sm_hit) {
                VALID_VER_AT(sm_vidx, VALID_VER_READ)
            }
            read_set_diff();  // vv >= ov (serial)
            if (ordinal != 0 && sm_hit && ov != 0 && vv_ov[31:31] == 0 && hdr.udp.isValid()) {
                fwd.port = sm_port;
                fwd.drop = false;
                hdr.ethernet.dst_addr = sm_mac;
                hdr.ipv4.dst_addr = sm_ip;
                hdr.kvs.flags = hdr.kvs.flags | KVS_F_REDIRECT;  // the agent serves it as a replica
                meta.l4_dirty = true;
            }
        } else if (op == KvsOp.CONFIRM) {
            confirm_diffs();  // ver > floor, ver <= sv (serial)
            if (sender_ok && current && floor_ver[31:31] == 1 && sv_ver[31:31] == 0) {
                VALID_VER_AT(so_vidx, VALID_VER_MAX)
            }
            fwd_drop(fwd);
#ifdef KVS_SPINE
        } else if (rotated_key && origin_report) {
            // R2: the reporting holder's own cell, rule 3's test (replicas.p4)
            confirm_diffs();
            if (floor_ver[31:31] == 1 && sv_ver[31:31] == 0) {
                VALID_VER_AT(so_vidx, VALID_VER_MAX)
            }
            if (op == KvsOp.SYNC_DONE) {
                fwd_drop(fwd);
            }
#endif
        } else if (op == KvsOp.GET_REPLY) {
            // rule 6, exactly origin_ver; MOVED and RETRY carry no read result and pass, as in
            // replicas.p4 (R6: a rotated key's from every holder, the origin's included)
            bool judged = false;
            if (!from_origin) {
                judged = true;
            }
#ifdef KVS_SPINE
            if (rotated_key) {
                judged = true;
            }
#endif
            if (replier && judged) {
                if (hdr.kvs.status != KvsStatus.MOVED && hdr.kvs.status != KvsStatus.RETRY) {
                    if (!current) {
                        fwd_drop(fwd);
                    } else if (hdr.kvs.ver != ov) {
                        fwd_drop(fwd);
                    } else if (hdr.kvs.ver == 0) {
                        fwd_drop(fwd);
                    }
                }
            }
        } else if (op == KvsOp.SYNC) {
            if (sync) {
                hdr.kvs.status = KvsStatus.OK;
                fwd.port = ingress_port;
                fwd.drop = false;
                mac_addr_t mac = hdr.ethernet.dst_addr;
                hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
                hdr.ethernet.src_addr = mac;
                ipv4_addr_t ip = hdr.ipv4.dst_addr;
                hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
                hdr.ipv4.src_addr = ip;
                hdr.ipv4.ttl = 64;
                bit<16> port = hdr.udp.dst_port;
                hdr.udp.dst_port = hdr.udp.src_port;
                hdr.udp.src_port = port;
                if (!stamp) {
                    hdr.kvs.epoch = 0;
                    hdr.kvs.ver = 0;
                    meta.l4_dirty = true;
                }
            } else {
                fwd_drop(fwd);
            }
        } else if (op == KvsOp.SYNC_DONE) {
            fwd_drop(fwd);
        }

        if (stamp) {
            hdr.kvs.epoch = cur_epoch;
            hdr.kvs.ver = gv;
            meta.l4_dirty = true;
        }
#ifdef KVS_SPINE
        if (write && rotated_key) {
            // R1: to the writer only, F_REDIRECT, never F_SETTLED (replicas.p4)
            hdr.kvs.flags = hdr.kvs.flags | KVS_F_REDIRECT;
            if (ordinal != 0 && sm_hit) {
                fwd.port = sm_port;
                fwd.drop = false;
                hdr.ethernet.dst_addr = sm_mac;
                hdr.ipv4.dst_addr = sm_ip;
            }
        } else if (write && settled) {
            hdr.kvs.flags = hdr.kvs.flags | KVS_F_SETTLED;
        }
#else
        if (write && settled) {
            hdr.kvs.flags = hdr.kvs.flags | KVS_F_SETTLED;
        }
#endif
    }
}

#endif  // KVSWITCH_REPLICAS_TNA_P4

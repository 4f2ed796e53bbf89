// Replica selection and the version registers, TNA build: the rules 1-6 of replicas.p4 (read its
// header for what they mean and for the controller contract), with every register reached through
// one RegisterAction per packet. Each RegisterAction is one stateful-ALU program: a read, an
// increment, a wrapping increment, a max, or a compare-and-set against values the packet carries
// (PHV inputs computed before), and its output is the register's value or one difference of it
// (the stateful ALU's second ALU computes it). Same registers, tables, actions and names as the
// v1model build, and the same results (tests/dataplane/test_builds_agree.py).
//
// Shape (docs/tofino.md, "Down to 26 stages": each step below is one MAU stage at best, and each
// is written where its inputs are ready, so that a path waits only for what it reads):
//   1. the header's facts (one else-if chain), `rr` (a Get's ordinal, the turn's offset inside
//      the stateful ALU), ServeroffsetTable, `epoch`, rule 3's floor difference;
//   2. ServermapTable (slot, ordinal); the sender's port and the epoch compared;
//   3. `origin_ver` (raised by the origin's report, tested against ServermapTable's address in the
//      gateway) and `global_ver` (a write addressed to the origin, the origin's SYNC: the fresh
//      version goes straight into the header, where the packet carries it out);
//   4. `slot_ver`: a write's or a SYNC's ov - slot_ver (settled: its sign), a CONFIRM's
//      slot_ver - ver (rule 3's bound), from the stateful ALU;
//   5. `valid_ver`: a Get's valid_ver - ov (the read set: its sign), a CONFIRM's max;
//      F_SETTLED, rule 5's unstamped SYNC, rule 6's drop;
//   6. the Get's redirect.
// The order of the registers (rr, epoch, global_ver and origin_ver, slot_ver, valid_ver) is one
// order for every path: a SYNC compares slot_ver with origin_ver, a CONFIRM valid_ver with
// slot_ver, and the origin's report needs ServermapTable, which needs a Get's `rr`.
#ifndef KVSWITCH_REPLICAS_TNA_P4
#define KVSWITCH_REPLICAS_TNA_P4

#include "valid_ver_parts.p4"
#ifdef KVS_SPINE
#include "writer_table_tna.p4"
#endif

// a part of valid_ver and its two RegisterActions: the GET's valid_ver - ov (its sign: the read
// set, rule 4), rule 3's max(valid_ver, ver). Two PHV inputs: ov and hdr.kvs.ver.
#define VALID_VER_DECLARE(name, size)                                                           \
    @name(#name) Register<bit<32>, bit<VALID_VER_INDEX_W>>(size) name;                          \
    RegisterAction<bit<32>, bit<VALID_VER_INDEX_W>, bit<32>>(name) name##_read = {              \
        void apply(inout bit<32> value, out bit<32> rv) { rv = value - ov; }                   \
    };                                                                                          \
    RegisterAction<bit<32>, bit<VALID_VER_INDEX_W>, bit<32>>(name) name##_max = {               \
        void apply(inout bit<32> value) {                                                       \
            if (hdr.kvs.ver > value) {                                                          \
                value = hdr.kvs.ver;                                                            \
            }                                                                                   \
        }                                                                                       \
    };
#define VALID_VER_READ(reg, cell) vv_ov = reg##_read.execute(cell);
// rules 1 and 5: the fresh version, stamped on the packet at once (a write is always stamped; a
// SYNC that is not settled is reflected with epoch and ver 0). Statements, not an action: an
// action would be one more P4Info entity than the v1model build has.
#define TAKE_VERSION                                                                            \
    hdr.kvs.ver = global_ver_next.execute(0);                                                   \
    hdr.kvs.epoch = cur_epoch;                                                                  \
    meta.l4_dirty = true;
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
    bit<16> cur_epoch = 0;
    bool write = false;
    bool sync = false;
    bit<32> ov = 0;
    // Versions are compared as serial numbers through a difference's sign, as replicas.p4. The
    // differences with a register's value come out of its stateful ALU (ov_sv, sv_ver, vv_ov);
    // floor_ver is computed in an action, confirm_diffs (a PHV field the gateway tests: a local
    // computed in the apply block is folded into the if, "condition expression too complex").
    bit<32> ov_sv = 0;
    bit<32> sv_ver = 0;
    bit<32> vv_ov = 0;
    bit<32> floor_ver = 0;
    action confirm_diffs() {
        floor_ver = meta.floor - hdr.kvs.ver;
    }

    // rule 4 input, as in replicas.p4: the turn t rotates over n' ordinals from `first`. One
    // RegisterAction per case (the gateway picks it), each comparing t with n' - 1 through its one
    // PHV input, meta.n, and returning the ordinal t + first (the second ALU adds `first`):
    // t < n' - 1: the next turn is t + 1, else 0; t > n' - 1 (n or the origin's liveness
    // changed): turn 0. The comparisons add constants to t, never subtract them from n: the
    // compiler's front end turns `n - c` into `n + (2^8 - c)`, and the stateful ALU compares in 34
    // bits. t never exceeds 254 (it only grows below n' - 1 <= 254), so t + 1 does not wrap.
    RegisterAction<ordinal_t, bit<32>, ordinal_t>(rr) rr_next = {  // n >= 1: ordinals 0 .. n-1
        void apply(inout ordinal_t value, out ordinal_t rv) {
            if (value >= meta.n) {
                rv = 0;
            } else {
                rv = value;
            }
            if (value + 1 < meta.n) {
                value = value + 1;
            } else {
                value = 0;
            }
        }
    };
    // origin down, n >= 2: ordinals 1 .. n-1 (t + 2 < n tested with t + 1 < n: exact at t = 254)
    RegisterAction<ordinal_t, bit<32>, ordinal_t>(rr) rr_skip = {
        void apply(inout ordinal_t value, out ordinal_t rv) {
            if (value + 1 >= meta.n) {
                rv = 1;
            } else {
                rv = value + 1;
            }
            if (value + 2 < meta.n && value + 1 < meta.n) {
                value = value + 1;
            } else {
                value = 0;
            }
        }
    };
    RegisterAction<ordinal_t, bit<32>, ordinal_t>(rr) rr_zero = {  // n = 0: ordinal 0
        void apply(inout ordinal_t value) { value = 0; }
    };
    RegisterAction<bit<16>, bit<32>, bit<16>>(epoch) epoch_read = {
        void apply(inout bit<16> value, out bit<16> rv) { rv = value; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(global_ver) global_ver_next = {
        void apply(inout bit<32> value, out bit<32> rv) { value = value + 1; rv = value; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(origin_ver) origin_ver_read = {
        void apply(inout bit<32> value, out bit<32> rv) { rv = value; }
    };
#ifndef KVS_SPINE
    // rule 2: max(origin_ver, ver) on an origin report; the new value
    RegisterAction<bit<32>, bit<32>, bit<32>>(origin_ver) origin_ver_max = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (hdr.kvs.ver > value) {
                value = hdr.kvs.ver;
            }
            rv = value;
        }
    };
#endif
    // rules 1 and 5: a write takes the fresh version (in hdr.kvs.ver already), a SYNC only if no
    // write is on its way to the origin (slot_ver <= origin_ver); both return ov - the old value
    // (settled: its sign). Rule 3's bound for a CONFIRM: slot_ver - ver. Three actions on
    // exclusive paths; two PHV inputs for all of them (hdr.kvs.ver, ov).
    RegisterAction<bit<32>, bit<32>, bit<32>>(slot_ver) slot_ver_write = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = ov - value;
            value = hdr.kvs.ver;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(slot_ver) slot_ver_sync = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = ov - value;
            if (value <= ov) {
                value = hdr.kvs.ver;
            }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(slot_ver) slot_ver_confirm = {
        void apply(inout bit<32> value, out bit<32> rv) { rv = value - hdr.kvs.ver; }
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

    // the origin's SYNC back to it: one action, so that its swaps are one step (each swap through
    // a local in the apply block was a table of its own, three stages in a row)
    action sync_reflect() {
        hdr.kvs.status = KvsStatus.OK;
        fwd.port = ingress_port;
        fwd.drop = false;
        reflect(hdr);
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
#endif
        // 1. The header's facts, one else-if chain (its branches share a stage; bools set in
        // ifs: on Tofino a bool computed from comparisons is folded into every test reading it).
        // Rule 2's reports, as in replicas.p4: `acked`, a write's OK or STALE reply or an OK
        // SYNC_DONE (both carry the version the origin holds); `report_kind`, those and a read
        // reply.
        bool write_kind = false;
        bool sync_kind = false;
        bool acked = false;
        bool report_kind = false;
        if (op == KvsOp.SET || op == KvsOp.DEL) {
            write_kind = true;
        } else if (op == KvsOp.SYNC && hdr.udp.isValid()) {
            sync_kind = true;
        } else if (op == KvsOp.GET_REPLY) {
            report_kind = true;
        } else if (op == KvsOp.SYNC_DONE && hdr.kvs.status == KvsStatus.OK) {
            acked = true;
            report_kind = true;
        } else if ((op == KvsOp.SET_REPLY || op == KvsOp.DEL_REPLY)
                   && (hdr.kvs.status == KvsStatus.OK || hdr.kvs.status == KvsStatus.STALE)) {
            acked = true;
            report_kind = true;
        }
        // Rule 4 input (Gets only): the ordinal straight from rr's stateful ALU.
#ifdef KVS_SPINE
        if (!rotated_key)  // R4: a rotated key's Get takes done_by's ordinal (below)
#endif
        {
            if (op == KvsOp.GET && meta.origin_down && meta.n > 1) {
                ordinal = rr_skip.execute(slot);
            } else if (op == KvsOp.GET && meta.n != 0) {
                ordinal = rr_next.execute(slot);
            } else if (op == KvsOp.GET) {
                rr_zero.execute(slot);
            }
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
        if (op != KvsOp.GET && op != KvsOp.SET && op != KvsOp.DEL) {
            serveroffset_table.apply();
        }
#endif
        cur_epoch = epoch_read.execute(0);
        confirm_diffs();  // rule 3: ver > floor (serial); its other bound from slot_ver's ALU

        // 2. ServermapTable (a Get's chosen server; the origin, ordinal 0, for the rest); the
        // sender's port and the epoch.
#ifndef KVS_SPINE
        servermap_table.apply();
#endif
        bool current = false;
        if (hdr.kvs.epoch == cur_epoch) {
            current = true;
        }
        bool sender_ok = false;
        if (so_hit && so_port == ingress_port) {
            sender_ok = true;
        }

        // 3. origin_ver and global_ver. Rule 1 only for a write addressed to the key's origin,
        // as in replicas.p4; rule 5 only for the origin's SYNC.
#ifdef KVS_SPINE
        bool from_origin = false;
        if (sender_ok && so_offset == 0) {  // ordinal 0
            from_origin = true;
        }
        bool replier = true;  // rule 6's sender: a spine judges every read reply but the origin's
        if (write_kind && so_hit && so_offset == 0) {  // addressed to the origin
            write = true;
        } else if (write_kind) {
            meta.misaddressed = true;
        }
        bool origin_report = false;
        if (rotated_key) {
            // R2: any holder's write reply or SYNC_DONE; no read reply
            if (sender_ok && current && acked) {
                origin_report = true;
            }
        } else if (from_origin && current && report_kind) {
            origin_report = true;
        }
        bool raised = false;
        if (origin_report) {
            if (origin_ver_raise.execute(slot) == 1) {
                raised = true;
            }
        } else {
            ov = origin_ver_read.execute(slot);
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
        } else if (sync_kind && from_origin) {
            sync = true;
        }
        // R1: the writer, WriterTable on (n, crc32(cid, seq)'s low 8 bits); TCP: the origin
        if (rotated_key && write_kind) {
            if (hdr.udp.isValid()) {
                writer_ordinal.apply(hdr, meta.n, ordinal);
            }
        }
        servermap_table.apply();
        if (write || sync) {
            TAKE_VERSION
        }
#else
        // (the origin's address compared in each gateway: no from_origin bool in between)
        if (report_kind && current && sender_ok && sm_hit && sm_ip == hdr.ipv4.src_addr) {
            ov = origin_ver_max.execute(slot);
        } else {
            ov = origin_ver_read.execute(slot);
        }
        if (write_kind && sm_hit && sm_ip == hdr.ipv4.dst_addr) {
            write = true;
            TAKE_VERSION
        } else if (write_kind) {
            meta.misaddressed = true;
        } else if (sync_kind && sender_ok && sm_hit && sm_ip == hdr.ipv4.src_addr) {
            sync = true;
            TAKE_VERSION
        }
        bool from_origin = false;
        if (sender_ok && sm_hit && sm_ip == hdr.ipv4.src_addr) {
            from_origin = true;
        }
        bool replier = sender_ok;  // rule 6's sender: a server of the rack on its own port
#endif

        // 4. slot_ver (rules 1, 5; rule 3's bound)
        if (write) {
            ov_sv = slot_ver_write.execute(slot);
        } else if (sync) {
            ov_sv = slot_ver_sync.execute(slot);
        } else if (op == KvsOp.CONFIRM) {
            sv_ver = slot_ver_confirm.execute(slot);
        }
#ifdef KVS_SPINE
        else if (rotated_key && origin_report) {
            sv_ver = slot_ver_confirm.execute(slot);
        }
#endif

        // 5. F_SETTLED: a write stamped while no write is on its way to the origin (ov >= the
        // old slot_ver, serial; replicas.p4). The spine's here; a ToR's is the chain's last branch.
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
        } else if (write && ov_sv[31:31] == 0) {
            hdr.kvs.flags = hdr.kvs.flags | KVS_F_SETTLED;
        }
#endif

        if (op == KvsOp.GET) {
            // 5. valid_ver - ov; 6. the redirect if the chosen replica is in the read set
            if (sm_hit) {
                VALID_VER_AT(sm_vidx, VALID_VER_READ)
            }
            if (ordinal != 0 && sm_hit && ov != 0 && vv_ov[31:31] == 0 && hdr.udp.isValid()) {
                fwd.port = sm_port;
                fwd.drop = false;
                hdr.ethernet.dst_addr = sm_mac;
                hdr.ipv4.dst_addr = sm_ip;
                hdr.kvs.flags = hdr.kvs.flags | KVS_F_REDIRECT;  // the agent serves it as a replica
                meta.l4_dirty = true;
            }
        } else if (op == KvsOp.CONFIRM) {
            // ver > floor, ver <= slot_ver (serial)
            if (sender_ok && current && floor_ver[31:31] == 1 && sv_ver[31:31] == 0) {
                VALID_VER_AT(so_vidx, VALID_VER_MAX)
            }
            fwd_drop(fwd);
#ifdef KVS_SPINE
        } else if (rotated_key && origin_report) {
            // R2: the reporting holder's own cell, rule 3's test (replicas.p4)
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
                sync_reflect();
                if (ov_sv[31:31] == 1) {
                    // not settled: reflected unstamped (TAKE_VERSION marked it dirty)
                    hdr.kvs.epoch = 0;
                    hdr.kvs.ver = 0;
                }
            } else {
                fwd_drop(fwd);
            }
        } else if (op == KvsOp.SYNC_DONE) {
            fwd_drop(fwd);
        }
#ifndef KVS_SPINE
        // (a write's branch of the chain above, not an if before it: the chain's valid_ver then
        // follows slot_ver straight away, where an if before it put the chain a stage later)
        else if (write && ov_sv[31:31] == 0) {
            hdr.kvs.flags = hdr.kvs.flags | KVS_F_SETTLED;
        }
#endif
    }
}

#endif  // KVSWITCH_REPLICAS_TNA_P4

// Replica selection and the version registers: docs/protocol.md "Consistency", rules 1-5.
//
// Registers (the controller writes `epoch` at start-up, larger after every switch restart, and
// resets rr/slot_ver/origin_ver/valid_ver of a slot before reusing it for another key):
//   global_ver[1]   newest version handed out (32 bits)
//   epoch[1]        switch incarnation (16 bits), stamped next to every version
//   slot_ver[K]     version of the newest write of the slot's key that crossed the switch
//   origin_ver[K]   newest version the key's origin acknowledged
//   valid_ver[M*K]  valid_ver[base + offset(s)]: the version replica s confirmed
//   rr[K]           next round-robin ordinal of the slot, 0 .. n-1
//
// Tables (controller contract):
//   ServermapTable    (slot, ordinal) -> set_server(vidx, ip, mac, port): for ordinal 0 the key's
//                     origin, for 1 .. n-1 its replicas; vidx = base + offset of that server.
//   ServeroffsetTable server IPv4 -> set_server_offset(offset, port): every server of the rack, with
//                     the switch port it hangs off. A CONFIRM/SYNC/SYNC_DONE/origin reply changes a
//                     register only if its source address hits here and it arrived on that port.
#ifndef KVSWITCH_REPLICAS_P4
#define KVSWITCH_REPLICAS_P4

control Replicas(inout headers_t hdr, inout kvs_meta_t meta, inout standard_metadata_t std) {
    @name("global_ver") register<bit<32>>(1) global_ver;
    @name("epoch") register<bit<16>>(1) epoch;
    @name("slot_ver") register<bit<32>>(HOT_KEYS) slot_ver;
    @name("origin_ver") register<bit<32>>(HOT_KEYS) origin_ver;
    @name("valid_ver") register<bit<32>>(VALID_VER_ENTRIES) valid_ver;
    @name("rr") register<bit<ORDINAL_W>>(HOT_KEYS) rr;

    bool sm_hit = false;
    bit<32> sm_vidx = 0;
    ipv4_addr_t sm_ip = 0;
    mac_addr_t sm_mac = 0;
    PortId_t sm_port = 0;
    bool so_hit = false;
    bit<32> so_offset = 0;
    PortId_t so_port = 0;
    ordinal_t ordinal = 0;

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
            hdr.ipv4.src_addr: exact @name("server_ip");
        }
        actions = {
            set_server_offset;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = MAX_SERVERS;
    }

    apply {
        KvsOp op = hdr.kvs.op;
        // Rule 4 input: the next round-robin ordinal (Gets only).
        if (op == KvsOp.GET) {
            ordinal_t next;
            rr.read(ordinal, (bit<32>)meta.slot);
            if (ordinal >= meta.n) {
                ordinal = 0;
            }
            next = ordinal + 1;
            if (next >= meta.n) {
                next = 0;
            }
            rr.write((bit<32>)meta.slot, next);
        }
        servermap_table.apply();
        if (op != KvsOp.GET && op != KvsOp.SET && op != KvsOp.DEL) {
            serveroffset_table.apply();
        }

        bit<16> cur_epoch;
        epoch.read(cur_epoch, 0);
        bit<32> sv;
        slot_ver.read(sv, (bit<32>)meta.slot);
        // The sender is a server of the rack, on its own port; `from_origin`: and the key's origin.
        bool sender_ok = so_hit && so_port == std.ingress_port;
        bool from_origin = sender_ok && sm_hit && sm_ip == hdr.ipv4.src_addr;

        if (op == KvsOp.GET) {
            // Rule 4: redirect only to a replica that confirmed the version the origin acknowledged.
            // Only UDP Gets: a TCP segment sent elsewhere would land outside its connection.
            bit<32> ov;
            origin_ver.read(ov, (bit<32>)meta.slot);
            bit<32> vv = 0;
            if (sm_hit) {
                valid_ver.read(vv, sm_vidx);
            }
            if (ordinal != 0 && sm_hit && sv != 0 && ov == sv && vv == sv && hdr.udp.isValid()) {
                std.egress_spec = sm_port;
                hdr.ethernet.dst_addr = sm_mac;
                hdr.ipv4.dst_addr = sm_ip;
                meta.l4_dirty = true;
            }
        } else if (op == KvsOp.CONFIRM) {
            // Rule 3, then consumed.
            if (sender_ok && hdr.kvs.epoch == cur_epoch && hdr.kvs.ver == sv) {
                valid_ver.write(meta.base + so_offset, hdr.kvs.ver);
            }
            mark_to_drop(std);
        } else if (op == KvsOp.SYNC) {
            // Rule 5: only the key's origin gets a version (below); answered out of the port it
            // came in, addresses and L4 ports swapped. Anyone else's SYNC is dropped.
            if (from_origin && hdr.udp.isValid()) {
                hdr.kvs.status = KvsStatus.OK;
                std.egress_spec = std.ingress_port;
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
            } else {
                mark_to_drop(std);
            }
        } else if (op != KvsOp.SET && op != KvsOp.DEL) {
            // Rule 2: SET_REPLY / DEL_REPLY / SYNC_DONE from the origin with status OK (a repeated
            // request id's reply too: it carries the version the origin holds, flag F_DUP), at the
            // current epoch and version.
            if (from_origin && hdr.kvs.status == KvsStatus.OK && hdr.kvs.epoch == cur_epoch
                    && hdr.kvs.ver == sv) {
                origin_ver.write((bit<32>)meta.slot, hdr.kvs.ver);
            }
            if (op == KvsOp.SYNC_DONE) {
                mark_to_drop(std);
            }
        }

        // Rule 5 needs no write on its way to the origin (origin_ver == slot_ver): a SYNC stamped
        // after such a write could reach the origin first and give the old value the newer
        // version. Otherwise it is reflected unstamped (ver 0) and the origin asks again later.
        bool sync_stamp = false;
        if (op == KvsOp.SYNC && from_origin && hdr.udp.isValid()) {
            bit<32> acked_ver;
            origin_ver.read(acked_ver, (bit<32>)meta.slot);
            sync_stamp = acked_ver == sv;
            if (!sync_stamp) {
                hdr.kvs.epoch = 0;
                hdr.kvs.ver = 0;
                meta.l4_dirty = true;
            }
        }
        // Rules 1 and 5: a fresh version for the slot, stamped on the packet. A write's copies
        // to the replicas are made by MultigroupTable (multicast.p4).
        if (op == KvsOp.SET || op == KvsOp.DEL || sync_stamp) {
            bit<32> gv;
            global_ver.read(gv, 0);
            gv = gv + 1;
            global_ver.write(0, gv);
            slot_ver.write((bit<32>)meta.slot, gv);
            hdr.kvs.epoch = cur_epoch;
            hdr.kvs.ver = gv;
            meta.l4_dirty = true;
        }
    }
}

#endif  // KVSWITCH_REPLICAS_P4

// Steering at a leaf of a fabric (KVS_FABRIC_LEAF, kvswitch_leaf.p4): docs/protocol.md F3 and F5,
// docs/fabric.md "Leaf program". Both builds share this control; it decides, the top level applies
// the decision to its target's forwarding (v1model egress_spec, TNA meta.fwd).
//
// Tables (fabric controller contract):
//   UplinkTable     exact on the ingress port -> set_uplink(): the leaf's ports to the spines, one
//                   static entry each. A packet from an uplink was checked by the leaf it entered
//                   the fabric at (F5): the trust rules S, O and V are not applied to it again (a
//                   spine's stamp, a redirect flag and a remote server's reply pass).
//   FabricHotTable  exact on the key of a well-formed KVSwitch message -> set_spine(port, dmac):
//                   the fabric-hot keys with the port of their spine and that spine's MAC, the same
//                   entries on every leaf. Its default action is `hold` (drop the message) when the
//                   program starts: a leaf that restarts forwards no KVSwitch message until the
//                   fabric controller installed the table and set the default to NoAction.
//
// A steered message (a fabric-hot key's GET, SET, DEL, their replies, CONFIRM, SYNC, SYNC_DONE;
// from spine(k) also its UPDATE/UPDATE_DEL copies) goes:
//   - from a host port, or from another spine: up to spine(k) (`up`: port and dmac below);
//   - from spine(k): down to its destination by plain forwarding.
// Either way none of the leaf's own KVSwitch rules (hot keys, versions, HashPipe, write copies,
// DownTable answers, the drop of UPDATEs and of consumed messages) apply to it.
#ifndef KVSWITCH_STEERING_P4
#define KVSWITCH_STEERING_P4

#ifndef FABRIC_KEYS
#define FABRIC_KEYS (HOT_KEYS * 4)
#endif
#ifndef UPLINKS
#define UPLINKS 64
#endif

control Steering(in headers_t hdr, in kvs_meta_t meta, in PortId_t ingress_port,
                 out bool uplink, out bool steered, out bool up, out bool held,
                 out PortId_t spine_port, out mac_addr_t spine_mac) {
    @name("set_uplink")
    action set_uplink() {
        uplink = true;
    }

    @name("UplinkTable")
    table uplink_table {
        key = {
            ingress_port: exact @name("port");
        }
        actions = {
            set_uplink;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = UPLINKS;
    }

    @name("set_spine")
    action set_spine(PortId_t port, mac_addr_t dmac) {
        steered = true;
        spine_port = port;
        spine_mac = dmac;
    }

    @name("hold")
    action hold() {
        held = true;
    }

    @name("FabricHotTable")
    table fabric_hot_table {
        key = {
            hdr.kvs.key: exact @name("key");
        }
        actions = {
            set_spine;
            hold;
            NoAction;
        }
        default_action = hold();
        size = FABRIC_KEYS;
    }

    apply {
        uplink = false;
        steered = false;
        up = false;
        held = false;
        spine_port = 0;
        spine_mac = 0;
        uplink_table.apply();
        if (meta.kvs_ok) {
            fabric_hot_table.apply();
        }
        if (steered) {
            // (bools set in ifs, one test each: Tofino writes no comparison into a field)
            KvsOp op = hdr.kvs.op;
            bool from_spine = false;
            if (uplink) {
                if (ingress_port == spine_port) {
                    from_spine = true;
                }
            }
            // PUSH, REMOVE and membership messages are plain IP; an UPDATE is steered only down
            // from its spine (from a host it is forged, and the leaf's rule drops it)
            steered = false;
            if (op == KvsOp.GET || op == KvsOp.SET || op == KvsOp.DEL
                || op == KvsOp.GET_REPLY || op == KvsOp.SET_REPLY || op == KvsOp.DEL_REPLY) {
                steered = true;
            } else if (op == KvsOp.CONFIRM || op == KvsOp.SYNC || op == KvsOp.SYNC_DONE) {
                steered = true;
            } else if (op == KvsOp.UPDATE || op == KvsOp.UPDATE_DEL) {
                if (from_spine) {
                    steered = true;
                }
            }
            if (steered && !from_spine) {
                if (hdr.ipv4.ttl > 1) {  // expired: forwarding dropped it
                    up = true;
                }
            }
        }
    }
}

#endif  // KVSWITCH_STEERING_P4

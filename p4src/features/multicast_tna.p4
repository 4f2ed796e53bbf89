// Write fan-out of hot keys, TNA build (multicast.p4 is the v1model one; same tables and names).
// Ingress: the group goes to meta.fwd.grp (KvsIngress sets mcast_grp_a from it); the PRE gives
// every copy its node's rid, which egress reads as eg_intr_md.egress_rid. Egress: the rewrite of
// the copies is the v1model one, with drop_ctl for a copy whose port has no entry.
#ifndef KVSWITCH_MULTICAST_TNA_P4
#define KVSWITCH_MULTICAST_TNA_P4

#include "update_copy.p4"

control MulticastIngress(in headers_t hdr, inout kvs_meta_t meta, inout kvs_fwd_t fwd) {
    @name("set_mcast_group")
    action set_mcast_group(MulticastGroupId_t group) {
        fwd.grp = group;
        meta.mcast = true;
    }

    @name("MultigroupTable")
    table multigroup_table {
        key = {
            hdr.kvs.key: exact @name("key");
        }
        actions = {
            set_mcast_group;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = HOT_KEYS;
    }

    apply {
#ifdef KVS_SPINE
        // a rotated key's write goes to one holder, no copies (docs/protocol.md F7 R1, replicas.p4)
        if (meta.rotate == 0) {
            multigroup_table.apply();
        }
#else
        multigroup_table.apply();
#endif
    }
}

control MulticastEgress(inout headers_t hdr, inout kvs_meta_t meta, in PortId_t egress_port,
                        in ReplicationId_t egress_rid, inout bit<3> drop_ctl) {
    @name("set_replica")
    action set_replica(ipv4_addr_t ip, mac_addr_t mac) {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ip;
        meta.l4_dirty = true;
    }

    @name("drop")
    action drop() {
        drop_ctl = 1;
    }

#ifdef KVS_SPINE
    @name("RidtoserverTable")
#else
    @name("PorttoserverTable")
#endif
    table porttoserver_table {
        key = {
#ifdef KVS_SPINE
            egress_rid: exact @name("rid");  // a spine's copies: multicast.p4
#else
            egress_port: exact @name("port");
#endif
        }
        actions = {
            set_replica;
            @defaultonly drop;
        }
        default_action = drop();
        size = MAX_SERVERS;
    }

    apply {
        if (porttoserver_table.apply().hit) {
            UpdateCopy.apply(hdr);
        }
    }
}

#endif  // KVSWITCH_MULTICAST_TNA_P4

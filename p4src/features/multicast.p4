// Write fan-out of hot keys (rule 1 of docs/protocol.md).
//
// Ingress, MultigroupTable: exact on the key of a hot SET/DEL -> `set_mcast_group(group)`.
// Controller contract for each group: the origin's port with rid 0 (that copy leaves unchanged,
// stamped, to the origin) and every replica's port with rid = its ordinal (>= 1). A hot key without
// replicas needs no entry: its writes go unicast to the origin.
//
// Egress, PorttoserverTable: exact on egress_port -> `set_replica(ip, mac)`, one entry per server
// port. Each copy with rid != 0 becomes an UPDATE (SET) or UPDATE_DEL (DEL) addressed to that
// replica; a copy of a TCP Set becomes a UDP datagram (flags |= F_TCP, same source port, destination
// KVS_PORT) because the replica has no TCP connection with the client. A copy whose port has no
// entry is dropped: sent unchanged it would look like a fresh SET to the wrong server.
//
// A spine (KVS_SPINE) reaches all servers of a rack through one leaf port, so its copies are told
// apart by their replication id instead: the group has the origin's leaf port with rid 0 and each
// replica's leaf port with rid = the replica's server id (>= 1, one per server of the fabric), and
// egress RidtoserverTable: exact on egress_rid -> `set_replica(ip, mac)` (mac: the server's leaf's),
// one static entry per server of the fabric.
#ifndef KVSWITCH_MULTICAST_P4
#define KVSWITCH_MULTICAST_P4

#include "update_copy.p4"

control MulticastIngress(in headers_t hdr, inout kvs_meta_t meta, inout standard_metadata_t std) {
    @name("set_mcast_group")
    action set_mcast_group(MulticastGroupId_t group) {
        std.mcast_grp = group;
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

control MulticastEgress(inout headers_t hdr, inout kvs_meta_t meta,
                        inout standard_metadata_t std) {
    @name("set_replica")
    action set_replica(ipv4_addr_t ip, mac_addr_t mac) {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ip;
        meta.l4_dirty = true;
    }

    @name("drop")
    action drop() {
        mark_to_drop(std);
    }

#ifdef KVS_SPINE
    @name("RidtoserverTable")
#else
    @name("PorttoserverTable")
#endif
    table porttoserver_table {
        key = {
#ifdef KVS_SPINE
            std.egress_rid: exact @name("rid");
#else
            std.egress_port: exact @name("port");
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

#endif  // KVSWITCH_MULTICAST_P4

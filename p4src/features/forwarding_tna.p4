// Plain IPv4 forwarding, TNA build (forwarding.p4 is the v1model one; same table, actions, names).
// The decision goes to meta.fwd (headers_tna.p4), which KvsIngress hands to the traffic manager.
#ifndef KVSWITCH_FORWARDING_TNA_P4
#define KVSWITCH_FORWARDING_TNA_P4

control Forwarding(inout headers_t hdr, inout kvs_fwd_t fwd) {
    @name("set_next_hop")
    action set_next_hop(PortId_t port, mac_addr_t dmac, mac_addr_t smac) {
        fwd.port = port;
        fwd.drop = false;
        hdr.ethernet.dst_addr = dmac;
        hdr.ethernet.src_addr = smac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @name("drop")
    action drop() {
        fwd.drop = true;
        fwd.grp = 0;
    }

    @name("ipv4_lpm")
    table ipv4_lpm {
        key = {
            hdr.ipv4.dst_addr: lpm @name("dst_addr");
        }
        actions = {
            set_next_hop;
            drop;
        }
        default_action = drop();
        size = IPV4_ROUTES;
    }

    apply {
        if (hdr.ipv4.isValid() && hdr.ipv4.ttl > 1) {
            ipv4_lpm.apply();
        } else {
            drop();
        }
    }
}

#endif  // KVSWITCH_FORWARDING_TNA_P4

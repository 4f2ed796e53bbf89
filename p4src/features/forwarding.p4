// Plain IPv4 forwarding for every packet: LPM on the destination address -> egress port, next-hop
// MAC, and the switch's own MAC as source; TTL decremented like a router.
//
// Controller contract: one `ipv4_lpm` entry per server (/32) and per client subnet, action
// `set_next_hop(port, dmac, smac)`. A miss drops. Non-IPv4 frames (ARP) are dropped: hosts of the
// rack use static neighbour entries. The KVSwitch features run after this control and may override
// egress port, destination MAC and destination IP (redirected Gets, reflected SYNCs).
#ifndef KVSWITCH_FORWARDING_P4
#define KVSWITCH_FORWARDING_P4

control Forwarding(inout headers_t hdr, inout standard_metadata_t std) {
    @name("set_next_hop")
    action set_next_hop(PortId_t port, mac_addr_t dmac, mac_addr_t smac) {
        std.egress_spec = port;
        hdr.ethernet.dst_addr = dmac;
        hdr.ethernet.src_addr = smac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @name("drop")
    action drop() {
        mark_to_drop(std);
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
            mark_to_drop(std);
        }
    }
}

#endif  // KVSWITCH_FORWARDING_P4

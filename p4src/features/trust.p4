// Who may send what: docs/protocol.md "Trust". Applied with KvsCheck, before every other KVSwitch
// feature, so nothing a client host forged reaches the version registers or a server.
//
// A packet's sender is a *server* when its IPv4 source address hits HostportTable with `server` = 1
// and it arrived on the port the entry names; anything else is a *client*. Rules:
//   S (source)   a packet whose source address hits HostportTable but arrived on another port is
//                spoofed: dropped, whatever it carries. A UDP datagram to the KVS port from a client
//                that KvsCheck did not accept (truncated, or an IP fragment: the switch cannot see
//                its header, so it could not stamp or clear it) is dropped too.
//   O (ops)      only servers send GET_REPLY, SET_REPLY, DEL_REPLY, CONFIRM, PUSH, SYNC, SYNC_DONE,
//                REMOVE and REMOVE_REPLY; UPDATE/UPDATE_DEL are made by this switch's egress and
//                never accepted from any host (kvswitch.p4); clients send GET, SET, DEL and
//                RING_GET (which asks a server for its ring and touches no switch state) only.
//                Anything else from a client over UDP (a server-only op, an unknown op) is dropped.
//   V (versions) every UDP request (GET, SET, DEL) leaves here with epoch = ver = 0 and the flag
//                bits F_TCP/F_DUP/F_REDIRECT/F_SETTLED cleared: versions, redirects and the
//                settled flag come from the switch alone. Replicas (rule 1) stamps a hot SET/DEL
//                afterwards; a cold one reaches its origin unversioned.
//   (TCP: a segment may start in the middle of a message, so O and V leave TCP alone; the agent
//   ignores versions on TCP requests and takes PUSH/REMOVE from its control channel only.)
// A dropped packet also has meta.kvs_ok cleared, so no later control reads or writes state for it.
//
// Table (controller contract, installed with the static entries, controller/trust.py):
//   HostportTable  IPv4 source (LPM: a /32 per server and per client, or a client subnet) ->
//                  set_source(port, server): the switch port that source hangs off, and 1 for a
//                  server of the rack. A source that misses is an unknown client (rules O and V
//                  hold; rule S cannot).
//
// Test-only builds switch one rule off each, to show the adversarial suite (tests/security) fails
// without it: -DKVS_TEST_NO_TRUST_SOURCE, -DKVS_TEST_NO_TRUST_SERVER_OPS,
// -DKVS_TEST_NO_TRUST_ZERO_VERSIONS. Never use them in a rack that serves anyone.
#ifndef KVSWITCH_TRUST_P4
#define KVSWITCH_TRUST_P4

// Three controls, applied in this order, KvsCheck's verdict before the second: TrustFacts reads
// the headers and HostportTable only, so Tofino runs it beside KvsCheck; TrustVersions (rule V)
// and TrustRefusal act on both (the TNA build applies them on the two sides of its lookups' gate,
// kvswitch_tna.p4). `distrust`: what S and O say of a message KvsCheck accepted (not from
// meta.kvs_ok): such a message is refused exactly when `distrust` holds, so "KvsCheck accepted it
// and not distrust" is the kvs_ok TrustRefusal leaves, known a step before the refusal writes it
// (the TNA ingress gates its lookups on it). `spoofed`, `from_server`, `to_kvs`: the other facts
// TrustRefusal reads.
control TrustFacts(in headers_t hdr, in PortId_t ingress_port, inout bool distrust,
                   out bool spoofed, out bool from_server, out bool to_kvs) {
    bool known = false;
    bit<1> is_server = 0;
    PortId_t host_port = 0;

    @name("set_source")
    action set_source(PortId_t port, bit<1> server) {
        known = true;
        host_port = port;
        is_server = server;
    }

    @name("HostportTable")
    table hostport_table {
        key = {
            hdr.ipv4.src_addr: lpm @name("src_addr");
        }
        actions = {
            set_source;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = IPV4_ROUTES;
    }

    apply {
        spoofed = false;
        from_server = false;
        to_kvs = false;
        if (hdr.ipv4.isValid()) {
            hostport_table.apply();
            KvsOp op = hdr.kvs.op;
            // (bools set in ifs, one test each: on Tofino a stage's gateway takes small
            // conditions, and a bool computed from comparisons is folded into every later test)
            bool client_op = false;  // what a client may send over UDP (rule O)
            if (op == KvsOp.GET || op == KvsOp.SET || op == KvsOp.DEL || op == KvsOp.RING_GET) {
                client_op = true;
            }
            if (hdr.udp.isValid()) {
                if (hdr.udp.dst_port == KVS_PORT) {
                    to_kvs = true;
                }
            }
            // The facts, one else-if chain on HostportTable's result and header bits (one step on
            // Tofino): spoofed (S), from_server, and distrust = S or O for a message KvsCheck
            // accepts; O is "a UDP op a client may not send, not from a server"
            // (`hdr.udp.isValid() && !client_op` tested where it applies, no bool of its own: that
            // would be one step more).
            if (known) {
                if (host_port != ingress_port) {
                    spoofed = true;
#ifndef KVS_TEST_NO_TRUST_SOURCE
                    distrust = true;
#else
#ifndef KVS_TEST_NO_TRUST_SERVER_OPS
                    if (hdr.udp.isValid() && !client_op) {
                        distrust = true;  // O: not from a server (not on its port)
                    }
#endif
#endif
                } else if (is_server == 1) {
                    from_server = true;
                }
#ifndef KVS_TEST_NO_TRUST_SERVER_OPS
                else if (hdr.udp.isValid() && !client_op) {
                    distrust = true;  // O: a known client
                }
#endif
            }
#ifndef KVS_TEST_NO_TRUST_SERVER_OPS
            else if (hdr.udp.isValid() && !client_op) {
                distrust = true;  // O: an unknown sender
            }
#endif
        }
    }
}

// Rule V on a message KvsCheck accepted (meta.kvs_ok), before the refusal: a packet refused below
// is dropped, so rewriting it first changes nothing that leaves the switch.
// O and V look at UDP only: a TCP segment's first bytes may be the middle of a message (a value
// longer than one segment), which must pass untouched. Over TCP the agents ignore versions and
// take no PUSH/REMOVE, and a reply cannot enter another host's connection.
control TrustVersions(inout headers_t hdr, inout kvs_meta_t meta) {
    apply {
#ifndef KVS_TEST_NO_TRUST_ZERO_VERSIONS
        KvsOp op = hdr.kvs.op;
        if (meta.kvs_ok && hdr.udp.isValid()) {
            if (op == KvsOp.GET || op == KvsOp.SET || op == KvsOp.DEL) {
                bit<16> switch_flags = KVS_F_TCP | KVS_F_DUP | KVS_F_REDIRECT | KVS_F_SETTLED;
                bit<16> authority = hdr.kvs.flags & switch_flags;
                // (one field per test: a Tofino gateway compares at most 4 bytes and 12 bits;
                // one else-if chain: separate ifs writing one field take a stage each)
                if (hdr.kvs.epoch != 0) {
                    meta.l4_dirty = true;
                } else if (hdr.kvs.ver != 0) {
                    meta.l4_dirty = true;
                } else if (authority != 0) {
                    meta.l4_dirty = true;
                }
                hdr.kvs.epoch = 0;
                hdr.kvs.ver = 0;
                hdr.kvs.flags = hdr.kvs.flags & ~switch_flags;
            }
        }
#endif
    }
}

// `refused`: the caller drops the packet (v1model: mark_to_drop; TNA: its forwarding decision), so
// both builds share this control. The refusal: of a message KvsCheck accepted, on distrust alone;
// of anything else (S) a spoofed packet, and a client's UDP datagram to the KVS port (KvsCheck's
// refusal: the switch could not see, stamp or clear its message).
control TrustRefusal(inout headers_t hdr, inout kvs_meta_t meta, in bool distrust,
                     in bool spoofed, in bool from_server, in bool to_kvs, inout bool refused) {
    action refuse() {
        refused = true;
        meta.kvs_ok = false;
    }

    apply {
        if (hdr.ipv4.isValid()) {
            if (meta.kvs_ok) {
                if (distrust) {
                    refuse();
                }
            }
#ifndef KVS_TEST_NO_TRUST_SOURCE
            else if (spoofed) {
                refuse();
            } else if (!from_server && to_kvs) {
                refuse();
            }
#endif
        }
    }
}

#endif  // KVSWITCH_TRUST_P4

// Server liveness: what the controller's failure detector reads, and what the switch does with a
// request for a server the controller declared dead (docs/protocol.md "Faults",
// docs/controller_runtime.md "Failure detection").
//
// Tables (controller contract):
//   ReplycountTable  exact on the IPv4 source address -> count_reply: one entry per server, installed
//                    with the static entries. Its direct counter counts the replies each server sent
//                    (GET_REPLY, SET_REPLY, DEL_REPLY, CONFIRM, SYNC_DONE, REMOVE_REPLY) this period,
//                    before rule 6 may drop one: a server that stops answering stops showing here
//                    while LoadcountTable still shows requests sent to it. Read and reset with the
//                    other counters every period.
//   DownTable        exact on a request's IPv4 destination (clients address every request to the
//                    key's origin) -> set_down: one entry per server the controller declared dead,
//                    deleted when it is back. Empty in a healthy rack.
//
// A request (GET/SET/DEL over UDP) whose origin is down:
//   - a GET of a hot key is routed by rule 4 with ordinal 0 (the origin) skipped (replicas.p4), so a
//     replica in the read set answers it;
//   - anything else (a SET/DEL, a GET of a cold key, a hot GET whose chosen replica is not in the read
//     set) is answered by the switch itself with status UNAVAILABLE (unavailable_reply below, the
//     top levels' answer_unavailable): nothing is applied anywhere, no version is taken, no
//     multicast copy leaves, and the client learns at once.
// TCP requests are forwarded unchanged (the switch cannot answer inside a TCP connection); the
// server's host answers them or the client's timeout does.
#ifndef KVSWITCH_LIVENESS_P4
#define KVSWITCH_LIVENESS_P4

control Liveness(in headers_t hdr, inout kvs_meta_t meta) {
#ifdef KVSWITCH_TNA
    // TNA's DirectCounter counts when the action says so (hot_keys_tna.p4)
    @name("reply_counter")
    DirectCounter<bit<64>>(CounterType_t.PACKETS_AND_BYTES) reply_counter;

    @name("count_reply")
    action count_reply() {
        reply_counter.count();
    }
#else
    @name("reply_counter")
    direct_counter(CounterType.packets_and_bytes) reply_counter;

    @name("count_reply")
    action count_reply() {
    }
#endif

    @name("ReplycountTable")
    table replycount_table {
        key = {
            hdr.ipv4.src_addr: exact @name("src_addr");
        }
        actions = {
            count_reply;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        counters = reply_counter;
        size = MAX_SERVERS;
    }

    @name("set_down")
    action set_down() {
        meta.origin_down = true;
    }

    @name("DownTable")
    table down_table {
        key = {
            hdr.ipv4.dst_addr: exact @name("dst_addr");
        }
        actions = {
            set_down;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = MAX_SERVERS;
    }

    // meta.origin_down: false from the ingress's start (the top level; this control is applied
    // once). A clearing write here would have a stage of its own on Tofino, DownTable the next.
    apply {
        KvsOp op = hdr.kvs.op;
        if (op == KvsOp.GET || op == KvsOp.SET || op == KvsOp.DEL) {
            if (hdr.udp.isValid()) {
                down_table.apply();
            }
        } else if (op == KvsOp.GET_REPLY || op == KvsOp.SET_REPLY || op == KvsOp.DEL_REPLY
                   || op == KvsOp.CONFIRM || op == KvsOp.SYNC_DONE || op == KvsOp.REMOVE_REPLY) {
            replycount_table.apply();
        }
    }
}

// The switch's own answer to a UDP request whose server is down: the request becomes its reply op
// (GET -> GET_REPLY, SET -> SET_REPLY, DEL -> DEL_REPLY) with status UNAVAILABLE, vlen 0, epoch and
// ver 0, (cid, seq, key) kept, addresses and ports swapped (the client's MAC is the one the request
// arrived with, `client_mac`: forwarding already rewrote the Ethernet addresses towards the dead
// server, and its source is the switch's MAC). A SET's value bytes stay in the datagram after the
// header; vlen 0 says they are not part of the message (receivers ignore bytes after 36 + vlen,
// docs/protocol.md). Each build sends it back out of the port it came in (its top level's
// answer_unavailable).
void unavailable_reply(inout headers_t hdr, out bool l4_dirty, in mac_addr_t client_mac) {
    // a request's reply is the next op (GET 1 -> GET_REPLY 2, SET 3 -> 4, DEL 5 -> 6): one step
    hdr.kvs.op = (KvsOp)((bit<8>)hdr.kvs.op + 1);
    hdr.kvs.status = KvsStatus.UNAVAILABLE;
    hdr.kvs.vlen = 0;
    hdr.kvs.epoch = 0;
    hdr.kvs.ver = 0;
    hdr.ethernet.dst_addr = client_mac;
    reflect_ip_udp(hdr);
    l4_dirty = true;
}

#endif  // KVSWITCH_LIVENESS_P4

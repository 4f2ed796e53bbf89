// Per-server load (egress): LoadcountTable, exact on the final destination IPv4 address (after any
// redirect or multicast rewrite), counts every well-formed KVSwitch packet with its direct counter.
// Controller contract: one entry per server address, action `count_load`; the controller reads and
// resets the counters every period. Packets to other addresses (replies to clients) miss.
#ifndef KVSWITCH_LOAD_COUNT_P4
#define KVSWITCH_LOAD_COUNT_P4

control LoadCount(in headers_t hdr) {
    @name("load_counter")
    direct_counter(CounterType.packets_and_bytes) load_counter;

    @name("count_load")
    action count_load() {
    }

    @name("LoadcountTable")
    table loadcount_table {
        key = {
            hdr.ipv4.dst_addr: exact @name("dst_addr");
        }
        actions = {
            count_load;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        counters = load_counter;
        size = MAX_SERVERS;
    }

    apply {
        loadcount_table.apply();
    }
}

#endif  // KVSWITCH_LOAD_COUNT_P4

// Per-server load (egress), TNA build (load_count.p4 is the v1model one; same table and names).
// count_load counts the DirectCounter itself: a TNA direct counter counts when its action says so.
#ifndef KVSWITCH_LOAD_COUNT_TNA_P4
#define KVSWITCH_LOAD_COUNT_TNA_P4

control LoadCount(in headers_t hdr) {
    @name("load_counter")
    DirectCounter<bit<64>>(CounterType_t.PACKETS_AND_BYTES) load_counter;

    @name("count_load")
    action count_load() {
        load_counter.count(KVS_BRIDGE_BYTES);  // egress sees the bridged header too
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

#endif  // KVSWITCH_LOAD_COUNT_TNA_P4

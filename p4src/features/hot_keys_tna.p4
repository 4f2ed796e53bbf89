// Hot-key lookups, TNA build (hot_keys.p4 is the v1model one; same tables, counters and names).
// A TNA DirectCounter counts when the action says so: set_hot counts, the miss (NoAction) does
// not, as v1model's direct counter counts the hits.
#ifndef KVSWITCH_HOT_KEYS_TNA_P4
#define KVSWITCH_HOT_KEYS_TNA_P4

control HotKeys(in headers_t hdr, inout kvs_meta_t meta) {
    @name("hotkey_counter")
    DirectCounter<bit<64>>(CounterType_t.PACKETS_AND_BYTES) hotkey_counter;
    @name("hotkey_writes")
    Counter<bit<64>, slot_t>(HOT_KEYS, CounterType_t.PACKETS) hotkey_writes;

    @name("set_hot")
#ifdef KVS_SPINE
    action set_hot(slot_t slot, ordinal_t n, bit<1> rotate) {
        meta.rotate = rotate;  // a spine's: the key's writes rotate (F7, replicas.p4)
#else
    action set_hot(slot_t slot, ordinal_t n) {
#endif
        hotkey_counter.count();
        meta.hot = true;
        meta.slot = slot;
        meta.n = n;
    }

    @name("HotkeyTable")
    table hotkey_table {
        key = {
            hdr.kvs.key: exact @name("key");
        }
        actions = {
            set_hot;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        counters = hotkey_counter;
        size = HOT_KEYS;
    }

    apply {  // meta.hot: false from the ingress's start (the top level), at most one lookup sets it
#ifdef KVS_SPINE
        meta.rotate = 0;
#endif
        hotkey_table.apply();
        if (meta.hot && hdr.kvs.op != KvsOp.GET) {
            hotkey_writes.count(meta.slot);
        }
    }
}

#endif  // KVSWITCH_HOT_KEYS_TNA_P4

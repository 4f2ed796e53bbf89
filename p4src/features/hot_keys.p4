// Hot-key lookups.
//
// HotkeyTable (requests GET/SET/DEL only): exact on the 16-byte key -> `set_hot(slot, n)`, slot in
// 0 .. HOT_KEYS-1 and n = number of servers holding the key, origin included (ordinals 0 .. n-1 of
// ServermapTable, ordinal 0 = origin). Its direct counter counts the queries of each hot key (the
// controller reads and resets it every period); `hotkey_writes[slot]` counts the SETs and DELs
// among them, so the controller knows each hot key's own write ratio. A miss sends the request to
// HashPipe.
//
// KeyindexTable (replies, CONFIRM, SYNC, SYNC_DONE): exact on the key ->
// `set_key_index(slot, base, floor)`, base = the key's first index in valid_ver (valid_ver[base +
// offset of server s] is replica s's confirmed version), floor = a version at least as new as any
// handed out before the key's holders last changed (the controller reads global_ver): confirms of
// versions <= floor are ignored (rule 3). Kept apart from HotkeyTable so that maintenance traffic
// does not count as load.
//
// Controller contract: for every hot key, the same slot in both tables; base ranges of different
// keys do not overlap and base + MAX_SERVERS <= HOT_KEYS * MAX_SERVERS (slot * MAX_SERVERS works).
#ifndef KVSWITCH_HOT_KEYS_P4
#define KVSWITCH_HOT_KEYS_P4

control HotKeys(in headers_t hdr, inout kvs_meta_t meta) {
    @name("hotkey_counter")
    direct_counter(CounterType.packets_and_bytes) hotkey_counter;
    @name("hotkey_writes")
    counter(HOT_KEYS, CounterType.packets) hotkey_writes;

    @name("set_hot")
    action set_hot(slot_t slot, ordinal_t n) {
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

    apply {
        meta.hot = false;
        hotkey_table.apply();
        if (meta.hot && hdr.kvs.op != KvsOp.GET) {
            hotkey_writes.count((bit<32>)meta.slot);
        }
    }
}

control KeyIndex(in headers_t hdr, inout kvs_meta_t meta) {
    @name("set_key_index")
    action set_key_index(slot_t slot, bit<32> base, bit<32> floor) {
        meta.hot = true;
        meta.slot = slot;
        meta.base = base;
        meta.floor = floor;
    }

    @name("KeyindexTable")
    table keyindex_table {
        key = {
            hdr.kvs.key: exact @name("key");
        }
        actions = {
            set_key_index;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = HOT_KEYS;
    }

    apply {
        meta.hot = false;
        keyindex_table.apply();
    }
}

#endif  // KVSWITCH_HOT_KEYS_P4

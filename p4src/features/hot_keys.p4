// Hot-key lookups.
//
// HotkeyTable (requests GET/SET/DEL only): exact on the 16-byte key -> `set_hot(slot, n)`, slot in
// 0 .. HOT_KEYS-1 and n = number of servers holding the key, origin included (ordinals 0 .. n-1 of
// ServermapTable, ordinal 0 = origin). Its direct counter counts the queries of each hot key (the
// controller reads and resets it every period); `hotkey_writes[slot]` counts the SETs and DELs
// among them, so the controller knows each hot key's own write ratio. A miss sends the request to
// HashPipe. A spine's action is `set_hot(slot, n, rotate)`: rotate = 1 when the key's writes
// rotate over its holders (docs/protocol.md F7; replicas.p4), 0 for rule 1.
//
// KeyindexTable, the same keys for replies and maintenance, is in key_index.p4.
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
#ifdef KVS_SPINE
    action set_hot(slot_t slot, ordinal_t n, bit<1> rotate) {
        meta.rotate = rotate;  // a spine's: the key's writes rotate (F7, replicas.p4)
#else
    action set_hot(slot_t slot, ordinal_t n) {
#endif
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
            hotkey_writes.count((bit<32>)meta.slot);
        }
    }
}

#endif  // KVSWITCH_HOT_KEYS_P4

// KeyindexTable (replies, CONFIRM, SYNC, SYNC_DONE): exact on the key ->
// `set_key_index(slot, base, floor)`, base = the key's first index in valid_ver (valid_ver[base +
// offset of server s] is replica s's confirmed version), floor = a version at least as new as any
// handed out before the key's holders last changed (the controller reads global_ver): confirms of
// versions <= floor are ignored (rule 3). Kept apart from HotkeyTable so that maintenance traffic
// does not count as load.
//
// Controller contract: for every hot key, the same slot as in HotkeyTable (hot_keys.p4); base
// ranges of different keys do not overlap and base + MAX_SERVERS <= HOT_KEYS * MAX_SERVERS (slot *
// MAX_SERVERS works). No target-specific extern: the v1model and TNA builds share this file.
#ifndef KVSWITCH_KEY_INDEX_P4
#define KVSWITCH_KEY_INDEX_P4

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

    apply {  // meta.hot: false from the ingress's start (the top level), at most one lookup sets it
        keyindex_table.apply();
    }
}

#endif  // KVSWITCH_KEY_INDEX_P4

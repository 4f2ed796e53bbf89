// What one HashPipe stage hands the next (both builds: hashpipe.p4, hashpipe_tna.p4).
#ifndef KVSWITCH_HASHPIPE_CARRY_P4
#define KVSWITCH_HASHPIPE_CARRY_P4

struct hp_carry_t {
    bool active;
    kvs_key_t key;
    bit<32> cnt;
}

#endif  // KVSWITCH_HASHPIPE_CARRY_P4

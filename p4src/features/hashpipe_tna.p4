// HashPipe, TNA build: the stage of hashpipe.p4 (read its header) with each of the five registers
// reached by one RegisterAction per packet, d stages as d instances (hashpipe_stages.p4).
//
// The index is the v1model build's: CRC-32 (a CRCPolynomial with the parameters of v1model's
// crc32) of {seed_s, key}, mod w. Tofino's hash units give a power-of-two slice, not a remainder
// mod an odd w: docs/tofino.md says what a hardware build changes.
//
// Stage 0 (always insert) is exact: the key words are swapped in unconditionally (writing the key
// that is already there changes nothing), then the count adds on a match or restarts at 1.
// A later stage must decide on the count before it writes the key, and must know whether the key
// matches before it updates the count: with one access per register that order is impossible, so
// the count goes first and decides as if the keys differed (take the slot if it is empty or the
// carried count is larger). It departs from hashpipe.p4 only when a carried key meets its own copy
// in a later stage: v1model merges the two counts, this build keeps the larger count in the slot
// and carries the other copy on (docs/tofino.md, "HashPipe").
#ifndef KVSWITCH_HASHPIPE_TNA_P4
#define KVSWITCH_HASHPIPE_TNA_P4

#include "hashpipe_carry.p4"

control HashPipeStage(inout hp_carry_t carry)(bit<32> seed, bool always_insert) {
    @name("hp_key0") Register<bit<32>, bit<32>>(HP_SLOTS) hp_key0;
    @name("hp_key1") Register<bit<32>, bit<32>>(HP_SLOTS) hp_key1;
    @name("hp_key2") Register<bit<32>, bit<32>>(HP_SLOTS) hp_key2;
    @name("hp_key3") Register<bit<32>, bit<32>>(HP_SLOTS) hp_key3;
    @name("hp_cnt") Register<bit<32>, bit<32>>(HP_SLOTS) hp_cnt;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, CRCPolynomial<bit<32>>(
        32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF)) index_hash;

    bool swap = false;  // PHV input of the key ALUs
    bool same = false;  // PHV input of the count ALU (stage 0)

    // stage 0: the count after the key words, exact
    RegisterAction<bit<32>, bit<32>, bit<32>>(hp_cnt) cnt_insert = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            if (same) {
                value = value + carry.cnt;
            } else {
                value = carry.cnt;
            }
        }
    };
    // later stages: the count first, as if the keys differed
    RegisterAction<bit<32>, bit<32>, bit<32>>(hp_cnt) cnt_contest = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            if (value == 0 || carry.cnt > value) {
                value = carry.cnt;
            }
        }
    };
    // the key words: the old word out, the carried word in when `swap`
    RegisterAction<bit<32>, bit<32>, bit<32>>(hp_key0) key0_swap = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            if (swap) { value = carry.key[127:96]; }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(hp_key1) key1_swap = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            if (swap) { value = carry.key[95:64]; }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(hp_key2) key2_swap = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            if (swap) { value = carry.key[63:32]; }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(hp_key3) key3_swap = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            if (swap) { value = carry.key[31:0]; }
        }
    };

    apply {
        if (carry.active) {
            bit<32> idx = index_hash.get({seed, carry.key}) % (bit<32>)HP_SLOTS;
            bit<32> slot_cnt = 0;
            bool take;
            if (always_insert) {
                swap = true;
            } else {
                slot_cnt = cnt_contest.execute(idx);
                swap = slot_cnt == 0 || carry.cnt > slot_cnt;
            }
            kvs_key_t slot_key = key0_swap.execute(idx) ++ key1_swap.execute(idx)
                                 ++ key2_swap.execute(idx) ++ key3_swap.execute(idx);
            if (always_insert) {
                same = slot_key == carry.key;
                slot_cnt = cnt_insert.execute(idx);
                take = slot_cnt == 0 || !same;
            } else {
                take = swap;
            }
            if (take) {
                carry.active = slot_cnt != 0;
                carry.key = slot_key;
                carry.cnt = slot_cnt;
            } else if (always_insert) {
                carry.active = false;  // merged into the slot
            }
        }
    }
}

#include "hashpipe_stages.p4"

#endif  // KVSWITCH_HASHPIPE_TNA_P4

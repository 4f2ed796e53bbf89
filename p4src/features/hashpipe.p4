// HashPipe heavy-hitter tracker for cold keys (Sivaraman et al., SOSR'17), d = HP_STAGES stages of
// w = HP_SLOTS slots. Only requests (GET/SET/DEL) that miss HotkeyTable enter it.
//
// Stage s indexes with crc32({seed_s, key}) mod w (docs/protocol.md "HashPipe hashing"). The first
// stage always inserts the incoming key (count 1), evicting the slot's occupant into the carry; a
// later stage adds the carry to a slot holding the same key, fills an empty slot (count 0), or keeps
// the larger of the two counts and carries the other on (ties keep the slot's occupant). Whatever is
// carried out of the last stage is dropped.
//
// Registers (per stage instance, control-plane names `hp_stage<s>.hp_key0` .. `hp_key3` and
// `hp_stage<s>.hp_cnt`): the controller reads them every period as cold-key candidates and resets
// them. A key is kept as four 32-bit words, hp_key0 holding its first four bytes (bits 127:96):
// BMv2's Thrift API carries register cells as 64-bit signed integers, so a 128-bit (or a full
// 64-bit) cell could not be read back on BMv2, whose P4Runtime server reads no registers.
#ifndef KVSWITCH_HASHPIPE_P4
#define KVSWITCH_HASHPIPE_P4

#include "hashpipe_carry.p4"

control HashPipeStage(inout hp_carry_t carry)(bit<32> seed, bool always_insert) {
    @name("hp_key0") register<bit<32>>(HP_SLOTS) hp_key0;
    @name("hp_key1") register<bit<32>>(HP_SLOTS) hp_key1;
    @name("hp_key2") register<bit<32>>(HP_SLOTS) hp_key2;
    @name("hp_key3") register<bit<32>>(HP_SLOTS) hp_key3;
    @name("hp_cnt") register<bit<32>>(HP_SLOTS) hp_cnt;

    apply {
        if (carry.active) {
            bit<32> idx;
            hash(idx, HashAlgorithm.crc32, 32w0, {seed, carry.key}, (bit<32>)HP_SLOTS);
            bit<32> w0;
            bit<32> w1;
            bit<32> w2;
            bit<32> w3;
            bit<32> slot_cnt;
            hp_key0.read(w0, idx);
            hp_key1.read(w1, idx);
            hp_key2.read(w2, idx);
            hp_key3.read(w3, idx);
            hp_cnt.read(slot_cnt, idx);
            kvs_key_t slot_key = w0 ++ w1 ++ w2 ++ w3;
            // Empty slot, or the new key evicts the occupant: the carried key goes in.
            bool take = slot_cnt == 0 || (slot_key != carry.key
                                          && (always_insert || carry.cnt > slot_cnt));
            if (take) {
                hp_key0.write(idx, carry.key[127:96]);
                hp_key1.write(idx, carry.key[95:64]);
                hp_key2.write(idx, carry.key[63:32]);
                hp_key3.write(idx, carry.key[31:0]);
                hp_cnt.write(idx, carry.cnt);
                carry.active = slot_cnt != 0;
                carry.key = slot_key;
                carry.cnt = slot_cnt;
            } else if (slot_key == carry.key) {
                hp_cnt.write(idx, slot_cnt + carry.cnt);
                carry.active = false;
            }
        }
    }
}

#include "hashpipe_stages.p4"

#endif  // KVSWITCH_HASHPIPE_P4

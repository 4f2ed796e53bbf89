// HashPipe heavy-hitter tracker for cold keys (Sivaraman et al., SOSR'17), d = HP_STAGES stages of
// w = HP_SLOTS slots. It runs in the egress, in both builds (Tofino's ingress has no stages to
// spare: docs/tofino.md "HashPipe in the egress"), on the packets the ingress marks
// (kvs_meta_t.hp_count, bridged on TNA): a request (GET/SET/DEL) that passed KvsCheck and Trust,
// of a key that missed HotkeyTable, whose origin is not down, the switch's own (not steered). A
// packet the ingress drops never reaches the egress, so a request Forwarding drops (TTL <= 1, no
// route to its address) is not counted. Only hot keys take a multicast group: a marked packet
// has one copy, counted once.
//
// Stage s indexes with crc32({seed_s, key, s 32-bit zero words}) mod w, w a power of two
// (hashpipe_stages.p4; docs/protocol.md "HashPipe hashing"). The first
// stage always inserts the incoming key (count 1), evicting the slot's occupant into the carry; a
// later stage adds the carry to a slot holding the same key, fills an empty slot (count 0), or keeps
// the larger of the two counts and carries the other on (ties keep the slot's occupant). Whatever is
// carried out of the last stage is dropped. "The same key" is the full key in the first stage and
// the key's 32-bit tag in later stages (hashpipe_carry.p4): the rule the TNA build
// (hashpipe_tna.p4) can run in a stateful ALU, so that both builds end with the same registers.
// Two keys with one tag (probability 2^-31 per comparison) merge into the occupant's slot.
//
// Registers (per stage instance, control-plane names `hp_stage<s>.hp_key0` .. `hp_key3` and
// `hp_stage<s>.hp_cnt`): the controller reads them every period as cold-key candidates and resets
// them. A key is kept as four 32-bit words, hp_key0 holding its first four bytes (bits 127:96):
// BMv2's Thrift API carries register cells as 64-bit signed integers, so a 128-bit (or a full
// 64-bit) cell could not be read back on BMv2, whose P4Runtime server reads no registers.
#ifndef KVSWITCH_HASHPIPE_P4
#define KVSWITCH_HASHPIPE_P4

#include "hashpipe_carry.p4"

control HashPipeStage(inout hp_carry_t carry, in bit<32> idx)(bool always_insert) {
    @name("hp_key0") register<bit<32>>(HP_SLOTS) hp_key0;
    @name("hp_key1") register<bit<32>>(HP_SLOTS) hp_key1;
    @name("hp_key2") register<bit<32>>(HP_SLOTS) hp_key2;
    @name("hp_key3") register<bit<32>>(HP_SLOTS) hp_key3;
    @name("hp_cnt") register<bit<32>>(HP_SLOTS) hp_cnt;

    apply {
        if (carry.active) {
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
            bool same;
            if (always_insert) {
                same = slot_key == carry.key;
            } else {
                bit<32> slot_tag;
                bit<32> carry_tag;
                hash(slot_tag, HashAlgorithm.crc32, 32w0, HP_TAG_INPUT(slot_key), 64w0x100000000);
                hash(carry_tag, HashAlgorithm.crc32, 32w0, HP_TAG_INPUT(carry.key),
                     64w0x100000000);
                same = (slot_tag | 1) == (carry_tag | 1);
            }
            // Empty slot, or the new key evicts the occupant: the carried key goes in.
            bool take = slot_cnt == 0 || (!same && (always_insert || carry.cnt > slot_cnt));
            if (take) {
                hp_key0.write(idx, carry.key[127:96]);
                hp_key1.write(idx, carry.key[95:64]);
                hp_key2.write(idx, carry.key[63:32]);
                hp_key3.write(idx, carry.key[31:0]);
                hp_cnt.write(idx, carry.cnt);
                carry.active = slot_cnt != 0;
                carry.key = slot_key;
                carry.cnt = slot_cnt;
            } else if (same) {
                hp_cnt.write(idx, slot_cnt + carry.cnt);
                carry.active = false;
            }
        }
    }
}

// one control for the first stage and the later ones (hashpipe_stages.p4)
#define HP_FIRST_STAGE HashPipeStage(true)
#define HP_LATER_STAGE HashPipeStage(false)
#define HP_INDEX_T bit<32>
#define HP_INDEX_HASH(name)
#define HP_INDEX(name, idx, ...) \
    hash(idx, HashAlgorithm.crc32, 32w0, {__VA_ARGS__}, (bit<32>)HP_SLOTS)
#include "hashpipe_stages.p4"

#endif  // KVSWITCH_HASHPIPE_P4

// HashPipe, TNA build: the stages of hashpipe.p4 (read its header) with every register reached by
// one RegisterAction per packet, d stages as d instances (hashpipe_stages.p4). Both builds end with
// the same registers on the same traces (tests/dataplane/test_builds_agree.py).
//
// The index is the v1model build's (hashpipe_stages.p4): CRC-32 (a CRCPolynomial with the
// parameters of v1model's crc32) of {seed_s, key, s 32-bit zero words}, its low log2(w) bits (w a
// power of two: Tofino's hash units give a slice, not a remainder).
//
// The first stage (HashPipeFirst, always insert): the key words are swapped in unconditionally
// (writing the key that is already there changes nothing), then the count adds on a match of the
// full key or restarts at the carried count.
//
// A later stage (HashPipeStage) must know whether the carried key is the slot's before it updates
// the count, and the count before it writes the key. With the key in four registers that is two
// orders at once, so the decision is made first, in one more register: hp_tag, a pair
// {lo: the occupant's tag (hashpipe_carry.p4), hi: a copy of its count}, one stateful ALU in paired
// mode. It compares lo with the carried key's tag (cmplo) and hi with the carried count (cmphi):
//   lo == tag            merge: hi += c
//   else hi < c          take:  {lo, hi} = {tag, c}  (an empty slot, {0, 0}, always takes: c >= 1
//                                                     and a tag is never 0)
//   else                 keep
// and outputs its 4-bit predicate. The four key words then swap iff "take" (returning the old
// words) and hp_cnt adds on "merge", restarts at c on "take" returning the old count, or is read.
// hp_tag is the TNA build's only register that v1model has not (v1model hashes the stored key
// words instead); the controller resets it with the stage's other registers.
#ifndef KVSWITCH_HASHPIPE_TNA_P4
#define KVSWITCH_HASHPIPE_TNA_P4

#include "hashpipe_carry.p4"

// the predicate of hp_tag's stateful ALU: 1 << (cmplo + 2 * cmphi)
const bit<32> HP_PRED_TAKE = 4;  // cmphi alone: another key, and the carried count is larger
const bit<32> HP_PRED_OWN = 0b1010;  // cmplo, with or without cmphi: the slot's tag is the key's

struct hp_tag_t {
    bit<32> lo;  // the occupant's tag; 0: empty
    bit<32> hi;  // the occupant's count (= hp_cnt)
}

// The key words, the same in both kinds of stage: register REG (control-plane name NAME) holds
// bits HI:LO of the key; its RegisterAction ACT returns the old word and writes the carried one
// when `swap`.
#define HP_KEY_WORD(REG, NAME, ACT, HI, LO)                                  \
    @name(NAME) Register<bit<32>, bit<32>>(HP_SLOTS) REG;                    \
    RegisterAction<bit<32>, bit<32>, bit<32>>(REG) ACT = {                   \
        void apply(inout bit<32> value, out bit<32> rv) {                    \
            rv = value;                                                      \
            if (swap) { value = carry.key[HI:LO]; }                          \
        }                                                                    \
    };
#define HP_KEY_WORDS                                                         \
    bool swap = false;                                                       \
    HP_KEY_WORD(hp_key0, "hp_key0", key0_swap, 127, 96)                      \
    HP_KEY_WORD(hp_key1, "hp_key1", key1_swap, 95, 64)                       \
    HP_KEY_WORD(hp_key2, "hp_key2", key2_swap, 63, 32)                       \
    HP_KEY_WORD(hp_key3, "hp_key3", key3_swap, 31, 0)
// the slot's key in slot_key, every word swapped (or read) once; one execute per statement
// (bf-p4c: "too many side-effect in one expression" for the four in one concatenation)
#define HP_SWAP_KEY(idx)                                   \
    bit<32> slot_w0 = key0_swap.execute(idx);              \
    bit<32> slot_w1 = key1_swap.execute(idx);              \
    bit<32> slot_w2 = key2_swap.execute(idx);              \
    bit<32> slot_w3 = key3_swap.execute(idx);              \
    kvs_key_t slot_key = slot_w0 ++ slot_w1 ++ slot_w2 ++ slot_w3;

// A bool a stateful ALU reads, or the carry takes, is set in an if's branches (Tofino: a PHV
// field, not a comparison's result), and a gateway compares at most 4 bytes: the key word by word.
#define HP_SAME_KEY(same)                                  \
    same = false;                                          \
    if (slot_w0 == carry.key[127:96]) {                    \
        if (slot_w1 == carry.key[95:64]) {                 \
            if (slot_w2 == carry.key[63:32]) {             \
                if (slot_w3 == carry.key[31:0]) {          \
                    same = true;                           \
                }                                          \
            }                                              \
        }                                                  \
    }
#define HP_CARRY_ON(cnt)                                   \
    carry.active = true;                                   \
    if (cnt == 0) {                                        \
        carry.active = false;                              \
    }

control HashPipeFirst(inout hp_carry_t carry, in bit<32> idx) {
    HP_KEY_WORDS
    @name("hp_cnt") Register<bit<32>, bit<32>>(HP_SLOTS) hp_cnt;
    bool same = false;  // PHV input of the count ALU

    // the count after the key words, exact
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

    apply {
        if (carry.active) {
            swap = true;
            HP_SWAP_KEY(idx)
            HP_SAME_KEY(same)
            bit<32> slot_cnt = cnt_insert.execute(idx);
            if (slot_cnt == 0 || !same) {
                HP_CARRY_ON(slot_cnt)
                carry.key = slot_key;
                carry.cnt = slot_cnt;
            } else {
                carry.active = false;  // merged into the slot
            }
        }
    }
}

control HashPipeStage(inout hp_carry_t carry, in bit<32> idx) {
    HP_KEY_WORDS
    @name("hp_cnt") Register<bit<32>, bit<32>>(HP_SLOTS) hp_cnt;
    @name("hp_tag") Register<hp_tag_t, bit<32>>(HP_SLOTS) hp_tag;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, CRCPolynomial<bit<32>>(
        32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF)) tag_hash;
    bit<32> tag = 0;     // PHV input of the tag ALU
    bool merge = false;  // the count's path

    // the decision: one stateful ALU in paired mode, two conditions, the predicate out
    RegisterAction<hp_tag_t, bit<32>, bit<32>>(hp_tag) tag_decide = {
        void apply(inout hp_tag_t value, out bit<32> rv) {
            bool own = value.lo == tag;
            bool larger = value.hi < carry.cnt;
            rv = this.predicate(own, larger);
            if (own) {
                value.hi = value.hi + carry.cnt;
            } else if (larger) {
                value.lo = tag;
                value.hi = carry.cnt;
            }
        }
    };
    // the count: add on a merge, take the carried count on a swap, else read. Three actions on
    // exclusive paths: a stateful ALU takes at most two PHV inputs (here carry.cnt)
    RegisterAction<bit<32>, bit<32>, bit<32>>(hp_cnt) cnt_merge = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = value + carry.cnt;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(hp_cnt) cnt_take = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = carry.cnt;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(hp_cnt) cnt_read = {
        void apply(inout bit<32> value, out bit<32> rv) { rv = value; }
    };

    apply {
        if (carry.active) {
            tag = tag_hash.get(HP_TAG_INPUT(carry.key)) | 1;
            bit<32> decision = tag_decide.execute(idx);
            merge = false;
            if ((decision & HP_PRED_OWN) != 0) {
                merge = true;
            }
            swap = false;
            if (decision == HP_PRED_TAKE) {
                swap = true;
            }
            HP_SWAP_KEY(idx)
            bit<32> slot_cnt = 0;
            if (merge) {
                slot_cnt = cnt_merge.execute(idx);
            } else if (swap) {
                slot_cnt = cnt_take.execute(idx);
            } else {
                slot_cnt = cnt_read.execute(idx);
            }
            if (swap) {
                HP_CARRY_ON(slot_cnt)
                carry.key = slot_key;
                carry.cnt = slot_cnt;
            } else if (merge) {
                carry.active = false;  // merged into the slot
            }
        }
    }
}

#define HP_FIRST_STAGE HashPipeFirst()
#define HP_LATER_STAGE HashPipeStage()
#define HP_INDEX_HASH(name)                                                  \
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, CRCPolynomial<bit<32>>(            \
        32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF)) name;
#define HP_INDEX(name, idx, ...) idx = name.get({__VA_ARGS__}) & (bit<32>)(HP_SLOTS - 1)
#include "hashpipe_stages.p4"

#endif  // KVSWITCH_HASHPIPE_TNA_P4

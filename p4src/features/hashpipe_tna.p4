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
// full key or restarts at the carried count, returning the occupant's.
//
// A later stage (HashPipeStage) must know whether the carried key is the slot's before it updates
// the count, and the count before it writes the key. With the key in four registers that is two
// orders at once, so the decision is made first, in one more register: hp_tag, a pair
// {lo: the occupant's tag (hashpipe_carry.p4), hi: a copy of its count}, one stateful ALU in paired
// mode. It compares lo with the carried key's tag (cmplo) and hi with the carried count (cmphi):
//   lo == tag            merge: hi += c
//   else hi < c          take:  {lo, hi} = {tag, c}  (an empty slot, {0, 0}, takes any c >= 1: a
//                                                     tag is never 0)
//   else                 keep
// and outputs its 4-bit predicate. In the branch of "take" the four key words swap (returning the
// old words into the carry) and hp_cnt restarts at c (returning the old count); in the branch of
// "merge" hp_cnt adds c; "keep" reaches neither.
// hp_tag is the TNA build's only register that v1model has not (v1model hashes the stored key
// words instead); the controller resets it with the stage's other registers.
//
// Tofino's stages (docs/tofino.md "Down to 26 stages"): a stage's index and tag are hashed from
// the carried key straight into PHV (the index is the hash unit's output, of the registers' index
// type, no cast between), the decision's stateful ALU reads them one stage later, and the key
// words and the count hang off the decision's gateway, with no bool between: four MAU stages a
// later HashPipe stage, the count in the fourth (a stage holds 4 stateful ALUs). An occupant
// carried out of an empty slot (count 0) goes on where v1model stops: it merges 0 or loses every
// comparison, so the registers stay the same (test_builds_agree.py).
#ifndef KVSWITCH_HASHPIPE_TNA_P4
#define KVSWITCH_HASHPIPE_TNA_P4

#include "hashpipe_carry.p4"

// a slot's index: the hash unit's log2(w) low bits, the registers' index type (no cast between)
#define HP_INDEX_T bit<HP_SLOT_BITS>
#if HP_SLOTS < 2
#error "the TNA build's HashPipe needs at least 2 slots per stage (HP_SLOTS)"
#endif

// the predicate of hp_tag's stateful ALU: 1 << (cmplo + 2 * cmphi)
const bit<32> HP_PRED_TAKE = 4;  // cmphi alone: another key, and the carried count is larger
const bit<32> HP_PRED_OWN = 0b1010;  // cmplo, with or without cmphi: the slot's tag is the key's

struct hp_tag_t {
    bit<32> lo;  // the occupant's tag; 0: empty
    bit<32> hi;  // the occupant's count (= hp_cnt)
}

// A slot's registers, the same in both kinds of stage. The key words: register REG (control-plane name NAME) holds
// bits HI:LO of the key; its RegisterAction ACT returns the old word and writes the carried one.
// It runs only where the carried key goes in (a branch of the decision, not a PHV input). The
// count, hp_cnt: adds the carried count on a merge, or takes it and returns the occupant's.
#define HP_KEY_WORD(REG, NAME, ACT, HI, LO)                                  \
    @name(NAME) Register<bit<32>, HP_INDEX_T>(HP_SLOTS) REG;                 \
    RegisterAction<bit<32>, HP_INDEX_T, bit<32>>(REG) ACT = {                \
        void apply(inout bit<32> value, out bit<32> rv) {                    \
            rv = value;                                                      \
            value = carry.key[HI:LO];                                        \
        }                                                                    \
    };
#define HP_SLOT_REGISTERS                                                         \
    HP_KEY_WORD(hp_key0, "hp_key0", key0_swap, 127, 96)                      \
    HP_KEY_WORD(hp_key1, "hp_key1", key1_swap, 95, 64)                       \
    HP_KEY_WORD(hp_key2, "hp_key2", key2_swap, 63, 32)                       \
    HP_KEY_WORD(hp_key3, "hp_key3", key3_swap, 31, 0)                        \
    @name("hp_cnt") Register<bit<32>, HP_INDEX_T>(HP_SLOTS) hp_cnt;          \
    RegisterAction<bit<32>, HP_INDEX_T, bit<32>>(hp_cnt) cnt_merge = {       \
        void apply(inout bit<32> value) {                                    \
            value = value + carry.cnt;                                       \
        }                                                                    \
    };                                                                       \
    RegisterAction<bit<32>, HP_INDEX_T, bit<32>>(hp_cnt) cnt_take = {        \
        void apply(inout bit<32> value, out bit<32> rv) {                    \
            rv = value;                                                      \
            value = carry.cnt;                                               \
        }                                                                    \
    };

control HashPipeFirst(inout hp_carry_t carry, in HP_INDEX_T idx) {
    HP_SLOT_REGISTERS

    apply {
        if (carry.active) {
            bit<32> w0 = key0_swap.execute(idx);  // (one execute per statement: bf-p4c)
            bit<32> w1 = key1_swap.execute(idx);
            bit<32> w2 = key2_swap.execute(idx);
            bit<32> w3 = key3_swap.execute(idx);
            // the key word by word (a gateway compares at most 4 bytes), into a bool set in the
            // ifs' branches (Tofino: a PHV field, not a comparison's result)
            bool same = false;
            if (w0 == carry.key[127:96]) {
                if (w1 == carry.key[95:64]) {
                    if (w2 == carry.key[63:32]) {
                        if (w3 == carry.key[31:0]) {
                            same = true;
                        }
                    }
                }
            }
            if (same) {
                cnt_merge.execute(idx);
                carry.active = false;  // merged into the slot
            } else {
                carry.cnt = cnt_take.execute(idx);
                carry.key = w0 ++ w1 ++ w2 ++ w3;
            }
        }
    }
}

control HashPipeStage(inout hp_carry_t carry, in HP_INDEX_T idx) {
    HP_SLOT_REGISTERS
    @name("hp_tag") Register<hp_tag_t, HP_INDEX_T>(HP_SLOTS) hp_tag;
    KVS_CRC32(bit<32>) tag_hash;
    // the decision: one stateful ALU in paired mode, two conditions, the predicate out
    RegisterAction<hp_tag_t, HP_INDEX_T, bit<32>>(hp_tag) tag_decide = {
        void apply(inout hp_tag_t value, out bit<32> rv) {
            bool own = value.lo == carry.tag;
            bool larger = value.hi < carry.cnt;
            rv = this.predicate(own, larger);
            if (own) {
                value.hi = value.hi + carry.cnt;
            } else if (larger) {
                value.lo = carry.tag;
                value.hi = carry.cnt;
            }
        }
    };

    apply {
        if (carry.active) {
            carry.tag[31:1] = tag_hash.get(HP_TAG_INPUT(carry.key))[31:1];  // | 1: the carry's
            bit<32> decision = tag_decide.execute(idx);
            if (decision == HP_PRED_TAKE) {
                carry.key[127:96] = key0_swap.execute(idx);
                carry.key[95:64] = key1_swap.execute(idx);
                carry.key[63:32] = key2_swap.execute(idx);
                carry.key[31:0] = key3_swap.execute(idx);
                carry.cnt = cnt_take.execute(idx);
            } else if ((decision & HP_PRED_OWN) != 0) {
                cnt_merge.execute(idx);
                carry.active = false;  // merged into the slot
            }
        }
    }
}

#define HP_FIRST_STAGE HashPipeFirst()
#define HP_LATER_STAGE HashPipeStage()
#define HP_INDEX_HASH(name) KVS_CRC32(HP_INDEX_T) name;
#define HP_INDEX(name, idx, ...) idx = name.get({__VA_ARGS__})
#include "hashpipe_stages.p4"

#endif  // KVSWITCH_HASHPIPE_TNA_P4

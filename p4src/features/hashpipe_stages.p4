// HashPipe: d = HP_STAGES stage instances, control-plane names hp_stage<s>. The build (hashpipe.p4
// for v1model, hashpipe_tna.p4 for TNA, each included before this file) defines what a first and a
// later stage instantiate: HP_FIRST_STAGE, HP_LATER_STAGE (on TNA two controls: a later stage has
// one register more), and how a stage's index is hashed: HP_INDEX_T is its type (bit<32> on
// v1model, log2(w) bits on TNA), HP_INDEX_HASH(name) declares a hash unit (TNA; nothing on
// v1model), HP_INDEX(name, idx, fields...) sets idx to the CRC-32 of the fields mod w. Each stage
// has its own index (Tofino: one field reused would order the stages' hashes after the previous
// stage's count).
//
// Stage s's index (docs/protocol.md "HashPipe hashing"): crc32({seed_s, key, s 32-bit zero
// words}) mod w, w = HP_SLOTS a power of two, i.e. the CRC's low log2(w) bits. CRC-32 is affine,
// so the seeds alone only add a constant per stage and keys colliding in one stage would collide
// in all (shared/sizes.p4). The zero words multiply the key's CRC state by x^(32 s) mod the
// polynomial: a different linear map per stage, whose low bits are pairwise independent of the
// other stages' for w up to 2^14 (tests/bench/test_model.py). A zero byte per stage would leave
// two stages only 8 independent bits, a 16-bit word co-collides up to 3.7 times more often than
// independent hashes on consecutive key ids (docs/tofino.md). The index is computed here, between
// the stages, from the key the previous stage carries on.
#ifndef KVSWITCH_HASHPIPE_STAGES_P4
#define KVSWITCH_HASHPIPE_STAGES_P4

// `count`: whether the packet is counted (the ingress's mark). It starts the carry rather than
// gating an if around the stages: on Tofino 1 the tables after an if whose branch spans many
// stages wait for all of them, and the egress's own tables would follow HashPipe's twelve
// (docs/tofino.md "The egress in 11 stages"); each stage is gated on carry.active already.
control HashPipe(in kvs_key_t key, in bool count) {
    HP_FIRST_STAGE hp_stage0;
    HP_INDEX_HASH(index_hash0)
#if HP_STAGES > 1
    HP_LATER_STAGE hp_stage1;
    HP_INDEX_HASH(index_hash1)
#endif
#if HP_STAGES > 2
    HP_LATER_STAGE hp_stage2;
    HP_INDEX_HASH(index_hash2)
#endif
#if HP_STAGES > 3
    HP_LATER_STAGE hp_stage3;
    HP_INDEX_HASH(index_hash3)
#endif
#if HP_STAGES > 4
    HP_LATER_STAGE hp_stage4;
    HP_INDEX_HASH(index_hash4)
#endif
#if HP_STAGES > 5
    HP_LATER_STAGE hp_stage5;
    HP_INDEX_HASH(index_hash5)
#endif
#if HP_STAGES > 6
    HP_LATER_STAGE hp_stage6;
    HP_INDEX_HASH(index_hash6)
#endif
#if HP_STAGES > 7
    HP_LATER_STAGE hp_stage7;
    HP_INDEX_HASH(index_hash7)
#endif

    apply {
        hp_carry_t carry = {count, key, 1, 1};
        HP_INDEX_T idx0;
        HP_INDEX(index_hash0, idx0, HP_SEED_0, key);  // (the same key: no copy to wait for)
        hp_stage0.apply(carry, idx0);
#if HP_STAGES > 1
        HP_INDEX_T idx1;
        HP_INDEX(index_hash1, idx1, HP_SEED_1, carry.key, 32w0);
        hp_stage1.apply(carry, idx1);
#endif
#if HP_STAGES > 2
        HP_INDEX_T idx2;
        HP_INDEX(index_hash2, idx2, HP_SEED_2, carry.key, 64w0);
        hp_stage2.apply(carry, idx2);
#endif
#if HP_STAGES > 3
        HP_INDEX_T idx3;
        HP_INDEX(index_hash3, idx3, HP_SEED_3, carry.key, 96w0);
        hp_stage3.apply(carry, idx3);
#endif
#if HP_STAGES > 4
        HP_INDEX_T idx4;
        HP_INDEX(index_hash4, idx4, HP_SEED_4, carry.key, 128w0);
        hp_stage4.apply(carry, idx4);
#endif
#if HP_STAGES > 5
        HP_INDEX_T idx5;
        HP_INDEX(index_hash5, idx5, HP_SEED_5, carry.key, 160w0);
        hp_stage5.apply(carry, idx5);
#endif
#if HP_STAGES > 6
        HP_INDEX_T idx6;
        HP_INDEX(index_hash6, idx6, HP_SEED_6, carry.key, 192w0);
        hp_stage6.apply(carry, idx6);
#endif
#if HP_STAGES > 7
        HP_INDEX_T idx7;
        HP_INDEX(index_hash7, idx7, HP_SEED_7, carry.key, 224w0);
        hp_stage7.apply(carry, idx7);
#endif
    }
}

#endif  // KVSWITCH_HASHPIPE_STAGES_P4

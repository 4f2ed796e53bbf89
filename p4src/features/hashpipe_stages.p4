// HashPipe: d = HP_STAGES instances of the build's HashPipeStage (hashpipe.p4 for v1model,
// hashpipe_tna.p4 for TNA, each included before this file), control-plane names hp_stage<s>.
#ifndef KVSWITCH_HASHPIPE_STAGES_P4
#define KVSWITCH_HASHPIPE_STAGES_P4

control HashPipe(in kvs_key_t key) {
    HashPipeStage(HP_SEED_0, true) hp_stage0;
#if HP_STAGES > 1
    HashPipeStage(HP_SEED_1, false) hp_stage1;
#endif
#if HP_STAGES > 2
    HashPipeStage(HP_SEED_2, false) hp_stage2;
#endif
#if HP_STAGES > 3
    HashPipeStage(HP_SEED_3, false) hp_stage3;
#endif
#if HP_STAGES > 4
    HashPipeStage(HP_SEED_4, false) hp_stage4;
#endif
#if HP_STAGES > 5
    HashPipeStage(HP_SEED_5, false) hp_stage5;
#endif
#if HP_STAGES > 6
    HashPipeStage(HP_SEED_6, false) hp_stage6;
#endif
#if HP_STAGES > 7
    HashPipeStage(HP_SEED_7, false) hp_stage7;
#endif

    apply {
        hp_carry_t carry = {true, key, 1};
        hp_stage0.apply(carry);
#if HP_STAGES > 1
        hp_stage1.apply(carry);
#endif
#if HP_STAGES > 2
        hp_stage2.apply(carry);
#endif
#if HP_STAGES > 3
        hp_stage3.apply(carry);
#endif
#if HP_STAGES > 4
        hp_stage4.apply(carry);
#endif
#if HP_STAGES > 5
        hp_stage5.apply(carry);
#endif
#if HP_STAGES > 6
        hp_stage6.apply(carry);
#endif
#if HP_STAGES > 7
        hp_stage7.apply(carry);
#endif
    }
}

#endif  // KVSWITCH_HASHPIPE_STAGES_P4

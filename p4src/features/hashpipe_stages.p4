// HashPipe: d = HP_STAGES stage instances, control-plane names hp_stage<s>. The build (hashpipe.p4
// for v1model, hashpipe_tna.p4 for TNA, each included before this file) defines what a first and a
// later stage instantiate: HP_FIRST_STAGE(seed), HP_LATER_STAGE(seed) (on TNA two controls: a
// later stage has one register more).
#ifndef KVSWITCH_HASHPIPE_STAGES_P4
#define KVSWITCH_HASHPIPE_STAGES_P4

control HashPipe(in kvs_key_t key) {
    HP_FIRST_STAGE(HP_SEED_0) hp_stage0;
#if HP_STAGES > 1
    HP_LATER_STAGE(HP_SEED_1) hp_stage1;
#endif
#if HP_STAGES > 2
    HP_LATER_STAGE(HP_SEED_2) hp_stage2;
#endif
#if HP_STAGES > 3
    HP_LATER_STAGE(HP_SEED_3) hp_stage3;
#endif
#if HP_STAGES > 4
    HP_LATER_STAGE(HP_SEED_4) hp_stage4;
#endif
#if HP_STAGES > 5
    HP_LATER_STAGE(HP_SEED_5) hp_stage5;
#endif
#if HP_STAGES > 6
    HP_LATER_STAGE(HP_SEED_6) hp_stage6;
#endif
#if HP_STAGES > 7
    HP_LATER_STAGE(HP_SEED_7) hp_stage7;
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

// What one HashPipe stage hands the next, and the key tag the later stages compare (both builds:
// hashpipe.p4, hashpipe_tna.p4).
//
// A later stage merges a carried key into a slot when the slot is not empty and the two keys'
// tags are equal: tag(k) = crc32({HP_TAG_SEED, k's four 32-bit words, last word first}) | 1
// (docs/protocol.md "HashPipe hashing"). A TNA stage cannot compare 128 bits in the stateful ALU
// that decides the count, but it can compare 32: the tag sits in a paired register beside a copy
// of the count. v1model hashes the slot's stored key, so both builds merge on the same rule and
// agree exactly, tag collisions included. The words go in reversed so that the tag is not a
// function of the stage indices' CRC (CRC-32 is affine: with the key's bytes in the same place
// every seed gives the same collisions); the | 1 keeps a tag from being 0, an empty slot's value.
#ifndef KVSWITCH_HASHPIPE_CARRY_P4
#define KVSWITCH_HASHPIPE_CARRY_P4

struct hp_carry_t {
    bool active;
    kvs_key_t key;
    bit<32> cnt;
    // TNA: the tag a later stage compares (its bits 31:1 hashed there; bit 0 is the tag's | 1,
    // set once here: two writes of one field in one stage would take two). v1model hashes the
    // keys where it compares and leaves it at 1.
    bit<32> tag;
}

// the hash input of key k's tag
#define HP_TAG_INPUT(k) {HP_TAG_SEED, k[31:0], k[63:32], k[95:64], k[127:96]}

#endif  // KVSWITCH_HASHPIPE_CARRY_P4

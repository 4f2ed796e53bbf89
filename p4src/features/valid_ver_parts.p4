// valid_ver's parts (shared/sizes.p4: VALID_VER_PARTS registers of 2^VALID_VER_PART_BITS cells),
// for both builds of replicas.p4. VALID_VER_AT(vidx, OP) runs OP(register, cell) on the part that
// holds cell vidx of the controller's index space: one branch per part, chosen by the index's high
// bits (a constant comparison: a gateway on Tofino), the cell its low bits. One part: OP(valid_ver,
// vidx), the program as it was before valid_ver had parts. An index beyond the last part reaches
// no register (the controller never installs one).
#ifndef KVSWITCH_VALID_VER_PARTS_P4
#define KVSWITCH_VALID_VER_PARTS_P4

#if VALID_VER_PARTS == 1
#define VALID_VER_INDEX_W 32
#define VALID_VER_AT(vidx, OP) OP(valid_ver, vidx)
#else
#define VALID_VER_INDEX_W VALID_VER_PART_BITS
#define VALID_VER_CELL(vidx) vidx[VALID_VER_PART_BITS - 1:0]
#define VALID_VER_PART_OF(vidx) vidx[31:VALID_VER_PART_BITS]
#define VALID_VER_PART_2(vidx, OP)                                                              \
    if (VALID_VER_PART_OF(vidx) == 0) {                                                         \
        OP(valid_ver, VALID_VER_CELL(vidx))                                                     \
    } else if (VALID_VER_PART_OF(vidx) == 1) {                                                  \
        OP(valid_ver_1, VALID_VER_CELL(vidx))                                                   \
    }
#define VALID_VER_PART_3(vidx, OP)                                                              \
    VALID_VER_PART_2(vidx, OP) else if (VALID_VER_PART_OF(vidx) == 2) {                         \
        OP(valid_ver_2, VALID_VER_CELL(vidx))                                                   \
    }
#define VALID_VER_PART_4(vidx, OP)                                                              \
    VALID_VER_PART_3(vidx, OP) else if (VALID_VER_PART_OF(vidx) == 3) {                         \
        OP(valid_ver_3, VALID_VER_CELL(vidx))                                                   \
    }
#if VALID_VER_PARTS == 2
#define VALID_VER_AT(vidx, OP) VALID_VER_PART_2(vidx, OP)
#elif VALID_VER_PARTS == 3
#define VALID_VER_AT(vidx, OP) VALID_VER_PART_3(vidx, OP)
#else
#define VALID_VER_AT(vidx, OP) VALID_VER_PART_4(vidx, OP)
#endif
#endif

// VALID_VER_REGISTERS(DECLARE): DECLARE(name, size) for each part, the first one named valid_ver.
#define VALID_VER_REGISTERS_1(DECLARE) DECLARE(valid_ver, VALID_VER_SIZE_0)
#if VALID_VER_PARTS == 1
#define VALID_VER_REGISTERS(DECLARE) VALID_VER_REGISTERS_1(DECLARE)
#elif VALID_VER_PARTS == 2
#define VALID_VER_REGISTERS(DECLARE)                                                            \
    VALID_VER_REGISTERS_1(DECLARE) DECLARE(valid_ver_1, VALID_VER_SIZE_1)
#elif VALID_VER_PARTS == 3
#define VALID_VER_REGISTERS(DECLARE)                                                            \
    VALID_VER_REGISTERS_1(DECLARE) DECLARE(valid_ver_1, VALID_VER_SIZE_1)                       \
    DECLARE(valid_ver_2, VALID_VER_SIZE_2)
#else
#define VALID_VER_REGISTERS(DECLARE)                                                            \
    VALID_VER_REGISTERS_1(DECLARE) DECLARE(valid_ver_1, VALID_VER_SIZE_1)                       \
    DECLARE(valid_ver_2, VALID_VER_SIZE_2) DECLARE(valid_ver_3, VALID_VER_SIZE_3)
#endif

#endif

// The rotation's writer ordinal, TNA build (docs/protocol.md F7 R1; replicas.p4 computes it with
// v1model's hash(..., max = n)): (crc32(cid, seq) mod 256) mod n, kvswitch.consistency.rules's
// rotated_write. Tofino has no modulo: WriterTable, exact on (n, the CRC's low 8 bits), maps
// them to the ordinal with constant entries, one row of 256 per n = 1 .. MAX_HOLDERS (rounded up
// to 8; 2 048 entries at 8 holders, 16 384 at the spine's default 64: SRAM, 16-bit key, 8-bit
// datum). The entries are the program's: the controller writes none. A miss (n = 0) leaves
// ordinal 0, the origin.
#ifndef KVSWITCH_WRITER_TABLE_TNA_P4
#define KVSWITCH_WRITER_TABLE_TNA_P4

#define WRITER_ENTRY(n, h) (n, h) : set_writer(h % n);
// the 16 entries of n whose hash's high hex digit is hi (a literal pasted from two digits)
#define WRITER_16(n, hi) \
    WRITER_ENTRY(n, 0x##hi##0) WRITER_ENTRY(n, 0x##hi##1) WRITER_ENTRY(n, 0x##hi##2) \
    WRITER_ENTRY(n, 0x##hi##3) WRITER_ENTRY(n, 0x##hi##4) WRITER_ENTRY(n, 0x##hi##5) \
    WRITER_ENTRY(n, 0x##hi##6) WRITER_ENTRY(n, 0x##hi##7) WRITER_ENTRY(n, 0x##hi##8) \
    WRITER_ENTRY(n, 0x##hi##9) WRITER_ENTRY(n, 0x##hi##a) WRITER_ENTRY(n, 0x##hi##b) \
    WRITER_ENTRY(n, 0x##hi##c) WRITER_ENTRY(n, 0x##hi##d) WRITER_ENTRY(n, 0x##hi##e) \
    WRITER_ENTRY(n, 0x##hi##f)
#define WRITER_ROW(n) \
    WRITER_16(n, 0) WRITER_16(n, 1) WRITER_16(n, 2) WRITER_16(n, 3) \
    WRITER_16(n, 4) WRITER_16(n, 5) WRITER_16(n, 6) WRITER_16(n, 7) \
    WRITER_16(n, 8) WRITER_16(n, 9) WRITER_16(n, a) WRITER_16(n, b) \
    WRITER_16(n, c) WRITER_16(n, d) WRITER_16(n, e) WRITER_16(n, f)
#define WRITER_8_ROWS(r1, r2, r3, r4, r5, r6, r7, r8) \
    WRITER_ROW(r1) WRITER_ROW(r2) WRITER_ROW(r3) WRITER_ROW(r4) \
    WRITER_ROW(r5) WRITER_ROW(r6) WRITER_ROW(r7) WRITER_ROW(r8)

// rows n = 1 .. WRITER_ROWS (MAX_HOLDERS rounded up to 8; at most 255, the largest n of 8 bits)
#define WRITER_ROWS ((MAX_HOLDERS + 7) / 8 * 8)

control WriterOrdinal(in headers_t hdr, in ordinal_t n, inout ordinal_t ordinal) {
    KVS_CRC32(bit<8>) writer_crc;
    bit<8> writer_hash = 0;

    @name("set_writer")
    action set_writer(ordinal_t writer) {
        ordinal = writer;
    }

    @name("WriterTable")
    table writer_table {
        key = {
            n: exact @name("n");
            writer_hash: exact @name("hash");
        }
        actions = {
            set_writer;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = 256 * WRITER_ROWS;
        const entries = {
            WRITER_8_ROWS(1, 2, 3, 4, 5, 6, 7, 8)
#if MAX_HOLDERS > 8
            WRITER_8_ROWS(9, 10, 11, 12, 13, 14, 15, 16)
#endif
#if MAX_HOLDERS > 16
            WRITER_8_ROWS(17, 18, 19, 20, 21, 22, 23, 24)
#endif
#if MAX_HOLDERS > 24
            WRITER_8_ROWS(25, 26, 27, 28, 29, 30, 31, 32)
#endif
#if MAX_HOLDERS > 32
            WRITER_8_ROWS(33, 34, 35, 36, 37, 38, 39, 40)
#endif
#if MAX_HOLDERS > 40
            WRITER_8_ROWS(41, 42, 43, 44, 45, 46, 47, 48)
#endif
#if MAX_HOLDERS > 48
            WRITER_8_ROWS(49, 50, 51, 52, 53, 54, 55, 56)
#endif
#if MAX_HOLDERS > 56
            WRITER_8_ROWS(57, 58, 59, 60, 61, 62, 63, 64)
#endif
#if MAX_HOLDERS > 64
            WRITER_8_ROWS(65, 66, 67, 68, 69, 70, 71, 72)
#endif
#if MAX_HOLDERS > 72
            WRITER_8_ROWS(73, 74, 75, 76, 77, 78, 79, 80)
#endif
#if MAX_HOLDERS > 80
            WRITER_8_ROWS(81, 82, 83, 84, 85, 86, 87, 88)
#endif
#if MAX_HOLDERS > 88
            WRITER_8_ROWS(89, 90, 91, 92, 93, 94, 95, 96)
#endif
#if MAX_HOLDERS > 96
            WRITER_8_ROWS(97, 98, 99, 100, 101, 102, 103, 104)
#endif
#if MAX_HOLDERS > 104
            WRITER_8_ROWS(105, 106, 107, 108, 109, 110, 111, 112)
#endif
#if MAX_HOLDERS > 112
            WRITER_8_ROWS(113, 114, 115, 116, 117, 118, 119, 120)
#endif
#if MAX_HOLDERS > 120
            WRITER_8_ROWS(121, 122, 123, 124, 125, 126, 127, 128)
#endif
#if MAX_HOLDERS > 128
            WRITER_8_ROWS(129, 130, 131, 132, 133, 134, 135, 136)
#endif
#if MAX_HOLDERS > 136
            WRITER_8_ROWS(137, 138, 139, 140, 141, 142, 143, 144)
#endif
#if MAX_HOLDERS > 144
            WRITER_8_ROWS(145, 146, 147, 148, 149, 150, 151, 152)
#endif
#if MAX_HOLDERS > 152
            WRITER_8_ROWS(153, 154, 155, 156, 157, 158, 159, 160)
#endif
#if MAX_HOLDERS > 160
            WRITER_8_ROWS(161, 162, 163, 164, 165, 166, 167, 168)
#endif
#if MAX_HOLDERS > 168
            WRITER_8_ROWS(169, 170, 171, 172, 173, 174, 175, 176)
#endif
#if MAX_HOLDERS > 176
            WRITER_8_ROWS(177, 178, 179, 180, 181, 182, 183, 184)
#endif
#if MAX_HOLDERS > 184
            WRITER_8_ROWS(185, 186, 187, 188, 189, 190, 191, 192)
#endif
#if MAX_HOLDERS > 192
            WRITER_8_ROWS(193, 194, 195, 196, 197, 198, 199, 200)
#endif
#if MAX_HOLDERS > 200
            WRITER_8_ROWS(201, 202, 203, 204, 205, 206, 207, 208)
#endif
#if MAX_HOLDERS > 208
            WRITER_8_ROWS(209, 210, 211, 212, 213, 214, 215, 216)
#endif
#if MAX_HOLDERS > 216
            WRITER_8_ROWS(217, 218, 219, 220, 221, 222, 223, 224)
#endif
#if MAX_HOLDERS > 224
            WRITER_8_ROWS(225, 226, 227, 228, 229, 230, 231, 232)
#endif
#if MAX_HOLDERS > 232
            WRITER_8_ROWS(233, 234, 235, 236, 237, 238, 239, 240)
#endif
#if MAX_HOLDERS > 240
            WRITER_8_ROWS(241, 242, 243, 244, 245, 246, 247, 248)
#endif
#if MAX_HOLDERS > 248
            WRITER_ROW(249) WRITER_ROW(250) WRITER_ROW(251) WRITER_ROW(252) WRITER_ROW(253)
            WRITER_ROW(254) WRITER_ROW(255)
#endif
        }
    }

    apply {
        writer_hash = writer_crc.get({hdr.kvs.cid, hdr.kvs.seq});
        writer_table.apply();
    }
}

#endif  // KVSWITCH_WRITER_TABLE_TNA_P4

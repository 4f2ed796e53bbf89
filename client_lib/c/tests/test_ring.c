/* Consistent hashing: known FNV values, rings (full and with gaps) against a brute-force reading of
 * the rule and against each other, the RING_REPLY encoding and its malformed forms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kvswitch.h"
#include "testutil.h"

static void test_fnv_known(void **state)
{
    (void)state;
    /* published FNV-1a 64 test values */
    assert_true(kvs_fnv1a64("", 0) == 0xcbf29ce484222325ULL);
    assert_true(kvs_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cULL);
    assert_true(kvs_fnv1a64("foobar", 6) == 0x85944171f73967e8ULL);
    /* splitmix64 finaliser: a bijection that moves 0 nowhere and mixes 1 */
    assert_true(kvs_mix64(0) == 0);
    assert_true(kvs_hash("a", 1) == kvs_mix64(kvs_fnv1a64("a", 1)));
}

/* The rule of docs/protocol.md read literally over the members ids[0..n): scan every point, keep
 * the smallest point >= pos (lower server on equal points); if none, the smallest point overall. */
static unsigned brute_members(const unsigned *ids, size_t nids, unsigned vnodes,
                              const uint8_t key[16])
{
    uint64_t pos = kvs_hash(key, 16);
    int have_ge = 0;
    uint64_t best_ge = 0, best_all = 0;
    unsigned srv_ge = 0, srv_all = 0;
    int have_all = 0;
    char label[32];
    for (size_t i = 0; i < nids; i++) {
        unsigned s = ids[i];
        for (unsigned v = 0; v < vnodes; v++) {
            int n = snprintf(label, sizeof label, "%u#%u", s, v);
            uint64_t p = kvs_hash(label, (size_t)n);
            if (p >= pos && (!have_ge || p < best_ge || (p == best_ge && s < srv_ge))) {
                have_ge = 1;
                best_ge = p;
                srv_ge = s;
            }
            if (!have_all || p < best_all || (p == best_all && s < srv_all)) {
                have_all = 1;
                best_all = p;
                srv_all = s;
            }
        }
    }
    return have_ge ? srv_ge : srv_all;
}

static unsigned brute_origin(unsigned servers, unsigned vnodes, const uint8_t key[16])
{
    unsigned ids[64];
    for (unsigned i = 0; i < servers; i++)
        ids[i] = i;
    return brute_members(ids, servers, vnodes, key);
}

static void key_of(unsigned i, uint8_t key[16])
{
    char text[32];
    int n = snprintf(text, sizeof text, "k%u", i * 7919u);
    kvs_make_key(text, (size_t)n, key);
}

static void test_ring_matches_rule(void **state)
{
    (void)state;
    const unsigned configs[][2] = {{1, 64}, {2, 64}, {3, 4}, {5, 64}, {7, 1}, {16, 8}};
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        kvs_error err;
        kvs_ring *ring = kvs_ring_new(configs[c][0], configs[c][1], &err);
        assert_non_null(ring);
        assert_int_equal(kvs_ring_servers(ring), configs[c][0]);
        for (unsigned i = 0; i < 300; i++) {
            uint8_t key[16];
            key_of(i, key);
            assert_int_equal(kvs_ring_origin(ring, key),
                             brute_origin(configs[c][0], configs[c][1], key));
        }
        kvs_ring_free(ring);
    }
}

static void test_ring_balance_and_args(void **state)
{
    (void)state;
    kvs_error err;
    assert_null(kvs_ring_new(0, 64, &err));
    assert_int_equal(err, KVS_ERR_INVALID_ARGUMENT);
    kvs_ring *ring = kvs_ring_new(4, 0, &err); /* 0 vnodes = default 64 */
    assert_non_null(ring);
    unsigned count[4] = {0};
    for (unsigned i = 0; i < 20000; i++) {
        char text[32];
        uint8_t key[16];
        int n = snprintf(text, sizeof text, "key%u", i);
        kvs_make_key(text, (size_t)n, key);
        count[kvs_ring_origin(ring, key)]++;
    }
    for (int s = 0; s < 4; s++) /* 64 vnodes: each server within a factor ~1.6 of fair */
        assert_in_range(count[s], 3000, 8000);
    kvs_ring_free(ring);
    kvs_ring_free(NULL);
}

/* Rings of member ids (with gaps, beyond 0..n-1, ids up to 65535) against the literal rule. */
static void test_members_match_rule(void **state)
{
    (void)state;
    const struct {
        unsigned ids[9];
        size_t n;
        unsigned vnodes;
    } sets[] = {{{0, 1, 2, 4, 5, 6, 7}, 7, 64}, {{0, 1, 2, 3, 4, 5, 6, 7, 8}, 9, 64},
                {{1, 3}, 2, 64},                {{65535, 7, 100}, 3, 16},
                {{5}, 1, 4}};
    for (size_t c = 0; c < sizeof sets / sizeof sets[0]; c++) {
        uint16_t ids16[9];
        for (size_t i = 0; i < sets[c].n; i++)
            ids16[i] = (uint16_t)sets[c].ids[i];
        kvs_error err;
        kvs_ring *ring = kvs_ring_from_members(42, sets[c].vnodes, ids16, sets[c].n, &err);
        assert_non_null(ring);
        assert_int_equal(kvs_ring_version(ring), 42);
        assert_int_equal(kvs_ring_vnodes(ring), sets[c].vnodes);
        assert_int_equal(kvs_ring_servers(ring), sets[c].n);
        for (unsigned i = 1; i < kvs_ring_servers(ring); i++) /* members in increasing order */
            assert_true(kvs_ring_member(ring, i - 1) < kvs_ring_member(ring, i));
        for (size_t i = 0; i < sets[c].n; i++)
            assert_true(kvs_ring_has(ring, sets[c].ids[i]));
        assert_false(kvs_ring_has(ring, 65536));
        for (unsigned i = 0; i < 300; i++) {
            uint8_t key[16];
            key_of(i, key);
            unsigned want = brute_members(sets[c].ids, sets[c].n, sets[c].vnodes, key);
            assert_int_equal(kvs_ring_origin(ring, key), want);
            assert_true(kvs_ring_has(ring, want));
        }
        kvs_ring_free(ring);
    }
}

/* The property of membership changes, independent of any vector: a ring without server r gives
 * every key that r did not own under the full ring exactly its full-ring origin, and r's keys go
 * to members; adding server 8 moves keys only to 8. Exactly 0..7 as members is kvs_ring_new(8). */
static void test_gaps_keep_other_origins(void **state)
{
    (void)state;
    kvs_error err;
    kvs_ring *full = kvs_ring_new(8, 64, &err);
    assert_non_null(full);
    assert_int_equal(kvs_ring_version(full), 0);
    uint16_t ids[9];
    for (uint16_t i = 0; i < 9; i++)
        ids[i] = (uint16_t)(8 - i); /* any order */
    kvs_ring *plus = kvs_ring_from_members(3, 64, ids, 9, &err);
    kvs_ring *same = kvs_ring_from_members(1, 64, ids + 1, 8, &err);
    assert_non_null(plus);
    assert_non_null(same);
    const unsigned keys = 4000;
    unsigned to_new = 0;
    for (unsigned i = 0; i < keys; i++) {
        uint8_t key[16];
        key_of(i, key);
        unsigned o = kvs_ring_origin(full, key), p = kvs_ring_origin(plus, key);
        assert_int_equal(kvs_ring_origin(same, key), o);
        assert_true(p == o || p == 8);
        to_new += p == 8;
    }
    assert_in_range(to_new, keys / 9 / 2, keys / 9 * 2); /* server 8 takes about a ninth */
    for (uint16_t r = 0; r < 8; r++) {
        uint16_t rest[7];
        size_t n = 0;
        for (uint16_t i = 0; i < 8; i++)
            if (i != r)
                rest[n++] = i;
        kvs_ring *gap = kvs_ring_from_members(2, 64, rest, n, &err);
        assert_non_null(gap);
        unsigned moved = 0;
        for (unsigned i = 0; i < keys; i++) {
            uint8_t key[16];
            key_of(i, key);
            unsigned o = kvs_ring_origin(full, key), g = kvs_ring_origin(gap, key);
            if (o != r) {
                if (g != o)
                    fail_msg("without %u: key %u went %u -> %u", r, i, o, g);
            } else {
                assert_int_not_equal(g, r);
                assert_true(kvs_ring_has(gap, g));
                moved++;
            }
        }
        assert_in_range(moved, keys / 8 / 2, keys / 8 * 2); /* r owned about an eighth */
        kvs_ring_free(gap);
    }
    kvs_ring_free(full);
    kvs_ring_free(plus);
    kvs_ring_free(same);
}

static void test_member_args(void **state)
{
    (void)state;
    kvs_error err = KVS_OK;
    const uint16_t dup[] = {1, 2, 1};
    assert_null(kvs_ring_from_members(1, 64, dup, 3, &err));
    assert_int_equal(err, KVS_ERR_INVALID_ARGUMENT);
    err = KVS_OK;
    assert_null(kvs_ring_from_members(1, 64, dup, 0, &err));
    assert_int_equal(err, KVS_ERR_INVALID_ARGUMENT);
    assert_null(kvs_ring_from_members(1, 64, NULL, 2, NULL));
    assert_null(kvs_ring_from_members(1, 70000, dup, 2, NULL));
    assert_null(kvs_ring_new(65537, 1, &err));
    kvs_ring *r = kvs_ring_from_members(1, 0, dup, 2, &err); /* 0 vnodes = default */
    assert_non_null(r);
    assert_int_equal(kvs_ring_vnodes(r), KVS_DEFAULT_VNODES);
    kvs_ring_free(r);
}

/* ---- the RING_REPLY value ---- */

static void test_ring_encoding(void **state)
{
    (void)state;
    const kvs_member m[] = {{0, 8900, 0x0a000001}, {2, 8901, 0x0a000003}, {65535, 1, 0xc0a80101}};
    uint8_t buf[64];
    size_t len = 0;
    assert_int_equal(kvs_ring_encode(7, 64, m, 3, buf, sizeof buf, &len), KVS_OK);
    const uint8_t want[] = {0, 0, 0, 7, 0, 64, 0, 3,                             /* ver, vn, n */
                            0, 0, 0x22, 0xc4, 10, 0, 0, 1,                       /* 0 */
                            0, 2, 0x22, 0xc5, 10, 0, 0, 3,                       /* 2 */
                            0xff, 0xff, 0, 1, 192, 168, 1, 1};                   /* 65535 */
    assert_int_equal(len, sizeof want);
    assert_memory_equal(buf, want, sizeof want);
    kvs_member got[3];
    uint32_t version = 0;
    uint16_t vnodes = 0;
    size_t count = 0;
    assert_int_equal(kvs_ring_decode(buf, len, &version, &vnodes, got, 3, &count), KVS_OK);
    assert_int_equal(version, 7);
    assert_int_equal(vnodes, 64);
    assert_int_equal(count, 3);
    assert_memory_equal(got, m, sizeof m);
    /* too small a member buffer: the count needed */
    count = 0;
    assert_int_equal(kvs_ring_decode(buf, len, &version, &vnodes, got, 2, &count),
                     KVS_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(count, 3);
    /* encode errors */
    assert_int_equal(kvs_ring_encode(0, 64, m, 3, buf, sizeof buf, &len), KVS_ERR_INVALID_ARGUMENT);
    assert_int_equal(kvs_ring_encode(1, 0, m, 3, buf, sizeof buf, &len), KVS_ERR_INVALID_ARGUMENT);
    assert_int_equal(kvs_ring_encode(1, 64, m, 0, buf, sizeof buf, &len), KVS_ERR_INVALID_ARGUMENT);
    const kvs_member unsorted[] = {{2, 1, 1}, {1, 1, 1}};
    assert_int_equal(kvs_ring_encode(1, 64, unsorted, 2, buf, sizeof buf, &len),
                     KVS_ERR_INVALID_ARGUMENT);
    assert_int_equal(kvs_ring_encode(1, 64, m, 3, buf, 31, &len), KVS_ERR_BUFFER_TOO_SMALL);
    /* the largest ring a UDP reply can carry round-trips too */
    static kvs_member big[KVS_RING_MAX_MEMBERS], back[KVS_RING_MAX_MEMBERS];
    static uint8_t bigbuf[KVS_MAX_VALUE];
    for (size_t i = 0; i < KVS_RING_MAX_MEMBERS; i++)
        big[i] = (kvs_member){(uint16_t)(i * 3), (uint16_t)(1000 + i), 0x0a000000u + (uint32_t)i + 1};
    assert_int_equal(kvs_ring_encode(9, 8, big, KVS_RING_MAX_MEMBERS, bigbuf, sizeof bigbuf, &len),
                     KVS_OK);
    assert_true(len <= KVS_MAX_VALUE);
    assert_int_equal(
        kvs_ring_decode(bigbuf, len, &version, &vnodes, back, KVS_RING_MAX_MEMBERS, &count), KVS_OK);
    assert_int_equal(count, KVS_RING_MAX_MEMBERS);
    assert_memory_equal(back, big, sizeof big);
    assert_int_equal(kvs_ring_encode(9, 8, big, KVS_RING_MAX_MEMBERS + 1, bigbuf, sizeof bigbuf, &len),
                     KVS_ERR_INVALID_ARGUMENT);
}

/* Decode a copy of exactly len bytes (ASan sees any read past it); the result. */
static kvs_error decode_exact(const uint8_t *bytes, size_t len)
{
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, bytes, len);
    kvs_member m[8];
    uint32_t version = 0xdead;
    uint16_t vnodes = 0xbe;
    size_t count = 0xef;
    kvs_error e = kvs_ring_decode(exact, len, &version, &vnodes, m, 8, &count);
    if (e == KVS_ERR_MALFORMED) /* nothing written on failure */
        assert_true(version == 0xdead && vnodes == 0xbe && count == 0xef);
    free(exact);
    return e;
}

static void test_ring_malformed(void **state)
{
    (void)state;
    const kvs_member m[] = {{1, 8900, 0x0a000002}, {3, 8900, 0x0a000004}};
    uint8_t good[24], bad[40];
    size_t len;
    assert_int_equal(kvs_ring_encode(5, 64, m, 2, good, sizeof good, &len), KVS_OK);
    assert_int_equal(decode_exact(good, len), KVS_OK);
    for (size_t n = 0; n < len; n++) /* every truncation */
        assert_int_equal(decode_exact(good, n), KVS_ERR_MALFORMED);
    memcpy(bad, good, len);
    bad[len] = 0; /* a trailing byte */
    assert_int_equal(decode_exact(bad, len + 1), KVS_ERR_MALFORMED);
    const struct {
        size_t at;
        uint8_t byte;
        const char *what;
    } edits[] = {
        {3, 0, "version 0"},    {5, 0, "vnodes 0"},  {7, 3, "count 3 with 2 present"},
        {7, 1, "count 1 with 2 present"}, {17, 1, "ids 1, 1"}, {17, 0, "ids 1, 0 (unsorted)"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        memcpy(bad, good, len);
        assert_int_not_equal(bad[edits[i].at], edits[i].byte); /* a real edit */
        bad[edits[i].at] = edits[i].byte;
        if (decode_exact(bad, len) != KVS_ERR_MALFORMED)
            fail_msg("%s was accepted", edits[i].what);
    }
    memcpy(bad, good, len);
    bad[10] = bad[11] = 0; /* port 0 */
    assert_int_equal(decode_exact(bad, len), KVS_ERR_MALFORMED);
    memcpy(bad, good, len);
    memset(bad + 20, 0, 4); /* address 0.0.0.0 */
    assert_int_equal(decode_exact(bad, len), KVS_ERR_MALFORMED);
    const uint8_t empty[8] = {0, 0, 0, 1, 0, 64, 0, 0}; /* no members */
    assert_int_equal(decode_exact(empty, sizeof empty), KVS_ERR_MALFORMED);
    /* a count that would overflow 8 + 8 * count in 16 bits stays refused */
    uint8_t huge[8] = {0, 0, 0, 1, 0, 64, 0xff, 0xff};
    assert_int_equal(decode_exact(huge, sizeof huge), KVS_ERR_MALFORMED);
    assert_int_equal(kvs_ring_decode(NULL, 0, NULL, NULL, NULL, 0, NULL), KVS_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fnv_known),
        cmocka_unit_test(test_ring_matches_rule),
        cmocka_unit_test(test_ring_balance_and_args),
        cmocka_unit_test(test_members_match_rule),
        cmocka_unit_test(test_gaps_keep_other_origins),
        cmocka_unit_test(test_member_args),
        cmocka_unit_test(test_ring_encoding),
        cmocka_unit_test(test_ring_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Consistent hashing: known FNV values, the ring against a brute-force reading of the rule. */
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

/* The rule of docs/protocol.md read literally: scan every point, keep the smallest point >= pos
 * (lower server on equal points); if none, the smallest point overall. */
static unsigned brute_origin(unsigned servers, unsigned vnodes, const uint8_t key[16])
{
    uint64_t pos = kvs_hash(key, 16);
    int have_ge = 0;
    uint64_t best_ge = 0, best_all = 0;
    unsigned srv_ge = 0, srv_all = 0;
    int have_all = 0;
    char label[32];
    for (unsigned s = 0; s < servers; s++) {
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
            char text[32];
            uint8_t key[16];
            int n = snprintf(text, sizeof text, "k%u", i * 7919u);
            kvs_make_key(text, (size_t)n, key);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fnv_known),
        cmocka_unit_test(test_ring_matches_rule),
        cmocka_unit_test(test_ring_balance_and_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

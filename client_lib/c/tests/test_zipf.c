/* The Zipf sampler, the PRNG and popularity shifts: exact probabilities, sampled frequencies
 * within 5 sigma, shifts that move exactly the keys they say. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "popularity.h"
#include "testutil.h"
#include "zipf.h"

static void test_probabilities(void **state)
{
    (void)state;
    zipf z;
    assert_int_equal(zipf_init(&z, 1000, 0.99), 0);
    double h = 0;
    for (int i = 1; i <= 1000; i++)
        h += pow(i, -0.99);
    for (size_t i = 0; i < 1000; i += 37)
        assert_true(fabs(zipf_prob(&z, i) - pow((double)(i + 1), -0.99) / h) < 1e-12);
    assert_true(z.cdf[999] == 1.0);
    assert_int_equal(zipf_rank(&z, 0.0), 0);
    assert_int_equal(zipf_rank(&z, nextafter(1.0, 0.0)), 999);
    assert_int_equal(zipf_rank(&z, z.cdf[0]), 1); /* boundaries go to the next rank */
    zipf_free(&z);
    assert_int_equal(zipf_init(&z, 10, 0), 0); /* uniform */
    for (size_t i = 0; i < 10; i++)
        assert_true(fabs(zipf_prob(&z, i) - 0.1) < 1e-12);
    zipf_free(&z);
    assert_int_equal(zipf_init(&z, 0, 1), -1);
    assert_int_equal(zipf_init(&z, 10, -1), -1);
    assert_int_equal(zipf_init(&z, 10, NAN), -1);
}

static void check_sampling(size_t n, double s, unsigned draws)
{
    zipf z;
    assert_int_equal(zipf_init(&z, n, s), 0);
    rng g;
    rng_seed(&g, 12345);
    unsigned *count = calloc(n, sizeof *count);
    for (unsigned i = 0; i < draws; i++)
        count[zipf_rank(&z, rng_uniform(&g))]++;
    for (size_t i = 0; i < n && i < 50; i++) {
        double p = zipf_prob(&z, i), mean = p * draws, sd = sqrt(draws * p * (1 - p));
        if (fabs(count[i] - mean) > 5 * sd + 1)
            fail_msg("n=%zu s=%.2f rank %zu: %u draws, expected %.1f +- %.1f", n, s, i, count[i],
                     mean, sd);
    }
    free(count);
    zipf_free(&z);
}

static void test_sampling(void **state)
{
    (void)state;
    check_sampling(1000, 0.0, 200000);
    check_sampling(100000, 0.99, 300000);
    check_sampling(1000, 1.5, 200000);
}

static void test_rng(void **state)
{
    (void)state;
    rng a, b;
    rng_seed(&a, 7);
    rng_seed(&b, 7);
    for (int i = 0; i < 100; i++)
        assert_true(rng_next(&a) == rng_next(&b));
    unsigned count[3] = {0};
    for (int i = 0; i < 300000; i++) {
        double u = rng_uniform(&a);
        assert_true(u >= 0 && u < 1);
        count[rng_below(&a, 3)]++;
    }
    for (int i = 0; i < 3; i++)
        assert_in_range(count[i], 99000, 101000);
}

static int is_permutation(const size_t *p, size_t n)
{
    char *seen = calloc(n, 1);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        ok = p[i] < n && !seen[p[i]];
        if (ok)
            seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_popularity(void **state)
{
    (void)state;
    enum { N = 1000, M = 50 };
    size_t *p = malloc(N * sizeof *p), *before = malloc(N * sizeof *p);
    rng g;
    rng_seed(&g, 3);
    popularity_shuffle(p, N, &g);
    assert_true(is_permutation(p, N));
    size_t fixed = 0;
    for (size_t i = 0; i < N; i++)
        fixed += p[i] == i;
    assert_true(fixed < 10); /* shuffled, not the identity */

    memcpy(before, p, N * sizeof *p);
    popularity_shift(p, N, M, SHIFT_HOT_IN, &g);
    assert_true(is_permutation(p, N));
    for (size_t i = 0; i < M; i++) /* the M coldest are now the M hottest */
        assert_int_equal(p[i], before[N - M + i]);
    for (size_t i = M; i < N; i++) /* everything else cooled by M ranks */
        assert_int_equal(p[i], before[i - M]);

    popularity_shift(p, N, M, SHIFT_HOT_OUT, &g); /* hot-out undoes hot-in */
    assert_memory_equal(p, before, N * sizeof *p);
    popularity_shift(p, N, M, SHIFT_HOT_OUT, &g);
    for (size_t i = 0; i < M; i++)
        assert_int_equal(p[N - M + i], before[i]);

    memcpy(before, p, N * sizeof *p);
    popularity_shift(p, N, M, SHIFT_RANDOM, &g);
    assert_true(is_permutation(p, N));
    size_t stayed = 0;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < M; j++)
            stayed += p[i] == before[j];
    assert_true(stayed < 5); /* the hot set is (almost) all new */

    memcpy(before, p, N * sizeof *p);
    popularity_shift(p, N, 0, SHIFT_HOT_IN, &g);
    popularity_shift(p, N, N, SHIFT_HOT_IN, &g); /* m > n/2: refused, unchanged */
    popularity_shift(p, N, M, SHIFT_NONE, &g);
    assert_memory_equal(p, before, N * sizeof *p);

    assert_string_equal(shift_name(SHIFT_HOT_OUT), "hot-out");
    assert_int_equal(shift_parse("random:5", 6), SHIFT_RANDOM);
    assert_int_equal(shift_parse("hot", 3), -1);
    free(p);
    free(before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probabilities),
        cmocka_unit_test(test_sampling),
        cmocka_unit_test(test_rng),
        cmocka_unit_test(test_popularity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The Zipf sampler and the PRNG: exact probabilities, sampled frequencies within 5 sigma. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probabilities),
        cmocka_unit_test(test_sampling),
        cmocka_unit_test(test_rng),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

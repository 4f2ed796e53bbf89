/* The HDR histogram: exact low range, bounded relative error, percentiles, merge, clamping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "hdr.h"
#include "testutil.h"

static void test_buckets(void **state)
{
    (void)state;
    for (int digits = 1; digits <= 4; digits++) {
        hdr_hist h;
        assert_int_equal(hdr_init(&h, INT64_C(3600) * 1000000000, digits), 0);
        double bound = pow(10, -digits);
        /* exact below sub_count */
        for (int64_t v = 0; v < (int64_t)h.sub_count; v++) {
            size_t i = hdr_index(&h, v);
            assert_int_equal(hdr_lowest_equivalent(&h, i), v);
            assert_int_equal(hdr_highest_equivalent(&h, i), v);
        }
        /* every value lies in its bucket, buckets are contiguous, width <= value * 10^-digits */
        size_t last = 0;
        for (int64_t v = 1; v < h.highest; v = v + 1 + v / 7) {
            size_t i = hdr_index(&h, v);
            assert_true(i >= last);
            last = i;
            int64_t lo = hdr_lowest_equivalent(&h, i), hi = hdr_highest_equivalent(&h, i);
            assert_true(lo <= v && v <= hi);
            assert_true((double)(hi - lo) <= bound * (double)lo + 1e-9 || hi == lo);
            if (i > 0)
                assert_int_equal(hdr_highest_equivalent(&h, i - 1) + 1, lo);
        }
        assert_true(hdr_index(&h, h.highest) < h.len);
        hdr_free(&h);
    }
    hdr_hist bad;
    assert_int_equal(hdr_init(&bad, 1000, 0), -1);
    assert_int_equal(hdr_init(&bad, 1000, 6), -1);
    assert_int_equal(hdr_init(&bad, 1, 3), -1);
}

static void test_percentiles(void **state)
{
    (void)state;
    hdr_hist h;
    assert_int_equal(hdr_init(&h, INT64_C(60) * 1000000000, 3), 0);
    assert_int_equal(hdr_percentile(&h, 50), 0); /* empty */
    for (int64_t v = 1; v <= 1000000; v++)
        hdr_record(&h, v);
    assert_int_equal(h.total, 1000000);
    const double ps[] = {1, 50, 90, 99, 99.9, 99.99};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        double want = ps[i] * 10000.0;
        int64_t got = hdr_percentile(&h, ps[i]);
        assert_true(got >= want);
        assert_true((double)got <= want * 1.001 + 1);
    }
    assert_int_equal(hdr_percentile(&h, 100), 1000000);
    assert_int_equal(hdr_percentile(&h, 0), 1);
    assert_true(fabs(hdr_mean(&h) - 500000.5) < 1e-6);
    assert_int_equal(h.min, 1);
    assert_int_equal(h.max, 1000000);

    /* a bimodal distribution: 99 % at 100 us, 1 % at 10 ms */
    hdr_hist b;
    assert_int_equal(hdr_init(&b, INT64_C(60) * 1000000000, 3), 0);
    for (int i = 0; i < 9900; i++)
        hdr_record(&b, 100000);
    for (int i = 0; i < 100; i++)
        hdr_record(&b, 10000000);
    assert_true(llabs(hdr_percentile(&b, 50) - 100000) <= 100);
    assert_true(llabs(hdr_percentile(&b, 99) - 100000) <= 100);
    assert_true(llabs(hdr_percentile(&b, 99.5) - 10000000) <= 10000);

    /* merge and reset */
    assert_int_equal(hdr_merge(&h, &b), 0);
    assert_int_equal(h.total, 1010000);
    assert_int_equal(h.max, 10000000);
    hdr_reset(&b);
    assert_int_equal(b.total, 0);
    assert_int_equal(hdr_percentile(&b, 99), 0);
    hdr_hist other;
    assert_int_equal(hdr_init(&other, 1000, 2), 0);
    assert_int_equal(hdr_merge(&h, &other), -1);

    /* clamping */
    hdr_record(&other, 5000);
    hdr_record(&other, -3);
    assert_int_equal(other.clamped, 1);
    assert_int_equal(other.max, 1000);
    assert_int_equal(other.min, 0);
    hdr_free(&h);
    hdr_free(&b);
    hdr_free(&other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_percentiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* A small HDR (high dynamic range) histogram: log-linear buckets with a configurable number of
 * significant decimal digits. Values below 2*10^digits (rounded up to a power of two) are exact;
 * above, each power-of-two range is split into the same number of linear sub-buckets, so every
 * recorded value is known to within a relative error of 10^-digits. Not thread-safe: one
 * writer, or external locking. */
#ifndef KVS_HDR_H
#define KVS_HDR_H

#include <stdint.h>
#include <stddef.h>

typedef struct hdr_hist {
    int64_t highest;        /* largest trackable value; larger values are clamped to it */
    int digits;             /* significant decimal digits, 1..5 */
    unsigned sub_magnitude; /* log2 of the sub-bucket count */
    uint64_t sub_count;     /* sub-buckets per power of two (values below are exact) */
    size_t len;             /* number of counters */
    uint64_t *counts;
    uint64_t total;   /* values recorded */
    uint64_t clamped; /* values above highest (recorded as highest) */
    int64_t min, max;
    double sum;
} hdr_hist;

/* 0 on success, -1 on a bad argument or allocation failure. */
int hdr_init(hdr_hist *h, int64_t highest, int digits);
void hdr_free(hdr_hist *h);
void hdr_reset(hdr_hist *h);
/* Record a value (negative values count as 0). */
void hdr_record(hdr_hist *h, int64_t value);
/* Add every count of src (same highest and digits) to dst; -1 if they differ. */
int hdr_merge(hdr_hist *dst, const hdr_hist *src);
/* The value at percentile p (0..100): the highest value equivalent to the bucket holding the
 * ceil(p/100 * total)-th smallest recorded value, never above the largest recorded value.
 * 0 for an empty histogram. */
int64_t hdr_percentile(const hdr_hist *h, double p);
double hdr_mean(const hdr_hist *h);
/* Bucket arithmetic, exposed for tests. */
size_t hdr_index(const hdr_hist *h, int64_t value);
int64_t hdr_lowest_equivalent(const hdr_hist *h, size_t index);
int64_t hdr_highest_equivalent(const hdr_hist *h, size_t index);

#endif

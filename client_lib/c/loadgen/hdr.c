#include "hdr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static unsigned msb64(uint64_t v)
{
    return 63u - (unsigned)__builtin_clzll(v);
}

size_t hdr_index(const hdr_hist *h, int64_t value)
{
    uint64_t v = value < 0 ? 0 : (uint64_t)value;
    if (v < h->sub_count)
        return (size_t)v;
    unsigned shift = msb64(v) - h->sub_magnitude + 1; /* >= 1 */
    uint64_t half = h->sub_count / 2;
    uint64_t sub = v >> shift; /* in [half, sub_count) */
    return (size_t)(h->sub_count + (uint64_t)(shift - 1) * half + (sub - half));
}

/* The bucket at index holds the values [sub << shift, (sub + 1) << shift). */
static void bucket(const hdr_hist *h, size_t index, uint64_t *sub, unsigned *shift)
{
    if (index < h->sub_count) {
        *sub = index;
        *shift = 0;
        return;
    }
    uint64_t half = h->sub_count / 2;
    *shift = (unsigned)((index - h->sub_count) / half + 1);
    *sub = (index - h->sub_count) % half + half;
}

int64_t hdr_lowest_equivalent(const hdr_hist *h, size_t index)
{
    uint64_t sub;
    unsigned shift;
    bucket(h, index, &sub, &shift);
    return (int64_t)(sub << shift);
}

int64_t hdr_highest_equivalent(const hdr_hist *h, size_t index)
{
    uint64_t sub;
    unsigned shift;
    bucket(h, index, &sub, &shift);
    return (int64_t)(((sub + 1) << shift) - 1);
}

int hdr_init(hdr_hist *h, int64_t highest, int digits)
{
    memset(h, 0, sizeof *h);
    if (digits < 1 || digits > 5 || highest < 2 || highest > (INT64_C(1) << 62))
        return -1;
    uint64_t need = 2;
    for (int i = 0; i < digits; i++)
        need *= 10;
    h->sub_magnitude = msb64(need - 1) + 1; /* smallest power of two >= 2*10^digits */
    h->sub_count = UINT64_C(1) << h->sub_magnitude;
    h->highest = highest;
    h->digits = digits;
    h->len = hdr_index(h, highest) + 1;
    h->counts = calloc(h->len, sizeof h->counts[0]);
    if (h->counts == NULL)
        return -1;
    hdr_reset(h);
    return 0;
}

void hdr_free(hdr_hist *h)
{
    free(h->counts);
    h->counts = NULL;
}

void hdr_reset(hdr_hist *h)
{
    memset(h->counts, 0, h->len * sizeof h->counts[0]);
    h->total = 0;
    h->clamped = 0;
    h->min = INT64_MAX;
    h->max = 0;
    h->sum = 0;
}

void hdr_record(hdr_hist *h, int64_t value)
{
    if (value < 0)
        value = 0;
    if (value > h->highest) {
        value = h->highest;
        h->clamped++;
    }
    h->counts[hdr_index(h, value)]++;
    h->total++;
    h->sum += (double)value;
    if (value < h->min)
        h->min = value;
    if (value > h->max)
        h->max = value;
}

int hdr_merge(hdr_hist *dst, const hdr_hist *src)
{
    if (dst->len != src->len || dst->digits != src->digits)
        return -1;
    for (size_t i = 0; i < src->len; i++)
        dst->counts[i] += src->counts[i];
    dst->total += src->total;
    dst->clamped += src->clamped;
    dst->sum += src->sum;
    if (src->total > 0) {
        if (src->min < dst->min)
            dst->min = src->min;
        if (src->max > dst->max)
            dst->max = src->max;
    }
    return 0;
}

int64_t hdr_percentile(const hdr_hist *h, double p)
{
    if (h->total == 0)
        return 0;
    if (p < 0)
        p = 0;
    if (p > 100)
        p = 100;
    uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->total);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < h->len; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            int64_t v = hdr_highest_equivalent(h, i);
            return v > h->max ? h->max : v;
        }
    }
    return h->max;
}

double hdr_mean(const hdr_hist *h)
{
    return h->total ? h->sum / (double)h->total : 0.0;
}

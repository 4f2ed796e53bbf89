#include "zipf.h"

#include <math.h>
#include <stdlib.h>

int zipf_init(zipf *z, size_t n, double s)
{
    z->cdf = NULL;
    z->n = n;
    z->s = s;
    if (n == 0 || !(s >= 0) || s > 100)
        return -1;
    z->cdf = malloc(n * sizeof z->cdf[0]);
    if (z->cdf == NULL)
        return -1;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += s == 0 ? 1.0 : pow((double)(i + 1), -s);
        z->cdf[i] = sum;
    }
    for (size_t i = 0; i < n; i++)
        z->cdf[i] /= sum;
    z->cdf[n - 1] = 1.0;
    return 0;
}

void zipf_free(zipf *z)
{
    free(z->cdf);
    z->cdf = NULL;
}

size_t zipf_rank(const zipf *z, double u)
{
    /* first i with cdf[i] > u */
    size_t lo = 0, hi = z->n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (z->cdf[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

double zipf_prob(const zipf *z, size_t i)
{
    if (i >= z->n)
        return 0;
    return i == 0 ? z->cdf[0] : z->cdf[i] - z->cdf[i - 1];
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rng_seed(rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double rng_uniform(rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t rng_below(rng *r, uint64_t n)
{
    /* Lemire's multiply-shift with rejection: unbiased */
    __uint128_t m = (__uint128_t)rng_next(r) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (__uint128_t)rng_next(r) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

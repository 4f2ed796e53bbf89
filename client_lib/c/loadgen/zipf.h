/* Zipf-distributed ranks from a precomputed CDF and binary search, and a small fast PRNG. */
#ifndef KVS_ZIPF_H
#define KVS_ZIPF_H

#include <stddef.h>
#include <stdint.h>

typedef struct zipf {
    size_t n;
    double s;
    double *cdf; /* cdf[i] = P(rank <= i); cdf[n-1] == 1 */
} zipf;

/* Ranks 0..n-1 with P(i) proportional to 1/(i+1)^s; s = 0 is uniform. 0 ok, -1 on bad input. */
int zipf_init(zipf *z, size_t n, double s);
void zipf_free(zipf *z);
/* The rank for a uniform u in [0, 1). */
size_t zipf_rank(const zipf *z, double u);
/* P(rank == i) */
double zipf_prob(const zipf *z, size_t i);

/* xoshiro256** seeded through splitmix64 */
typedef struct rng {
    uint64_t s[4];
} rng;

void rng_seed(rng *r, uint64_t seed);
uint64_t rng_next(rng *r);
/* uniform double in [0, 1) */
double rng_uniform(rng *r);
/* uniform integer in [0, n) (n > 0) */
uint64_t rng_below(rng *r, uint64_t n);

#endif

/* Key popularity: a permutation rank -> key id (rank 0 is the hottest under Zipf) and the
 * popularity shifts that rewrite it. */
#ifndef KVS_POPULARITY_H
#define KVS_POPULARITY_H

#include <stddef.h>

#include "zipf.h"

typedef enum shift_kind { SHIFT_NONE, SHIFT_HOT_IN, SHIFT_RANDOM, SHIFT_HOT_OUT } shift_kind;

/* "none", "hot-in", "random", "hot-out" */
const char *shift_name(shift_kind kind);
/* The kind named by the len bytes at name, or -1. */
int shift_parse(const char *name, size_t len);

/* perm = a uniformly random permutation of 0..n-1 (so hot keys spread over the servers). */
void popularity_shuffle(size_t *perm, size_t n, rng *g);

/* Rewrite perm (n entries) for one shift moving m keys (m <= n/2):
 *   hot-in:  the m coldest keys become the m hottest, everything else cools by m ranks;
 *   hot-out: the m hottest keys become the m coldest, everything else heats up by m ranks;
 *   random:  each of the m hottest ranks swaps with a random rank among the colder n-m. */
void popularity_shift(size_t *perm, size_t n, size_t m, shift_kind kind, rng *g);

#endif

#include "popularity.h"

#include <string.h>

static const char *const names[] = {"none", "hot-in", "random", "hot-out"};

const char *shift_name(shift_kind kind)
{
    return (unsigned)kind < 4 ? names[kind] : "?";
}

int shift_parse(const char *name, size_t len)
{
    for (int k = 0; k < 4; k++)
        if (strlen(names[k]) == len && strncmp(name, names[k], len) == 0)
            return k;
    return -1;
}

void popularity_shuffle(size_t *perm, size_t n, rng *g)
{
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rng_below(g, i);
        size_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

static void reverse(size_t *p, size_t from, size_t to)
{
    for (size_t i = from, j = to; i + 1 < j; i++, j--) {
        size_t t = p[i];
        p[i] = p[j - 1];
        p[j - 1] = t;
    }
}

void popularity_shift(size_t *perm, size_t n, size_t m, shift_kind kind, rng *g)
{
    if (m == 0 || 2 * m > n)
        return;
    switch (kind) {
    case SHIFT_HOT_IN:
    case SHIFT_HOT_OUT: {
        /* rotate left by k with three reversals: hot-in rotates right by m */
        size_t k = kind == SHIFT_HOT_IN ? n - m : m;
        reverse(perm, 0, k);
        reverse(perm, k, n);
        reverse(perm, 0, n);
        break;
    }
    case SHIFT_RANDOM:
        for (size_t i = 0; i < m; i++) {
            size_t j = m + (size_t)rng_below(g, n - m);
            size_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        break;
    case SHIFT_NONE: break;
    }
}

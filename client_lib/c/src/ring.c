/* Consistent hashing: FNV-1a 64 + splitmix64 finaliser, virtual nodes (docs/protocol.md). */
#include <stdio.h>
#include <stdlib.h>

#include "kvswitch.h"

struct ring_point {
    uint64_t hash;
    unsigned server;
};

struct kvs_ring {
    unsigned nservers;
    size_t npoints;
    struct ring_point points[];
};

uint64_t kvs_fnv1a64(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = KVS_FNV_OFFSET;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= KVS_FNV_PRIME;
    }
    return h;
}

uint64_t kvs_mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z;
}

uint64_t kvs_hash(const void *data, size_t len)
{
    return kvs_mix64(kvs_fnv1a64(data, len));
}

static int point_cmp(const void *a, const void *b)
{
    const struct ring_point *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return (x->server > y->server) - (x->server < y->server);
}

kvs_ring *kvs_ring_new(unsigned nservers, unsigned vnodes, kvs_error *err)
{
    kvs_error dummy;
    if (err == NULL)
        err = &dummy;
    if (vnodes == 0)
        vnodes = KVS_DEFAULT_VNODES;
    if (nservers == 0 || nservers > 1u << 20 || vnodes > 1u << 16) {
        *err = KVS_ERR_INVALID_ARGUMENT;
        return NULL;
    }
    size_t npoints = (size_t)nservers * vnodes;
    kvs_ring *ring = malloc(sizeof *ring + npoints * sizeof ring->points[0]);
    if (ring == NULL) {
        *err = KVS_ERR_NO_MEMORY;
        return NULL;
    }
    ring->nservers = nservers;
    ring->npoints = npoints;
    size_t k = 0;
    char label[32];
    for (unsigned s = 0; s < nservers; s++) {
        for (unsigned v = 0; v < vnodes; v++) {
            int n = snprintf(label, sizeof label, "%u#%u", s, v);
            ring->points[k].hash = kvs_hash(label, (size_t)n);
            ring->points[k].server = s;
            k++;
        }
    }
    qsort(ring->points, npoints, sizeof ring->points[0], point_cmp);
    *err = KVS_OK;
    return ring;
}

void kvs_ring_free(kvs_ring *ring)
{
    free(ring);
}

unsigned kvs_ring_servers(const kvs_ring *ring)
{
    return ring->nservers;
}

unsigned kvs_ring_origin(const kvs_ring *ring, const uint8_t key[KVS_KEY_SIZE])
{
    uint64_t pos = kvs_hash(key, KVS_KEY_SIZE);
    /* first point >= pos; points are sorted by (hash, server), so equal hashes give the lower
     * server number first */
    size_t lo = 0, hi = ring->npoints;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ring->points[mid].hash < pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == ring->npoints)
        lo = 0;
    return ring->points[lo].server;
}

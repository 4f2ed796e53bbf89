/* Consistent hashing: FNV-1a 64 + splitmix64 finaliser, virtual nodes (docs/protocol.md), rings of
 * member ids with a version. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvswitch.h"

struct ring_point {
    uint64_t hash;
    unsigned server;
};

struct kvs_ring {
    uint32_t version;
    unsigned vnodes;
    unsigned nmembers;
    uint16_t *members; /* sorted, inside the same allocation after the points */
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

static int id_cmp(const void *a, const void *b)
{
    uint16_t x = *(const uint16_t *)a, y = *(const uint16_t *)b;
    return (x > y) - (x < y);
}

/* The ring of the members ids[0..n), already checked: n >= 1, ids < 65536. Sorts a copy. */
static kvs_ring *build(uint32_t version, unsigned vnodes, const uint16_t *ids, size_t n,
                       kvs_error *err)
{
    size_t npoints = n * vnodes;
    kvs_ring *ring =
        malloc(sizeof *ring + npoints * sizeof ring->points[0] + n * sizeof ring->members[0]);
    if (ring == NULL) {
        *err = KVS_ERR_NO_MEMORY;
        return NULL;
    }
    ring->version = version;
    ring->vnodes = vnodes;
    ring->nmembers = (unsigned)n;
    ring->npoints = npoints;
    ring->members = (uint16_t *)(ring->points + npoints);
    memcpy(ring->members, ids, n * sizeof ids[0]);
    qsort(ring->members, n, sizeof ring->members[0], id_cmp);
    for (size_t i = 1; i < n; i++) {
        if (ring->members[i] == ring->members[i - 1]) {
            free(ring);
            *err = KVS_ERR_INVALID_ARGUMENT;
            return NULL;
        }
    }
    size_t k = 0;
    char label[32];
    for (size_t m = 0; m < n; m++) {
        unsigned s = ring->members[m];
        for (unsigned v = 0; v < vnodes; v++) {
            int len = snprintf(label, sizeof label, "%u#%u", s, v);
            ring->points[k].hash = kvs_hash(label, (size_t)len);
            ring->points[k].server = s;
            k++;
        }
    }
    qsort(ring->points, npoints, sizeof ring->points[0], point_cmp);
    *err = KVS_OK;
    return ring;
}

kvs_ring *kvs_ring_from_members(uint32_t version, unsigned vnodes, const uint16_t *ids, size_t n,
                                kvs_error *err)
{
    kvs_error dummy;
    if (err == NULL)
        err = &dummy;
    if (vnodes == 0)
        vnodes = KVS_DEFAULT_VNODES;
    if (ids == NULL || n == 0 || n > KVS_MAX_SERVER_ID + 1u || vnodes > 65535u) {
        *err = KVS_ERR_INVALID_ARGUMENT;
        return NULL;
    }
    return build(version, vnodes, ids, n, err);
}

kvs_ring *kvs_ring_new(unsigned nservers, unsigned vnodes, kvs_error *err)
{
    kvs_error dummy;
    if (err == NULL)
        err = &dummy;
    if (nservers == 0 || nservers > KVS_MAX_SERVER_ID + 1u) {
        *err = KVS_ERR_INVALID_ARGUMENT;
        return NULL;
    }
    uint16_t *ids = malloc(nservers * sizeof ids[0]);
    if (ids == NULL) {
        *err = KVS_ERR_NO_MEMORY;
        return NULL;
    }
    for (unsigned i = 0; i < nservers; i++)
        ids[i] = (uint16_t)i;
    kvs_ring *ring = kvs_ring_from_members(0, vnodes, ids, nservers, err);
    free(ids);
    return ring;
}

void kvs_ring_free(kvs_ring *ring)
{
    free(ring);
}

unsigned kvs_ring_servers(const kvs_ring *ring)
{
    return ring->nmembers;
}

unsigned kvs_ring_member(const kvs_ring *ring, unsigned i)
{
    return ring->members[i];
}

int kvs_ring_has(const kvs_ring *ring, unsigned id)
{
    if (id > KVS_MAX_SERVER_ID)
        return 0;
    uint16_t key = (uint16_t)id;
    return bsearch(&key, ring->members, ring->nmembers, sizeof key, id_cmp) != NULL;
}

uint32_t kvs_ring_version(const kvs_ring *ring)
{
    return ring->version;
}

unsigned kvs_ring_vnodes(const kvs_ring *ring)
{
    return ring->vnodes;
}

unsigned kvs_ring_origin(const kvs_ring *ring, const uint8_t key[KVS_KEY_SIZE])
{
    uint64_t pos = kvs_hash(key, KVS_KEY_SIZE);
    /* first point >= pos; points are sorted by (hash, server), so equal hashes give the lower
     * server id first */
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

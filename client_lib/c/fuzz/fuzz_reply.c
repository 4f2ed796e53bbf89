/* Fuzz target for the reply parser and the RING_REPLY value (libFuzzer entry point; fuzz/driver.c
 * runs it without clang). Invariants: kvs_decode and kvs_ring_decode never read outside
 * [data, data + size) (ASan), accept exactly what docs/protocol.md and docs/c_client.md allow, and
 * what they accept re-encodes to the same bytes. The ring decoder sees both the whole input and the
 * value of every accepted message. */
#include <stdlib.h>
#include <string.h>

#include "kvswitch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned be16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

/* The ring encoding's rules, read independently of the decoder. */
static int ring_well_formed(const uint8_t *p, size_t len)
{
    if (len < 8 || len != 8 + 8 * (size_t)be16(p + 6) || be16(p + 6) == 0)
        return 0;
    if ((p[0] | p[1] | p[2] | p[3]) == 0 || be16(p + 4) == 0)
        return 0;
    for (size_t off = 8; off < len; off += 8) {
        if (be16(p + off + 2) == 0 || (p[off + 4] | p[off + 5] | p[off + 6] | p[off + 7]) == 0)
            return 0;
        if (off > 8 && be16(p + off) <= be16(p + off - 8))
            return 0;
    }
    return 1;
}

static void check_ring(const uint8_t *p, size_t len)
{
    static kvs_member m[KVS_RING_MAX_MEMBERS];
    uint32_t version;
    uint16_t vnodes;
    size_t count = 0;
    kvs_error e = kvs_ring_decode(p, len, &version, &vnodes, m, KVS_RING_MAX_MEMBERS, &count);
    /* more than KVS_RING_MAX_MEMBERS only fits a (TCP-sized) input beyond one UDP value */
    if (e == KVS_ERR_BUFFER_TOO_SMALL && count > KVS_RING_MAX_MEMBERS && ring_well_formed(p, len))
        return;
    if ((e == KVS_OK) != ring_well_formed(p, len) || (e != KVS_OK && e != KVS_ERR_MALFORMED))
        abort();
    if (e != KVS_OK)
        return;
    static uint8_t out[KVS_MAX_VALUE];
    size_t n;
    if (count != be16(p + 6) ||
        kvs_ring_encode(version, vnodes, m, count, out, sizeof out, &n) != KVS_OK || n != len ||
        memcmp(out, p, len) != 0)
        abort();
    if ((size_t)vnodes * count > 4096)
        return; /* the ring itself is tested in test_ring; keep each input fast */
    kvs_error err;
    uint16_t ids[KVS_RING_MAX_MEMBERS];
    for (size_t i = 0; i < count; i++)
        ids[i] = m[i].id;
    kvs_ring *ring = kvs_ring_from_members(version, vnodes, ids, count, &err);
    if (ring == NULL || !kvs_ring_has(ring, kvs_ring_origin(ring, p)))
        abort(); /* p: at least 16 bytes here (8 + 8 * count) */
    kvs_ring_free(ring);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_ring(data, size);
    kvs_header h;
    const uint8_t *value = NULL;
    kvs_error e = kvs_decode(data, size, &h, &value);
    int well_formed = size >= KVS_HEADER_SIZE &&
                      (size_t)KVS_HEADER_SIZE + ((size_t)data[2] << 8 | data[3]) <= size &&
                      data[0] >= KVS_OP_GET && data[0] <= KVS_OP_RING_REPLY &&
                      data[1] <= KVS_STATUS_RETRY;
    if ((e == KVS_OK) != well_formed)
        abort();
    if (e != KVS_OK) {
        if (e != KVS_ERR_MALFORMED)
            abort();
        return 0;
    }
    if (value != data + KVS_HEADER_SIZE || KVS_HEADER_SIZE + (size_t)h.vlen > size)
        abort();
    check_ring(value, h.vlen);
    if (h.vlen > KVS_MAX_VALUE)
        return 0; /* decodable (as over TCP) but not encodable over UDP */
    static uint8_t out[KVS_MAX_MESSAGE];
    size_t len;
    if (kvs_encode(&h, value, h.vlen, out, sizeof out, &len) != KVS_OK || len > size ||
        memcmp(out, data, len) != 0)
        abort();
    return 0;
}

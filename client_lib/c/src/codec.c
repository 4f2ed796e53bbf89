/* Message encoding and decoding, the RING_REPLY value, error names. Pure functions: no I/O, no allocation. */
#include <string.h>

#include "kvswitch.h"

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

kvs_error kvs_make_key(const void *key, size_t len, uint8_t out[KVS_KEY_SIZE])
{
    if (len > KVS_KEY_SIZE)
        return KVS_ERR_KEY_TOO_LONG;
    if (len > 0 && key == NULL)
        return KVS_ERR_INVALID_ARGUMENT;
    memset(out, 0, KVS_KEY_SIZE);
    if (len > 0)
        memcpy(out, key, len);
    return KVS_OK;
}

kvs_error kvs_encode(const kvs_header *h, const void *value, size_t vlen, uint8_t *out, size_t cap,
                     size_t *out_len)
{
    if (h == NULL || out == NULL || (vlen > 0 && value == NULL))
        return KVS_ERR_INVALID_ARGUMENT;
    if (vlen > KVS_MAX_VALUE)
        return KVS_ERR_VALUE_TOO_LARGE;
    if (cap < KVS_HEADER_SIZE + vlen)
        return KVS_ERR_BUFFER_TOO_SMALL;
    out[0] = h->op;
    out[1] = h->status;
    put16(out + 2, (uint16_t)vlen);
    put32(out + 4, h->cid);
    put32(out + 8, h->seq);
    put16(out + 12, h->epoch);
    put16(out + 14, h->flags);
    put32(out + 16, h->ver);
    memcpy(out + 20, h->key, KVS_KEY_SIZE);
    if (vlen > 0)
        memmove(out + KVS_HEADER_SIZE, value, vlen);
    if (out_len != NULL)
        *out_len = KVS_HEADER_SIZE + vlen;
    return KVS_OK;
}

kvs_error kvs_decode(const uint8_t *buf, size_t len, kvs_header *h, const uint8_t **value)
{
    if (h == NULL || (buf == NULL && len > 0))
        return KVS_ERR_INVALID_ARGUMENT;
    if (len < KVS_HEADER_SIZE)
        return KVS_ERR_MALFORMED;
    uint16_t vlen = get16(buf + 2);
    if ((size_t)KVS_HEADER_SIZE + vlen > len)
        return KVS_ERR_MALFORMED;
    if (buf[0] < KVS_OP_GET || buf[0] > KVS_OP_RING_REPLY || buf[1] > KVS_STATUS_RETRY)
        return KVS_ERR_MALFORMED;
    h->op = buf[0];
    h->status = buf[1];
    h->vlen = vlen;
    h->cid = get32(buf + 4);
    h->seq = get32(buf + 8);
    h->epoch = get16(buf + 12);
    h->flags = get16(buf + 14);
    h->ver = get32(buf + 16);
    memcpy(h->key, buf + 20, KVS_KEY_SIZE);
    if (value != NULL)
        *value = buf + KVS_HEADER_SIZE;
    return KVS_OK;
}

/* ---- the RING_REPLY value ---- */

kvs_error kvs_ring_encode(uint32_t version, uint16_t vnodes, const kvs_member *m, size_t n,
                          uint8_t *out, size_t cap, size_t *out_len)
{
    if (version == 0 || vnodes == 0 || n == 0 || n > KVS_RING_MAX_MEMBERS || m == NULL ||
        out == NULL)
        return KVS_ERR_INVALID_ARGUMENT;
    for (size_t i = 1; i < n; i++)
        if (m[i].id <= m[i - 1].id)
            return KVS_ERR_INVALID_ARGUMENT;
    size_t len = KVS_RING_HEADER_SIZE + n * KVS_RING_MEMBER_SIZE;
    if (cap < len)
        return KVS_ERR_BUFFER_TOO_SMALL;
    put32(out, version);
    put16(out + 4, vnodes);
    put16(out + 6, (uint16_t)n);
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = out + KVS_RING_HEADER_SIZE + i * KVS_RING_MEMBER_SIZE;
        put16(p, m[i].id);
        put16(p + 2, m[i].port);
        put32(p + 4, m[i].ipv4);
    }
    if (out_len != NULL)
        *out_len = len;
    return KVS_OK;
}

kvs_error kvs_ring_decode(const uint8_t *buf, size_t len, uint32_t *version, uint16_t *vnodes,
                          kvs_member *members, size_t cap, size_t *count)
{
    if ((buf == NULL && len > 0) || version == NULL || vnodes == NULL || count == NULL ||
        (members == NULL && cap > 0))
        return KVS_ERR_INVALID_ARGUMENT;
    if (len < KVS_RING_HEADER_SIZE)
        return KVS_ERR_MALFORMED;
    size_t n = get16(buf + 6);
    if (len != KVS_RING_HEADER_SIZE + n * KVS_RING_MEMBER_SIZE || n == 0)
        return KVS_ERR_MALFORMED;
    uint32_t v = get32(buf);
    uint16_t vn = get16(buf + 4);
    if (v == 0 || vn == 0)
        return KVS_ERR_MALFORMED;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = buf + KVS_RING_HEADER_SIZE + i * KVS_RING_MEMBER_SIZE;
        if (get16(p + 2) == 0 || get32(p + 4) == 0 || (i > 0 && get16(p) <= get16(p - 8)))
            return KVS_ERR_MALFORMED;
    }
    *count = n;
    if (cap < n)
        return KVS_ERR_BUFFER_TOO_SMALL;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = buf + KVS_RING_HEADER_SIZE + i * KVS_RING_MEMBER_SIZE;
        members[i] = (kvs_member){.id = get16(p), .port = get16(p + 2), .ipv4 = get32(p + 4)};
    }
    *version = v;
    *vnodes = vn;
    return KVS_OK;
}

uint8_t kvs_reply_op(uint8_t op)
{
    switch (op) {
    case KVS_OP_GET:
    case KVS_OP_SET:
    case KVS_OP_DEL: return (uint8_t)(op + 1);
    case KVS_OP_REMOVE: return KVS_OP_REMOVE_REPLY;
    case KVS_OP_RING_GET: return KVS_OP_RING_REPLY;
    default: return 0;
    }
}

kvs_error kvs_status_error(uint8_t status)
{
    switch (status) {
    case KVS_STATUS_OK:
    case KVS_STATUS_DUPLICATE: return KVS_OK;
    case KVS_STATUS_NOT_FOUND: return KVS_ERR_NOT_FOUND;
    case KVS_STATUS_BAD_REQUEST: return KVS_ERR_BAD_REQUEST;
    case KVS_STATUS_TOO_LARGE: return KVS_ERR_TOO_LARGE;
    case KVS_STATUS_STALE: return KVS_ERR_STALE;
    case KVS_STATUS_UNAVAILABLE: return KVS_ERR_UNAVAILABLE;
    case KVS_STATUS_MOVED: return KVS_ERR_MOVED;
    case KVS_STATUS_RETRY: return KVS_ERR_RETRY;
    default: return KVS_ERR_SERVER;
    }
}

const char *kvs_strerror(int err)
{
    switch (err) {
    case KVS_OK: return "success";
    case KVS_ERR_NOT_FOUND: return "key not found";
    case KVS_ERR_BAD_REQUEST: return "server rejected the request as malformed";
    case KVS_ERR_TOO_LARGE: return "server refused the value as too large";
    case KVS_ERR_STALE: return "write older than the stored version (not applied)";
    case KVS_ERR_SERVER: return "server error";
    case KVS_ERR_UNAVAILABLE: return "the key's server is down (answered by the switch)";
    case KVS_ERR_MOVED: return "the servers kept answering MOVED after every ring refresh";
    case KVS_ERR_RETRY: return "the server kept answering RETRY until the request's time ran out";
    case KVS_ERR_KEY_TOO_LONG: return "key longer than 16 bytes";
    case KVS_ERR_VALUE_TOO_LARGE: return "value longer than 8192 bytes";
    case KVS_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case KVS_ERR_MALFORMED: return "malformed message";
    case KVS_ERR_TIMEOUT: return "timed out waiting for a reply";
    case KVS_ERR_INVALID_ARGUMENT: return "invalid argument";
    case KVS_ERR_SYSTEM: return "system call failed (see errno)";
    case KVS_ERR_NO_MEMORY: return "out of memory";
    case KVS_ERR_CLOSED: return "connection closed by the server";
    default: return "unknown error";
    }
}

const char *kvs_op_name(int op)
{
    static const char *const names[] = {
        "?",    "GET",       "GET_REPLY", "SET",        "SET_REPLY",
        "DEL",  "DEL_REPLY", "UPDATE",    "UPDATE_DEL", "CONFIRM",
        "PUSH", "SYNC",      "SYNC_DONE", "REMOVE",     "REMOVE_REPLY",
        "RING_GET", "RING_REPLY",
    };
    if (op < 1 || op > KVS_OP_RING_REPLY)
        return "?";
    return names[op];
}

const char *kvs_status_name(int status)
{
    static const char *const names[] = {
        "OK",           "NOT_FOUND",   "BAD_REQUEST", "TOO_LARGE", "STALE",
        "DUPLICATE",    "SERVER_ERROR", "UNAVAILABLE", "MOVED",     "RETRY",
    };
    if (status < 0 || status > KVS_STATUS_RETRY)
        return "?";
    return names[status];
}

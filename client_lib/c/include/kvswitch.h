/*
 * kvswitch.h: the C client library of KVSwitch.
 *
 * This header is the one place in C for the protocol constants of docs/protocol.md (port, ops,
 * statuses, header size, key size, maximum value). Everything else in C includes it.
 *
 * Threading model
 *   - A kvs_client handle is used by one thread at a time for the blocking calls (kvs_get,
 *     kvs_set, kvs_delete, kvs_request): give each thread its own handle. The handle owns its
 *     send/receive buffers and its sequence counter, so these calls take no lock and allocate
 *     nothing.
 *   - The asynchronous pair kvs_send() / kvs_recv() may be used from two threads at once on the
 *     same handle (one sending, one receiving): both work on caller-provided buffers and touch
 *     only the socket, which the kernel serialises. Do not mix them with blocking calls on the
 *     same handle at the same time.
 *   - The pure functions (codec, hashing, kvs_ring_origin on a built ring) are reentrant.
 *
 * Memory: kvs_client_new() and kvs_ring_new() allocate once; every call after that works on
 * caller-provided buffers and allocates nothing.
 */
#ifndef KVSWITCH_H
#define KVSWITCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- protocol constants (docs/protocol.md) ---- */
#define KVS_PORT           8900 /* reserved UDP and TCP port */
#define KVS_HEADER_SIZE    36   /* bytes of the fixed header */
#define KVS_KEY_SIZE       16   /* bytes of a key on the wire (right-padded with zeros) */
#define KVS_MAX_VALUE      8192 /* largest vlen over UDP */
#define KVS_MAX_MESSAGE    (KVS_HEADER_SIZE + KVS_MAX_VALUE)
#define KVS_DEFAULT_VNODES 64      /* virtual nodes per server on the consistent-hash ring */
#define KVS_F_TCP          0x0001u /* flags bit 0: the switch rewrote this copy from TCP to UDP */
#define KVS_F_DUP          0x0002u /* flags bit 1: a reply repeating the first result of a request id */

/* FNV-1a 64 and the splitmix64 finaliser used for the ring. */
#define KVS_FNV_OFFSET 0xcbf29ce484222325ULL
#define KVS_FNV_PRIME  0x100000001b3ULL

typedef enum kvs_op {
    KVS_OP_GET = 1,
    KVS_OP_GET_REPLY = 2,
    KVS_OP_SET = 3,
    KVS_OP_SET_REPLY = 4,
    KVS_OP_DEL = 5,
    KVS_OP_DEL_REPLY = 6,
    KVS_OP_UPDATE = 7,
    KVS_OP_UPDATE_DEL = 8,
    KVS_OP_CONFIRM = 9,
    KVS_OP_PUSH = 10,
    KVS_OP_SYNC = 11,
    KVS_OP_SYNC_DONE = 12,
    KVS_OP_REMOVE = 13,
    KVS_OP_REMOVE_REPLY = 14,
} kvs_op;

typedef enum kvs_status {
    KVS_STATUS_OK = 0,
    KVS_STATUS_NOT_FOUND = 1,
    KVS_STATUS_BAD_REQUEST = 2,
    KVS_STATUS_TOO_LARGE = 3,
    KVS_STATUS_STALE = 4,
    KVS_STATUS_DUPLICATE = 5,
    KVS_STATUS_SERVER_ERROR = 6,
    KVS_STATUS_UNAVAILABLE = 7, /* answered by the switch: the request's server is down */
} kvs_status;

/* ---- typed errors: every fallible call returns one of these ---- */
typedef enum kvs_error {
    KVS_OK = 0,
    /* the server answered with a non-OK status */
    KVS_ERR_NOT_FOUND = 1,   /* status NOT_FOUND */
    KVS_ERR_BAD_REQUEST = 2, /* status BAD_REQUEST */
    KVS_ERR_TOO_LARGE = 3,   /* status TOO_LARGE */
    KVS_ERR_STALE = 4,       /* status STALE: a newer write stands; this one's outcome unknown */
    KVS_ERR_SERVER = 6,      /* status SERVER_ERROR, or a status this library does not know */
    KVS_ERR_UNAVAILABLE = 7, /* status UNAVAILABLE: the switch says the key's server is down */
    /* local errors */
    KVS_ERR_KEY_TOO_LONG = 10, /* key longer than KVS_KEY_SIZE */
    KVS_ERR_VALUE_TOO_LARGE,   /* value longer than KVS_MAX_VALUE */
    KVS_ERR_BUFFER_TOO_SMALL,  /* caller's buffer cannot hold the message or the value */
    KVS_ERR_MALFORMED,         /* bytes that are not a KVSwitch message (short, bad vlen) */
    KVS_ERR_TIMEOUT,           /* no matching reply after every retry */
    KVS_ERR_INVALID_ARGUMENT,  /* bad argument (NULL, zero servers, unparsable address...) */
    KVS_ERR_SYSTEM,            /* a system call failed; errno tells which */
    KVS_ERR_NO_MEMORY,         /* allocation failed (only in the *_new functions) */
    KVS_ERR_CLOSED,            /* TCP peer closed the connection */
} kvs_error;

/* A static English description of an error code ("unknown error" for anything else). */
const char *kvs_strerror(int err);
/* The error a reply status maps to (DUPLICATE, reserved and no longer sent, maps to KVS_OK). */
kvs_error kvs_status_error(uint8_t status);
const char *kvs_op_name(int op);         /* "GET", ... or "?" */
const char *kvs_status_name(int status); /* "OK", ... or "?" */

/* ---- messages ---- */
typedef struct kvs_header {
    uint8_t op;
    uint8_t status;
    uint16_t vlen;
    uint32_t cid;
    uint32_t seq;
    uint16_t epoch;
    uint16_t flags;
    uint32_t ver;
    uint8_t key[KVS_KEY_SIZE];
} kvs_header;

/* Pad an application key to the 16 wire bytes. KVS_ERR_KEY_TOO_LONG if len > KVS_KEY_SIZE. */
kvs_error kvs_make_key(const void *key, size_t len, uint8_t out[KVS_KEY_SIZE]);

/*
 * Write header h (h->vlen is ignored and set from vlen) followed by vlen value bytes into out.
 * *out_len receives the message size. KVS_ERR_VALUE_TOO_LARGE if vlen > KVS_MAX_VALUE,
 * KVS_ERR_BUFFER_TOO_SMALL if cap < KVS_HEADER_SIZE + vlen.
 */
kvs_error kvs_encode(const kvs_header *h, const void *value, size_t vlen, uint8_t *out, size_t cap,
                     size_t *out_len);

/*
 * Parse a message of len bytes. Never reads outside buf[0..len). On success h holds the header and
 * *value (may be NULL when not wanted) points at the h->vlen value bytes inside buf. Bytes after
 * the value are ignored. KVS_ERR_MALFORMED if len < KVS_HEADER_SIZE, if KVS_HEADER_SIZE + vlen >
 * len, or if op or status is not a code of docs/protocol.md (the same checks as Python's strict
 * Message.decode; vlen itself may exceed KVS_MAX_VALUE, as over TCP, if the bytes are there).
 */
kvs_error kvs_decode(const uint8_t *buf, size_t len, kvs_header *h, const uint8_t **value);

/* The reply op of a request op (GET -> GET_REPLY, ...); 0 if op has no reply. */
uint8_t kvs_reply_op(uint8_t op);

/* ---- consistent hashing (docs/protocol.md, "Origin of a key") ---- */
uint64_t kvs_fnv1a64(const void *data, size_t len);
uint64_t kvs_mix64(uint64_t z);
/* kvs_mix64(kvs_fnv1a64(data, len)) */
uint64_t kvs_hash(const void *data, size_t len);

typedef struct kvs_ring kvs_ring;
/* A ring of nservers servers with vnodes virtual nodes each (0 means KVS_DEFAULT_VNODES). */
kvs_ring *kvs_ring_new(unsigned nservers, unsigned vnodes, kvs_error *err);
void kvs_ring_free(kvs_ring *ring);
unsigned kvs_ring_servers(const kvs_ring *ring);
/* The origin server (0 .. nservers-1) of a padded 16-byte key. */
unsigned kvs_ring_origin(const kvs_ring *ring, const uint8_t key[KVS_KEY_SIZE]);

/* ---- client ---- */
typedef struct kvs_config {
    const char *const *servers; /* "ip:port" (IPv4 or a host name; port defaults to KVS_PORT) */
    size_t nservers;            /* in rack order: server i is ring server i */
    unsigned vnodes;            /* 0: KVS_DEFAULT_VNODES */
    unsigned timeout_ms;        /* per attempt; 0: KVS_DEFAULT_TIMEOUT_MS */
    unsigned retries;           /* extra attempts after the first; 0: none (the defaults: 3) */
    uint32_t cid;               /* client id; 0: random non-zero */
    int tcp_writes;             /* non-zero: Sets and Deletes over TCP instead of UDP */
} kvs_config;

/* The Python client's defaults: timeout 500 ms per attempt, 3 retries. */
#define KVS_DEFAULT_TIMEOUT_MS 500u
#define KVS_DEFAULT_RETRIES    3u

/* Fill cfg with the defaults of the Python client (KVS_DEFAULT_TIMEOUT_MS, KVS_DEFAULT_RETRIES,
 * KVS_DEFAULT_VNODES, random cid, UDP writes) for these servers. */
void kvs_config_defaults(kvs_config *cfg, const char *const *servers, size_t nservers);

typedef struct kvs_client kvs_client;

/* Extra facts about one completed request (any pointer argument of this type may be NULL). */
typedef struct kvs_reply_info {
    uint8_t status; /* the reply's status */
    uint16_t flags; /* the reply's flags: KVS_F_DUP when it repeats a request id's first result */
    uint16_t epoch; /* the reply's epoch and version (switch-stamped, 0 = unversioned) */
    uint32_t ver;
    uint32_t seq;      /* the request's sequence number */
    unsigned attempts; /* sends it took (1 = no retry) */
    int server;        /* ring index of the server that answered, -1 if not a configured server */
} kvs_reply_info;

kvs_client *kvs_client_new(const kvs_config *cfg, kvs_error *err);
void kvs_client_free(kvs_client *c);
uint32_t kvs_client_cid(const kvs_client *c);
const kvs_ring *kvs_client_ring(const kvs_client *c);
/* The UDP socket (for poll()); replies to kvs_send() arrive on it. */
int kvs_client_fd(const kvs_client *c);

/*
 * Blocking calls. Keys are application keys of at most KVS_KEY_SIZE bytes. kvs_get copies the value
 * into buf (capacity cap) and stores its length in *vlen; KVS_ERR_BUFFER_TOO_SMALL (with *vlen set
 * to the needed size) if it does not fit. Gets go over UDP to the key's origin; a reply from any
 * server is accepted when its (cid, seq, key, op) match. Retries resend the same request id, so a
 * retried Set is applied at most once per server; the server answers a repeat with the first
 * result, flagged KVS_F_DUP in info->flags (a retried Delete still says whether the key existed). As
 * in the Python client (StaleWrite), a Set/Delete answered STALE fails with KVS_ERR_STALE: a newer
 * write stands (its version in info->epoch/info->ver) and this one's outcome is unknown, as after a
 * timeout (docs/client.md).
 */
kvs_error kvs_get(kvs_client *c, const void *key, size_t klen, void *buf, size_t cap, size_t *vlen,
                  kvs_reply_info *info);
kvs_error kvs_set(kvs_client *c, const void *key, size_t klen, const void *value, size_t vlen,
                  kvs_reply_info *info);
kvs_error kvs_delete(kvs_client *c, const void *key, size_t klen, kvs_reply_info *info);

/*
 * Asynchronous pair (the load generator's interface). kvs_send sends one request (GET, SET or DEL)
 * with the caller's seq to the key's origin over UDP and returns at once. kvs_recv waits up to
 * timeout_ms (0: do not wait, -1: forever) for one well-formed datagram with this client's cid,
 * decodes it into *h and copies its value into vbuf (truncated to cap; *vlen gets the full
 * length) and *server (may be NULL) the ring index of the sender (-1 if not a configured server:
 * a redirected Get is answered by the replica, not by the origin it was sent to).
 * KVS_ERR_TIMEOUT if nothing arrived; malformed datagrams and foreign cids are dropped and counted
 * (kvs_client_dropped).
 */
kvs_error kvs_send(kvs_client *c, uint8_t op, const uint8_t key[KVS_KEY_SIZE], const void *value,
                   size_t vlen, uint32_t seq);
kvs_error kvs_recv(kvs_client *c, kvs_header *h, void *vbuf, size_t cap, size_t *vlen, int *server,
                   int timeout_ms);
uint64_t kvs_client_dropped(const kvs_client *c);

#ifdef __cplusplus
}
#endif
#endif /* KVSWITCH_H */

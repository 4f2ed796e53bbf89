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
 *     nothing (but for the ring lock and a new ring when a request meets MOVED, UNAVAILABLE or a
 *     timeout).
 *   - The asynchronous pair kvs_send() / kvs_recv() may be used from two threads at once on the
 *     same handle (one sending, one receiving), and kvs_send()/kvs_follow_send() from several:
 *     they work on caller-provided buffers and touch only the socket, which the kernel serialises,
 *     and the current ring, which is published atomically and never freed before the handle. Do
 *     not mix them with blocking calls on the same handle at the same time.
 *   - Ring fetches (kvs_client_refresh_ring, and those the membership rules make) take the
 *     handle's ring lock and use a socket of their own: any thread may make them.
 *   - The pure functions (codec, hashing, kvs_ring_origin on a built ring) are reentrant.
 *
 * Memory: kvs_client_new() and kvs_ring_new() allocate once; every call after that works on
 * caller-provided buffers and allocates nothing, except adopting a newer ring (a new ring and
 * server table; the replaced ones are freed by kvs_client_free) and a first TCP write to a server.
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
#define KVS_F_REDIRECT     0x0004u /* flags bit 2: set by the switch on a Get it redirected to a replica */
#define KVS_F_SETTLED      0x0008u /* flags bit 3: set by the switch on a write stamped while no earlier
                                      write of the key was on its way to its origin (rule 1) */

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
    KVS_OP_RING_GET = 15,   /* client -> any server: key all zero, no value */
    KVS_OP_RING_REPLY = 16, /* server -> client, status OK: the ring encoding (kvs_ring_decode) */
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
    KVS_STATUS_MOVED = 8, /* agent: the key is not this server's under its ring (value: its ring
                           * version, u32); nothing applied */
    KVS_STATUS_RETRY = 9, /* agent: the key is being handed over right now; nothing applied; send
                           * the same request again after a short wait */
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
    KVS_ERR_MOVED = 8,       /* status MOVED after KVS_MAX_REROUTES ring refreshes: the servers
                              * keep saying the key is elsewhere; nothing applied by those attempts */
    KVS_ERR_RETRY = 9,       /* status RETRY until the request's time ran out (hand-over in
                              * progress); nothing applied by those attempts */
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

/*
 * A ring (docs/protocol.md "Origin of a key"; docs/c_client.md "Elastic membership"): a version, a
 * number of virtual nodes and a set of member server ids. Server ids are the rack order indices of
 * the rack file and stay stable when servers leave (removing server 3 does not renumber 4..). The
 * ring points are H("%d#%d" % (id, vnode)) of the members only; a key's origin is the member owning
 * the first point >= H(key16), wrapping, equal points going to the lower id. With members
 * {0..n-1} this is exactly the ring of a rack of n servers. Version 0 is a client's own ring made
 * from its configured server list; servers hand out versions >= 1 (RING_REPLY), and a higher
 * version is newer.
 */
typedef struct kvs_ring kvs_ring;
#define KVS_MAX_SERVER_ID 65535u /* ids are u16 on the wire */
/* The ring of members 0..nservers-1, version 0, vnodes virtual nodes each (0: KVS_DEFAULT_VNODES).
 * KVS_ERR_INVALID_ARGUMENT if nservers is 0 or above KVS_MAX_SERVER_ID + 1, or vnodes > 65535. */
kvs_ring *kvs_ring_new(unsigned nservers, unsigned vnodes, kvs_error *err);
/* The ring of the members ids[0..n) (any order; each id at most once, n >= 1), with this version
 * and vnodes (0: KVS_DEFAULT_VNODES). KVS_ERR_INVALID_ARGUMENT on an empty or repeated id list. */
kvs_ring *kvs_ring_from_members(uint32_t version, unsigned vnodes, const uint16_t *ids, size_t n,
                                kvs_error *err);
void kvs_ring_free(kvs_ring *ring);
/* Number of members. */
unsigned kvs_ring_servers(const kvs_ring *ring);
/* The i-th member id in increasing order (i < kvs_ring_servers). */
unsigned kvs_ring_member(const kvs_ring *ring, unsigned i);
/* Non-zero if id is a member. */
int kvs_ring_has(const kvs_ring *ring, unsigned id);
uint32_t kvs_ring_version(const kvs_ring *ring);
unsigned kvs_ring_vnodes(const kvs_ring *ring);
/* The origin server id of a padded 16-byte key (always a member). */
unsigned kvs_ring_origin(const kvs_ring *ring, const uint8_t key[KVS_KEY_SIZE]);

/*
 * The value of a RING_REPLY, network byte order: version u32, vnodes u16, count u16, then count
 * members of 8 bytes each: id u16, udp port u16, ipv4 u32, sorted by id. 8 + 8 * count bytes.
 */
#define KVS_RING_HEADER_SIZE 8
#define KVS_RING_MEMBER_SIZE 8
/* The most members a RING_REPLY can carry over UDP (its value is at most KVS_MAX_VALUE). */
#define KVS_RING_MAX_MEMBERS ((KVS_MAX_VALUE - KVS_RING_HEADER_SIZE) / KVS_RING_MEMBER_SIZE)
typedef struct kvs_member {
    uint16_t id;
    uint16_t port;  /* UDP port, host byte order */
    uint32_t ipv4;  /* IPv4 address, host byte order (10.0.0.1 = 0x0a000001) */
} kvs_member;
/* Encode a ring reply value from members m[0..n) (must be sorted by strictly increasing id).
 * KVS_ERR_INVALID_ARGUMENT if version is 0, vnodes 0, n is 0 or over KVS_RING_MAX_MEMBERS, or ids
 * are not strictly increasing; KVS_ERR_BUFFER_TOO_SMALL if cap < 8 + 8 * n. */
kvs_error kvs_ring_encode(uint32_t version, uint16_t vnodes, const kvs_member *m, size_t n,
                          uint8_t *out, size_t cap, size_t *out_len);
/*
 * Decode a ring reply value of exactly len bytes (never reads outside buf[0..len)). On success
 * *version, *vnodes and *count are set and members[0..count) hold the members. KVS_ERR_MALFORMED
 * unless: len >= 8, len == 8 + 8 * count, version >= 1, vnodes >= 1, count >= 1, ids strictly
 * increasing, no port 0 and no address 0. KVS_ERR_BUFFER_TOO_SMALL (with *count set) if cap <
 * count. Nothing but *count is written on failure.
 */
kvs_error kvs_ring_decode(const uint8_t *buf, size_t len, uint32_t *version, uint16_t *vnodes,
                          kvs_member *members, size_t cap, size_t *count);

/* ---- client ---- */
typedef struct kvs_config {
    const char *const *servers; /* "ip:port" (IPv4 or a host name; port defaults to KVS_PORT) */
    size_t nservers;            /* in rack order: server i has id i; the start ring is version 0
                                 * with members 0..nservers-1 */
    unsigned vnodes;            /* 0: KVS_DEFAULT_VNODES */
    unsigned timeout_ms;        /* per attempt; 0: KVS_DEFAULT_TIMEOUT_MS */
    unsigned retries;           /* extra attempts after the first; 0: none (the defaults: 3) */
    uint32_t cid;               /* client id; 0: random non-zero */
    int tcp_writes;             /* non-zero: Sets and Deletes over TCP instead of UDP */
} kvs_config;

/* The Python client's defaults: timeout 500 ms per attempt, 3 retries. */
#define KVS_DEFAULT_TIMEOUT_MS 500u
#define KVS_DEFAULT_RETRIES    3u

/*
 * Elastic membership (docs/c_client.md "Elastic membership"): the rules every request follows.
 *   MOVED        if the reply's version (its 4-byte value) is newer than the client's ring, RING_GET
 *                to the server that answered and adopt its ring if newer; then resend the same
 *                request (same cid/seq) to the key's origin under the client's ring. When nothing
 *                changed (same ring, same origin), the resend waits like a RETRY first.
 *   RETRY        wait KVS_RETRY_FIRST_MS, doubling up to KVS_RETRY_MAX_MS, and resend to the
 *                origin under the client's ring, as long as the request's time lasts (timeout_ms x
 *                (retries + 1) from its first send); then KVS_ERR_RETRY.
 *   UNAVAILABLE  ask another member of the ring for it (RING_GET); if the ring (newer, or already
 *   or timeout   fetched by an earlier request) names another origin, resend there; otherwise the
 *                error as before (KVS_ERR_UNAVAILABLE, KVS_ERR_TIMEOUT). Such a fetch is made at
 *                most once per KVS_RING_REFRESH_GAP_MS per handle (a dead server answered for by
 *                the switch must not turn every request into two).
 * Each request resends for MOVED, UNAVAILABLE or a timeout at most KVS_MAX_REROUTES times; a
 * MOVED after that fails with KVS_ERR_MOVED. A RING_GET waits at most
 * min(timeout_ms, KVS_RING_FETCH_TIMEOUT_MS) for its answer. A RING_REPLY may name servers the
 * client did not know: they are added with the address of the reply. Known servers are never
 * forgotten (a server that leaves keeps its address; it is just no member any more).
 */
#define KVS_MAX_REROUTES          3u
#define KVS_RETRY_FIRST_MS        2u
#define KVS_RETRY_MAX_MS          50u
#define KVS_RING_REFRESH_GAP_MS   250u
#define KVS_RING_FETCH_TIMEOUT_MS 100u

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
    unsigned attempts; /* sends it took (1 = no retry, no resend) */
    int server;        /* id of the server that answered, -1 if its address is no known server */
    unsigned moved;    /* MOVED answers followed (resends to a new origin) */
    unsigned retried;  /* RETRY answers waited out and resent */
    unsigned rerouted; /* resends after UNAVAILABLE or a timeout because the ring moved the key */
} kvs_reply_info;

kvs_client *kvs_client_new(const kvs_config *cfg, kvs_error *err);
void kvs_client_free(kvs_client *c);
uint32_t kvs_client_cid(const kvs_client *c);
/* The client's current ring. The pointer stays valid until kvs_client_free, also after the client
 * adopts a newer ring (old rings are kept), so it may be read while another thread refreshes. */
const kvs_ring *kvs_client_ring(const kvs_client *c);
/* kvs_ring_version(kvs_client_ring(c)): 0 until a ring was fetched. */
uint32_t kvs_client_ring_version(const kvs_client *c);
/* Rings adopted since kvs_client_new (each RING_REPLY newer than the ring the client had). */
uint64_t kvs_client_ring_changes(const kvs_client *c);
/*
 * Ask for the ring now: RING_GET to the server with this id (a known server), or with server < 0
 * to the members of the current ring in turn until one answers (each waited for as in the rules
 * above). Adopts the reply if its version is newer. KVS_OK when a well-formed RING_REPLY came
 * (adopted or not); KVS_ERR_TIMEOUT if none did; KVS_ERR_MALFORMED if the reply's value is not a
 * ring encoding; the mapped status error if it answered with a non-OK status;
 * KVS_ERR_INVALID_ARGUMENT for an unknown id. Safe to call from any thread while another uses the
 * handle (ring exchanges use their own socket and lock).
 */
kvs_error kvs_client_refresh_ring(kvs_client *c, int server);
/* The UDP address of a known server id (ipv4 and port in host byte order); KVS_ERR_INVALID_ARGUMENT
 * if the id is not known. */
kvs_error kvs_client_server(const kvs_client *c, unsigned id, uint32_t *ipv4, uint16_t *port);
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
 * timeout (docs/client.md). MOVED, RETRY, UNAVAILABLE and timeouts follow the membership rules
 * above (KVS_ERR_MOVED, KVS_ERR_RETRY). TCP writes follow them too (a resend goes over a
 * connection to the new origin).
 */
kvs_error kvs_get(kvs_client *c, const void *key, size_t klen, void *buf, size_t cap, size_t *vlen,
                  kvs_reply_info *info);
kvs_error kvs_set(kvs_client *c, const void *key, size_t klen, const void *value, size_t vlen,
                  kvs_reply_info *info);
kvs_error kvs_delete(kvs_client *c, const void *key, size_t klen, kvs_reply_info *info);

/*
 * Asynchronous pair (the load generator's interface). kvs_send sends one request (GET, SET or DEL)
 * with the caller's seq to the key's origin under the current ring over UDP and returns at once.
 * kvs_recv waits up to timeout_ms (0: do not wait, -1: forever) for one well-formed datagram with
 * this client's cid, decodes it into *h and copies its value into vbuf (truncated to cap; *vlen
 * gets the full length) and *server (may be NULL) the id of the sender (-1 if not a known server:
 * a redirected Get is answered by the replica, not by the origin it was sent to).
 * KVS_ERR_TIMEOUT if nothing arrived; malformed datagrams and foreign cids are dropped and counted
 * (kvs_client_dropped).
 */
kvs_error kvs_send(kvs_client *c, uint8_t op, const uint8_t key[KVS_KEY_SIZE], const void *value,
                   size_t vlen, uint32_t seq);
kvs_error kvs_recv(kvs_client *c, kvs_header *h, void *vbuf, size_t cap, size_t *vlen, int *server,
                   int timeout_ms);
uint64_t kvs_client_dropped(const kvs_client *c);

/*
 * The membership rules for the asynchronous pair: the same code the blocking calls run, for a
 * caller that keeps its own requests in flight. Per request the caller keeps a kvs_follow (plain
 * data; its fields are for reading):
 *   kvs_follow_start(c, &f, key)     starts the request's clock and routes it (f.origin)
 *   kvs_follow_send(c, &f, op, key, value, vlen, seq)   sends it to f.origin (f is only read)
 *   ... a reply h (from kvs_recv, with its sender id) arrives for the request:
 *   kvs_follow_reply(c, &f, &h, value, vlen, server, &delay_ms, &err)
 *       KVS_NEXT_DONE: the request is over, err is its outcome (KVS_OK, a status error,
 *                      KVS_ERR_MOVED, KVS_ERR_RETRY, KVS_ERR_UNAVAILABLE);
 *       KVS_NEXT_RESEND: f is routed again; call kvs_follow_send with the same op, key, value and
 *                      seq after delay_ms (0: now).
 *   ... or no reply came in time (the caller's own timeout):
 *   kvs_follow_timeout(c, &f, key, &err): KVS_NEXT_RESEND if the ring names another origin now
 *       (f routed there; send at once), else KVS_NEXT_DONE with err = KVS_ERR_TIMEOUT.
 * kvs_follow_reply and kvs_follow_timeout may fetch a ring (a blocking RING_GET on the handle's
 * ring socket, at most min(timeout_ms, KVS_RING_FETCH_TIMEOUT_MS)); they never read the data
 * socket, so replies to other requests stay queued for kvs_recv. kvs_send and kvs_follow_send may
 * be called from several threads at once on one handle (a sender, and a receiver that resends);
 * one kvs_follow is used by one thread at a time.
 */
typedef struct kvs_follow {
    int64_t deadline_ms; /* CLOCK_MONOTONIC ms: start + timeout_ms x (retries + 1); RETRY ends here */
    uint32_t version;    /* ring version of the current route */
    int origin;          /* server id the request goes to */
    unsigned reroutes;   /* resends for MOVED, UNAVAILABLE or a timeout (at most KVS_MAX_REROUTES) */
    unsigned moved;      /* of them for MOVED */
    unsigned rerouted;   /* of them for UNAVAILABLE or a timeout */
    unsigned retried;    /* resends for RETRY (a MOVED that changed nothing waits as one, but
                          * counts in moved) */
    unsigned backoff_ms; /* the next RETRY wait */
} kvs_follow;

typedef enum kvs_next { KVS_NEXT_DONE = 0, KVS_NEXT_RESEND = 1 } kvs_next;

void kvs_follow_start(kvs_client *c, kvs_follow *f, const uint8_t key[KVS_KEY_SIZE]);
kvs_error kvs_follow_send(kvs_client *c, const kvs_follow *f, uint8_t op,
                          const uint8_t key[KVS_KEY_SIZE], const void *value, size_t vlen,
                          uint32_t seq);
kvs_next kvs_follow_reply(kvs_client *c, kvs_follow *f, const kvs_header *h, const void *value,
                          size_t vlen, int server, unsigned *delay_ms, kvs_error *err);
kvs_next kvs_follow_timeout(kvs_client *c, kvs_follow *f, const uint8_t key[KVS_KEY_SIZE],
                            kvs_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KVSWITCH_H */

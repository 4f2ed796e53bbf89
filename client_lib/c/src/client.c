/* The client: UDP Gets/Sets/Deletes with timeout, bounded retries and (cid, seq, key) matching,
 * optional TCP writes, the asynchronous send/receive pair used by the load generator, and the
 * membership rules (MOVED, RETRY, UNAVAILABLE, timeouts; versioned rings learned with RING_GET)
 * that both paths share through kvs_follow_*. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kvswitch.h"

#define RCVBUF_BYTES (4 << 20)

/* A server the client knows: configured, or learned from a RING_REPLY. */
struct server {
    uint16_t id;
    struct sockaddr_in addr;
};

/* What a request is routed by: a ring and every known server (sorted by id; a superset of the
 * ring's members). Immutable once published; replaced views stay allocated (chained through
 * older) until kvs_client_free, so a reader never sees one freed. */
struct view {
    kvs_ring *ring;
    size_t nservers;
    struct server *servers;
    struct view *older;
};

struct tcpconn {
    uint16_t id;
    int fd;
};

struct kvs_client {
    int fd;                     /* UDP socket, unconnected: replies may come from any server */
    int ring_fd;                /* UDP socket of the ring exchanges (RING_GET/RING_REPLY) */
    _Atomic(struct view *) view; /* the current view (acquire/release) */
    pthread_mutex_t ring_lock;  /* ring exchanges, publishing views, and the fields below */
    int64_t last_fetch_ms;      /* last fetch for UNAVAILABLE or a timeout (rate limit) */
    unsigned ask_next;          /* round robin over members for "ask another member" */
    uint32_t ring_cid, ring_seq;
    uint8_t ring_rx[KVS_MAX_MESSAGE];
    atomic_uint_fast64_t ring_changes;
    struct tcpconn *tcp; /* connected TCP sockets by server id (blocking calls only) */
    size_t ntcp;
    uint32_t cid;
    uint32_t next_seq;
    unsigned timeout_ms;
    unsigned retries;
    int tcp_writes;
    atomic_uint_fast64_t dropped;
    uint8_t tx[KVS_MAX_MESSAGE];
    uint8_t rx[KVS_MAX_MESSAGE];
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "host[:port]" -> IPv4 address */
static kvs_error parse_addr(const char *text, struct sockaddr_in *out)
{
    char host[256];
    const char *colon = strrchr(text, ':');
    size_t hlen = colon ? (size_t)(colon - text) : strlen(text);
    if (hlen == 0 || hlen >= sizeof host)
        return KVS_ERR_INVALID_ARGUMENT;
    memcpy(host, text, hlen);
    host[hlen] = '\0';
    long port = KVS_PORT;
    if (colon != NULL) {
        char *end;
        errno = 0;
        port = strtol(colon + 1, &end, 10);
        if (errno != 0 || end == colon + 1 || *end != '\0' || port < 1 || port > 65535)
            return KVS_ERR_INVALID_ARGUMENT;
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
        return KVS_ERR_INVALID_ARGUMENT;
    memcpy(out, res->ai_addr, sizeof *out);
    out->sin_port = htons((uint16_t)port);
    freeaddrinfo(res);
    return KVS_OK;
}

void kvs_config_defaults(kvs_config *cfg, const char *const *servers, size_t nservers)
{
    *cfg = (kvs_config){.servers = servers,
                        .nservers = nservers,
                        .vnodes = KVS_DEFAULT_VNODES,
                        .timeout_ms = KVS_DEFAULT_TIMEOUT_MS,
                        .retries = KVS_DEFAULT_RETRIES};
}

/* Wait until fd is ready for events or until deadline (ms, CLOCK_MONOTONIC); 1 ready, 0 timeout. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left < 0)
            left = 0;
        if (left > 1 << 30)
            left = 1 << 30;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return 1;
        if (r == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

static kvs_error send_addr(int fd, const struct sockaddr_in *to, const uint8_t *msg, size_t len)
{
    ssize_t sent;
    do
        sent = sendto(fd, msg, len, 0, (const struct sockaddr *)to, sizeof *to);
    while (sent < 0 && errno == EINTR);
    if (sent < 0 && errno != ECONNREFUSED && errno != ENOBUFS)
        return KVS_ERR_SYSTEM;
    return KVS_OK;
}

/* Wait until deadline for one well-formed message on fd, read into buf (malformed datagrams are
 * counted in dropped and skipped). KVS_ERR_TIMEOUT if none came. wait_first: poll before the first
 * read (a reply to what was just sent cannot be there yet: saves a failed read per request);
 * otherwise read first (replies queue up for the async pair). */
static kvs_error recv_message(kvs_client *c, int fd, uint8_t *buf, size_t cap, int64_t deadline,
                              int wait_first, kvs_header *h, const uint8_t **value,
                              struct sockaddr_in *from)
{
    if (wait_first) {
        int r = wait_fd(fd, POLLIN, deadline);
        if (r <= 0)
            return r < 0 ? KVS_ERR_SYSTEM : KVS_ERR_TIMEOUT;
    }
    for (;;) {
        socklen_t flen = sizeof *from;
        ssize_t n = recvfrom(fd, buf, cap, MSG_DONTWAIT, (struct sockaddr *)from, &flen);
        if (n < 0) {
            if (errno == EINTR || errno == ECONNREFUSED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return KVS_ERR_SYSTEM;
            int r = wait_fd(fd, POLLIN, deadline);
            if (r < 0)
                return KVS_ERR_SYSTEM;
            if (r == 0)
                return KVS_ERR_TIMEOUT;
            continue;
        }
        if (kvs_decode(buf, (size_t)n, h, value) == KVS_OK)
            return KVS_OK;
        atomic_fetch_add_explicit(&c->dropped, 1, memory_order_relaxed);
    }
}

/* ---- views: the ring and the known servers ---- */

static struct view *current(const kvs_client *c)
{
    return atomic_load_explicit((_Atomic(struct view *) *)&c->view, memory_order_acquire);
}

static int server_cmp(const void *key, const void *elem)
{
    unsigned id = *(const unsigned *)key, other = ((const struct server *)elem)->id;
    return (id > other) - (id < other);
}

/* Index of server id in v->servers, -1 if unknown. */
static long find_server(const struct view *v, unsigned id)
{
    const struct server *s = bsearch(&id, v->servers, v->nservers, sizeof *s, server_cmp);
    return s == NULL ? -1 : s - v->servers;
}

/* The server id of a source address, -1 if it is no known server. */
static int server_id(const kvs_client *c, const struct sockaddr_in *from)
{
    const struct view *v = current(c);
    for (size_t i = 0; i < v->nservers; i++) {
        if (v->servers[i].addr.sin_addr.s_addr == from->sin_addr.s_addr &&
            v->servers[i].addr.sin_port == from->sin_port)
            return v->servers[i].id;
    }
    return -1;
}

/* The address of a known server id (every ring member is known: see adopt_locked). */
static const struct sockaddr_in *server_addr(const kvs_client *c, unsigned id)
{
    const struct view *v = current(c);
    long i = find_server(v, id);
    return i < 0 ? NULL : &v->servers[i].addr;
}

static void free_views(struct view *v)
{
    while (v != NULL) {
        struct view *older = v->older;
        kvs_ring_free(v->ring);
        free(v->servers);
        free(v);
        v = older;
    }
}

/* Publish the ring of a RING_REPLY: the new view knows every server the old one knew plus the
 * reply's members, whose addresses are the reply's. Called with ring_lock held. */
static kvs_error adopt_locked(kvs_client *c, uint32_t version, uint16_t vnodes,
                              const kvs_member *m, size_t n)
{
    struct view *old = current(c);
    uint16_t ids[KVS_RING_MAX_MEMBERS];
    for (size_t i = 0; i < n; i++)
        ids[i] = m[i].id;
    kvs_error e;
    struct view *v = calloc(1, sizeof *v);
    if (v == NULL)
        return KVS_ERR_NO_MEMORY;
    v->ring = kvs_ring_from_members(version, vnodes, ids, n, &e);
    v->servers = malloc((old->nservers + n) * sizeof v->servers[0]);
    if (v->ring == NULL || v->servers == NULL) {
        if (v->ring != NULL)
            e = KVS_ERR_NO_MEMORY;
        free_views(v);
        return e;
    }
    size_t i = 0, j = 0; /* merge two lists sorted by id; the reply wins on equal ids */
    while (i < old->nservers || j < n) {
        struct server s;
        if (j == n || (i < old->nservers && old->servers[i].id < m[j].id)) {
            s = old->servers[i++];
        } else {
            if (i < old->nservers && old->servers[i].id == m[j].id)
                i++;
            s = (struct server){.id = m[j].id,
                                .addr = {.sin_family = AF_INET,
                                         .sin_port = htons(m[j].port),
                                         .sin_addr.s_addr = htonl(m[j].ipv4)}};
            j++;
        }
        v->servers[v->nservers++] = s;
    }
    v->older = old;
    atomic_store_explicit(&c->view, v, memory_order_release);
    atomic_fetch_add_explicit(&c->ring_changes, 1, memory_order_relaxed);
    return KVS_OK;
}

/* ---- ring exchanges (own socket, under ring_lock) ---- */

/* RING_GET to one address, wait up to wait_ms for its RING_REPLY, adopt it if newer. */
static kvs_error fetch_locked(kvs_client *c, const struct sockaddr_in *to, unsigned wait_ms)
{
    kvs_header rq = {.op = KVS_OP_RING_GET, .cid = c->ring_cid, .seq = ++c->ring_seq};
    uint8_t msg[KVS_HEADER_SIZE];
    size_t len;
    kvs_encode(&rq, NULL, 0, msg, sizeof msg, &len);
    kvs_error e = send_addr(c->ring_fd, to, msg, len);
    if (e != KVS_OK)
        return e;
    int64_t deadline = now_ms() + wait_ms;
    for (;;) {
        kvs_header h;
        const uint8_t *value;
        struct sockaddr_in from;
        e = recv_message(c, c->ring_fd, c->ring_rx, sizeof c->ring_rx, deadline, 1, &h, &value,
                         &from);
        if (e != KVS_OK)
            return e;
        if (h.cid != rq.cid || h.seq != rq.seq || h.op != KVS_OP_RING_REPLY)
            continue; /* a late answer to an earlier fetch */
        if (h.status != KVS_STATUS_OK)
            return kvs_status_error(h.status);
        kvs_member m[KVS_RING_MAX_MEMBERS];
        uint32_t version;
        uint16_t vnodes;
        size_t count;
        if (kvs_ring_decode(value, h.vlen, &version, &vnodes, m, KVS_RING_MAX_MEMBERS, &count) !=
            KVS_OK)
            return KVS_ERR_MALFORMED;
        if (version <= kvs_ring_version(current(c)->ring))
            return KVS_OK; /* not newer: nothing to adopt */
        return adopt_locked(c, version, vnodes, m, count);
    }
}

static unsigned fetch_wait(const kvs_client *c)
{
    return c->timeout_ms < KVS_RING_FETCH_TIMEOUT_MS ? c->timeout_ms : KVS_RING_FETCH_TIMEOUT_MS;
}

/* Ask members of the current ring other than `avoid` (-1: none), in turn from where the last
 * question stopped, until one answers well or `tries` were asked. */
static kvs_error ask_members_locked(kvs_client *c, int avoid, unsigned tries, unsigned wait_ms)
{
    const kvs_ring *ring = current(c)->ring;
    unsigned n = kvs_ring_servers(ring);
    kvs_error e = KVS_ERR_TIMEOUT;
    for (unsigned k = 0, asked = 0; k < n && asked < tries; k++) {
        unsigned id = kvs_ring_member(ring, c->ask_next++ % n);
        if ((int)id == avoid && n > 1)
            continue;
        asked++;
        e = fetch_locked(c, server_addr(c, id), wait_ms);
        if (e == KVS_OK)
            break;
    }
    return e;
}

kvs_error kvs_client_refresh_ring(kvs_client *c, int server)
{
    if (c == NULL)
        return KVS_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&c->ring_lock);
    kvs_error e;
    if (server >= 0) {
        const struct sockaddr_in *to = server_addr(c, (unsigned)server);
        e = to == NULL ? KVS_ERR_INVALID_ARGUMENT : fetch_locked(c, to, c->timeout_ms);
    } else {
        e = ask_members_locked(c, -1, UINT32_MAX, c->timeout_ms);
    }
    pthread_mutex_unlock(&c->ring_lock);
    return e;
}

/* ---- the membership rules (shared by the blocking calls and the async pair) ---- */

static void route(const kvs_client *c, kvs_follow *f, const uint8_t key[KVS_KEY_SIZE])
{
    const kvs_ring *ring = current(c)->ring;
    f->origin = (int)kvs_ring_origin(ring, key);
    f->version = kvs_ring_version(ring);
}

void kvs_follow_start(kvs_client *c, kvs_follow *f, const uint8_t key[KVS_KEY_SIZE])
{
    *f = (kvs_follow){.deadline_ms = now_ms() + (int64_t)c->timeout_ms * (c->retries + 1),
                      .backoff_ms = KVS_RETRY_FIRST_MS};
    route(c, f, key);
}

/* The RETRY wait to use now, and the next one (doubling, capped). */
static unsigned next_backoff(kvs_follow *f)
{
    unsigned d = f->backoff_ms;
    f->backoff_ms = d * 2 > KVS_RETRY_MAX_MS ? KVS_RETRY_MAX_MS : d * 2;
    return d;
}

/* UNAVAILABLE or a timeout: ask another member for the ring (at most once per
 * KVS_RING_REFRESH_GAP_MS per handle); resend if the ring now names another origin. */
static kvs_next reroute(kvs_client *c, kvs_follow *f, const uint8_t key[KVS_KEY_SIZE])
{
    if (f->reroutes >= KVS_MAX_REROUTES)
        return KVS_NEXT_DONE;
    pthread_mutex_lock(&c->ring_lock);
    int64_t now = now_ms();
    if (c->last_fetch_ms == 0 || now - c->last_fetch_ms >= KVS_RING_REFRESH_GAP_MS) {
        c->last_fetch_ms = now;
        (void)ask_members_locked(c, f->origin, 1, fetch_wait(c));
    }
    pthread_mutex_unlock(&c->ring_lock);
    int before = f->origin;
    route(c, f, key);
    if (f->origin == before)
        return KVS_NEXT_DONE;
    f->reroutes++;
    f->rerouted++;
    return KVS_NEXT_RESEND;
}

kvs_next kvs_follow_reply(kvs_client *c, kvs_follow *f, const kvs_header *h, const void *value,
                          size_t vlen, int server, unsigned *delay_ms, kvs_error *err)
{
    *delay_ms = 0;
    *err = kvs_status_error(h->status);
    if (h->status == KVS_STATUS_RETRY) {
        if (now_ms() + f->backoff_ms > f->deadline_ms)
            return KVS_NEXT_DONE;
        *delay_ms = next_backoff(f);
        f->retried++;
        route(c, f, h->key);
        return KVS_NEXT_RESEND;
    }
    if (h->status == KVS_STATUS_UNAVAILABLE)
        return reroute(c, f, h->key);
    if (h->status != KVS_STATUS_MOVED || f->reroutes >= KVS_MAX_REROUTES)
        return KVS_NEXT_DONE;
    /* MOVED: the agent's ring version is its value (unknown without one: ask anyway) */
    const uint8_t *v = value;
    uint32_t theirs = vlen >= 4 ? ((uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 |
                                   (uint32_t)v[2] << 8 | v[3])
                                : UINT32_MAX;
    pthread_mutex_lock(&c->ring_lock);
    if (theirs > kvs_ring_version(current(c)->ring)) {
        const struct sockaddr_in *to = server >= 0 ? server_addr(c, (unsigned)server) : NULL;
        if (to != NULL)
            (void)fetch_locked(c, to, fetch_wait(c));
        else
            (void)ask_members_locked(c, -1, 1, fetch_wait(c));
    }
    pthread_mutex_unlock(&c->ring_lock);
    int before = f->origin;
    uint32_t before_version = f->version;
    route(c, f, h->key);
    f->reroutes++;
    f->moved++;
    if (f->origin == before && f->version == before_version)
        *delay_ms = next_backoff(f); /* nothing changed: give the agent time to catch up */
    return KVS_NEXT_RESEND;
}

kvs_next kvs_follow_timeout(kvs_client *c, kvs_follow *f, const uint8_t key[KVS_KEY_SIZE],
                            kvs_error *err)
{
    *err = KVS_ERR_TIMEOUT;
    return reroute(c, f, key);
}

static kvs_error send_to(kvs_client *c, int fd, unsigned id, const uint8_t *msg, size_t len)
{
    const struct sockaddr_in *to = server_addr(c, id);
    return to == NULL ? KVS_ERR_INVALID_ARGUMENT : send_addr(fd, to, msg, len);
}

kvs_error kvs_follow_send(kvs_client *c, const kvs_follow *f, uint8_t op,
                          const uint8_t key[KVS_KEY_SIZE], const void *value, size_t vlen,
                          uint32_t seq)
{
    if (c == NULL || f == NULL || key == NULL || kvs_reply_op(op) == 0)
        return KVS_ERR_INVALID_ARGUMENT;
    uint8_t msg[KVS_MAX_MESSAGE];
    kvs_header h = {.op = op, .cid = c->cid, .seq = seq};
    memcpy(h.key, key, KVS_KEY_SIZE);
    size_t len;
    kvs_error e = kvs_encode(&h, value, vlen, msg, sizeof msg, &len);
    if (e != KVS_OK)
        return e;
    return send_to(c, c->fd, (unsigned)f->origin, msg, len);
}

kvs_error kvs_send(kvs_client *c, uint8_t op, const uint8_t key[KVS_KEY_SIZE], const void *value,
                   size_t vlen, uint32_t seq)
{
    if (c == NULL || key == NULL)
        return KVS_ERR_INVALID_ARGUMENT;
    kvs_follow f;
    route(c, &f, key);
    return kvs_follow_send(c, &f, op, key, value, vlen, seq);
}

/* ---- the handle ---- */

static kvs_error random_nonzero(uint32_t *out, uint32_t avoid)
{
    do {
        if (getrandom(out, sizeof *out, 0) != sizeof *out)
            return KVS_ERR_SYSTEM;
    } while (*out == 0 || *out == avoid);
    return KVS_OK;
}

static int udp_bound_socket(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int rcvbuf = RCVBUF_BYTES;
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(fd, (struct sockaddr *)&any, sizeof any) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

kvs_client *kvs_client_new(const kvs_config *cfg, kvs_error *err)
{
    kvs_error dummy;
    if (err == NULL)
        err = &dummy;
    if (cfg == NULL || cfg->servers == NULL || cfg->nservers == 0 ||
        cfg->nservers > KVS_MAX_SERVER_ID + 1u) {
        *err = KVS_ERR_INVALID_ARGUMENT;
        return NULL;
    }
    kvs_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        *err = KVS_ERR_NO_MEMORY;
        return NULL;
    }
    c->fd = c->ring_fd = -1;
    pthread_mutex_init(&c->ring_lock, NULL);
    atomic_init(&c->dropped, 0);
    atomic_init(&c->ring_changes, 0);
    struct view *v = calloc(1, sizeof *v);
    atomic_init(&c->view, v);
    if (v == NULL) {
        *err = KVS_ERR_NO_MEMORY;
        goto fail;
    }
    v->servers = calloc(cfg->nservers, sizeof v->servers[0]);
    if (v->servers == NULL) {
        *err = KVS_ERR_NO_MEMORY;
        goto fail;
    }
    for (size_t i = 0; i < cfg->nservers; i++, v->nservers++) {
        v->servers[i].id = (uint16_t)i;
        if (cfg->servers[i] == NULL ||
            (*err = parse_addr(cfg->servers[i], &v->servers[i].addr)) != KVS_OK) {
            *err = KVS_ERR_INVALID_ARGUMENT;
            goto fail;
        }
    }
    v->ring = kvs_ring_new((unsigned)cfg->nservers, cfg->vnodes, err);
    if (v->ring == NULL)
        goto fail;
    c->fd = udp_bound_socket();
    c->ring_fd = udp_bound_socket();
    if (c->fd < 0 || c->ring_fd < 0) {
        *err = KVS_ERR_SYSTEM;
        goto fail;
    }
    c->cid = cfg->cid;
    /* ring exchanges use a cid of their own: their seqs never meet the caller's request ids */
    if ((c->cid == 0 && (*err = random_nonzero(&c->cid, 0)) != KVS_OK) ||
        (*err = random_nonzero(&c->ring_cid, c->cid)) != KVS_OK)
        goto fail;
    /* a random first seq, as the Python client: a reused cid does not collide with old ids */
    if (getrandom(&c->next_seq, sizeof c->next_seq, 0) != sizeof c->next_seq) {
        *err = KVS_ERR_SYSTEM;
        goto fail;
    }
    c->next_seq = (c->next_seq >> 1) | 1u;
    c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : KVS_DEFAULT_TIMEOUT_MS;
    c->retries = cfg->retries;
    c->tcp_writes = cfg->tcp_writes;
    *err = KVS_OK;
    return c;
fail:
    kvs_client_free(c);
    return NULL;
}

void kvs_client_free(kvs_client *c)
{
    if (c == NULL)
        return;
    if (c->fd >= 0)
        close(c->fd);
    if (c->ring_fd >= 0)
        close(c->ring_fd);
    for (size_t i = 0; i < c->ntcp; i++)
        if (c->tcp[i].fd >= 0)
            close(c->tcp[i].fd);
    free(c->tcp);
    free_views(current(c));
    pthread_mutex_destroy(&c->ring_lock);
    free(c);
}

uint32_t kvs_client_cid(const kvs_client *c)
{
    return c->cid;
}

const kvs_ring *kvs_client_ring(const kvs_client *c)
{
    return current(c)->ring;
}

uint32_t kvs_client_ring_version(const kvs_client *c)
{
    return kvs_ring_version(current(c)->ring);
}

uint64_t kvs_client_ring_changes(const kvs_client *c)
{
    return atomic_load_explicit((atomic_uint_fast64_t *)&c->ring_changes, memory_order_relaxed);
}

kvs_error kvs_client_server(const kvs_client *c, unsigned id, uint32_t *ipv4, uint16_t *port)
{
    const struct sockaddr_in *a = c != NULL ? server_addr(c, id) : NULL;
    if (a == NULL)
        return KVS_ERR_INVALID_ARGUMENT;
    if (ipv4 != NULL)
        *ipv4 = ntohl(a->sin_addr.s_addr);
    if (port != NULL)
        *port = ntohs(a->sin_port);
    return KVS_OK;
}

int kvs_client_fd(const kvs_client *c)
{
    return c->fd;
}

uint64_t kvs_client_dropped(const kvs_client *c)
{
    return atomic_load_explicit((atomic_uint_fast64_t *)&c->dropped, memory_order_relaxed);
}

/* ---- blocking calls ---- */

struct request {
    kvs_header h; /* the request header (op, cid, seq, key) */
    uint8_t reply_op;
    size_t len; /* encoded length in c->tx */
};

/* Copy a matched reply's value and facts out to the caller. */
static kvs_error finish(const kvs_header *rh, const uint8_t *value, void *buf, size_t cap,
                        size_t *vlen, kvs_reply_info *info, int server, unsigned attempts,
                        const kvs_follow *f)
{
    if (info != NULL) {
        info->status = rh->status;
        info->flags = rh->flags;
        info->epoch = rh->epoch;
        info->ver = rh->ver;
        info->seq = rh->seq;
        info->attempts = attempts;
        info->server = server;
        info->moved = f->moved;
        info->retried = f->retried;
        info->rerouted = f->rerouted;
    }
    if (rh->op != KVS_OP_GET_REPLY)
        /* As the Python client: a write answered STALE was not applied (the server holds a newer
         * version, in info->epoch/ver): KVS_ERR_STALE, never a success. */
        return kvs_status_error(rh->status);
    kvs_error e = kvs_status_error(rh->status);
    if (e != KVS_OK)
        return e;
    if (vlen != NULL)
        *vlen = rh->vlen;
    if (rh->vlen > cap)
        return KVS_ERR_BUFFER_TOO_SMALL;
    if (rh->vlen > 0 && buf != NULL)
        memcpy(buf, value, rh->vlen);
    return KVS_OK;
}

static int matches(const struct request *rq, const kvs_header *rh)
{
    return rh->cid == rq->h.cid && rh->seq == rq->h.seq && rh->op == rq->reply_op &&
           memcmp(rh->key, rq->h.key, KVS_KEY_SIZE) == 0;
}

/* One UDP attempt: send c->tx to the origin, wait for the matching reply (decoded into *rh, its
 * value in c->rx) until deadline. */
static kvs_error udp_attempt(kvs_client *c, const struct request *rq, unsigned origin,
                             int64_t deadline, kvs_header *rh, const uint8_t **value, int *server)
{
    kvs_error e = send_to(c, c->fd, origin, c->tx, rq->len);
    if (e != KVS_OK)
        return e;
    for (;;) {
        struct sockaddr_in from;
        e = recv_message(c, c->fd, c->rx, sizeof c->rx, deadline, 1, rh, value, &from);
        if (e != KVS_OK)
            return e;
        if (!matches(rq, rh))
            continue; /* a late reply to an earlier request, or not ours */
        *server = server_id(c, &from);
        return KVS_OK;
    }
}

/* The TCP connection to server id (blocking calls only); NULL if out of memory. */
static int *tcp_slot(kvs_client *c, unsigned id)
{
    for (size_t i = 0; i < c->ntcp; i++)
        if (c->tcp[i].id == id)
            return &c->tcp[i].fd;
    struct tcpconn *t = realloc(c->tcp, (c->ntcp + 1) * sizeof *t);
    if (t == NULL)
        return NULL;
    c->tcp = t;
    c->tcp[c->ntcp] = (struct tcpconn){.id = (uint16_t)id, .fd = -1};
    return &c->tcp[c->ntcp++].fd;
}

static kvs_error tcp_connect(int *slot, const struct sockaddr_in *to, int64_t deadline)
{
    if (*slot >= 0)
        return KVS_OK;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return KVS_ERR_SYSTEM;
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)to, sizeof *to) < 0) {
        if (errno != EINPROGRESS) {
            close(fd);
            return KVS_ERR_SYSTEM;
        }
        int r = wait_fd(fd, POLLOUT, deadline);
        int soerr = 0;
        socklen_t slen = sizeof soerr;
        if (r <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) < 0 || soerr != 0) {
            close(fd);
            if (soerr != 0)
                errno = soerr;
            return r == 0 ? KVS_ERR_TIMEOUT : KVS_ERR_SYSTEM;
        }
    }
    *slot = fd;
    return KVS_OK;
}

/* Move exactly len bytes over a non-blocking socket before the deadline. */
static kvs_error tcp_io(int fd, uint8_t *p, size_t len, int sending, int64_t deadline)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = sending ? send(fd, p + done, len - done, MSG_NOSIGNAL)
                            : recv(fd, p + done, len - done, 0);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n == 0)
            return KVS_ERR_CLOSED;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return KVS_ERR_SYSTEM;
        int r = wait_fd(fd, sending ? POLLOUT : POLLIN, deadline);
        if (r == 0)
            return KVS_ERR_TIMEOUT;
        if (r < 0)
            return KVS_ERR_SYSTEM;
    }
    return KVS_OK;
}

/* One TCP attempt: one request per segment, wait for the reply; the agent frames the stream by
 * vlen. A failed attempt closes the connection (so no late reply can be mistaken for the next
 * one); the next attempt, with the same request id, opens a fresh one. */
static kvs_error tcp_attempt(kvs_client *c, const struct request *rq, unsigned origin,
                             int64_t deadline, kvs_header *rh, const uint8_t **value)
{
    int *slot = tcp_slot(c, origin);
    const struct sockaddr_in *to = server_addr(c, origin);
    if (slot == NULL)
        return KVS_ERR_NO_MEMORY;
    if (to == NULL)
        return KVS_ERR_INVALID_ARGUMENT;
    kvs_error e = tcp_connect(slot, to, deadline);
    if (e == KVS_OK)
        e = tcp_io(*slot, c->tx, rq->len, 1, deadline);
    if (e == KVS_OK)
        e = tcp_io(*slot, c->rx, KVS_HEADER_SIZE, 0, deadline);
    if (e == KVS_OK) {
        size_t vlen = (size_t)((c->rx[2] << 8) | c->rx[3]);
        if (vlen > KVS_MAX_VALUE)
            e = KVS_ERR_MALFORMED;
        else
            e = tcp_io(*slot, c->rx + KVS_HEADER_SIZE, vlen, 0, deadline);
    }
    if (e == KVS_OK && (kvs_decode(c->rx, sizeof c->rx, rh, value) != KVS_OK || !matches(rq, rh)))
        e = KVS_ERR_MALFORMED;
    if (e != KVS_OK && *slot >= 0) {
        close(*slot);
        *slot = -1;
    }
    return e;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A request under the membership rules: retries after a timeout resend the same id to the same
 * origin; MOVED/RETRY/UNAVAILABLE and a final timeout go through kvs_follow_*. */
static kvs_error exchange(kvs_client *c, const struct request *rq, int tcp, void *buf, size_t cap,
                          size_t *outlen, kvs_reply_info *info)
{
    kvs_follow f;
    kvs_follow_start(c, &f, rq->h.key);
    unsigned attempts = 0, timeouts = 0;
    for (;;) {
        attempts++;
        kvs_header rh;
        const uint8_t *value = NULL;
        int server = (int)f.origin;
        int64_t deadline = now_ms() + c->timeout_ms;
        kvs_error e = tcp ? tcp_attempt(c, rq, (unsigned)f.origin, deadline, &rh, &value)
                          : udp_attempt(c, rq, (unsigned)f.origin, deadline, &rh, &value, &server);
        if (e == KVS_OK) {
            unsigned delay;
            kvs_error outcome;
            if (kvs_follow_reply(c, &f, &rh, value, rh.vlen, server, &delay, &outcome) ==
                KVS_NEXT_DONE)
                return finish(&rh, value, buf, cap, outlen, info, server, attempts, &f);
            if (delay > 0)
                sleep_ms(delay);
            timeouts = 0;
            continue;
        }
        if (e == KVS_ERR_SYSTEM || e == KVS_ERR_INVALID_ARGUMENT || e == KVS_ERR_NO_MEMORY)
            return e;
        /* no (usable) answer to this attempt: a timeout, or a TCP failure */
        if (++timeouts <= c->retries)
            continue;
        kvs_error outcome;
        if (kvs_follow_timeout(c, &f, rq->h.key, &outcome) == KVS_NEXT_DONE) {
            if (info != NULL)
                *info = (kvs_reply_info){.seq = rq->h.seq,
                                         .attempts = attempts,
                                         .server = -1,
                                         .moved = f.moved,
                                         .retried = f.retried,
                                         .rerouted = f.rerouted};
            return e;
        }
        timeouts = c->retries; /* the new origin gets one attempt; its timeout asks again */
    }
}

static kvs_error request(kvs_client *c, uint8_t op, const void *key, size_t klen, const void *value,
                         size_t vlen, void *buf, size_t cap, size_t *outlen, kvs_reply_info *info)
{
    if (c == NULL)
        return KVS_ERR_INVALID_ARGUMENT;
    struct request rq = {.h = {.op = op, .cid = c->cid, .seq = c->next_seq++}};
    rq.reply_op = kvs_reply_op(op);
    kvs_error e = kvs_make_key(key, klen, rq.h.key);
    if (e == KVS_OK)
        e = kvs_encode(&rq.h, value, vlen, c->tx, sizeof c->tx, &rq.len);
    if (e != KVS_OK)
        return e;
    return exchange(c, &rq, c->tcp_writes && op != KVS_OP_GET, buf, cap, outlen, info);
}

kvs_error kvs_get(kvs_client *c, const void *key, size_t klen, void *buf, size_t cap, size_t *vlen,
                  kvs_reply_info *info)
{
    if (buf == NULL && cap > 0)
        return KVS_ERR_INVALID_ARGUMENT;
    return request(c, KVS_OP_GET, key, klen, NULL, 0, buf, cap, vlen, info);
}

kvs_error kvs_set(kvs_client *c, const void *key, size_t klen, const void *value, size_t vlen,
                  kvs_reply_info *info)
{
    return request(c, KVS_OP_SET, key, klen, value, vlen, NULL, 0, NULL, info);
}

kvs_error kvs_delete(kvs_client *c, const void *key, size_t klen, kvs_reply_info *info)
{
    return request(c, KVS_OP_DEL, key, klen, NULL, 0, NULL, 0, NULL, info);
}

kvs_error kvs_recv(kvs_client *c, kvs_header *h, void *vbuf, size_t cap, size_t *vlen, int *server,
                   int timeout_ms)
{
    if (c == NULL || h == NULL || (vbuf == NULL && cap > 0))
        return KVS_ERR_INVALID_ARGUMENT;
    uint8_t msg[KVS_MAX_MESSAGE];
    int64_t deadline = timeout_ms < 0 ? INT64_MAX / 2 : now_ms() + timeout_ms;
    for (;;) {
        struct sockaddr_in from;
        const uint8_t *value;
        kvs_error e = recv_message(c, c->fd, msg, sizeof msg, deadline, 0, h, &value, &from);
        if (e != KVS_OK)
            return e;
        if (h->cid != c->cid) {
            atomic_fetch_add_explicit(&c->dropped, 1, memory_order_relaxed);
            continue;
        }
        if (vlen != NULL)
            *vlen = h->vlen;
        if (server != NULL)
            *server = server_id(c, &from);
        size_t copy = h->vlen < cap ? h->vlen : cap;
        if (copy > 0)
            memcpy(vbuf, value, copy);
        return KVS_OK;
    }
}

/* The client: UDP Gets/Sets/Deletes with timeout, bounded retries and (cid, seq, key) matching,
 * optional TCP writes, and the asynchronous send/receive pair used by the load generator. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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

struct kvs_client {
    int fd;                    /* UDP socket, unconnected: replies may come from any server */
    int *tcp;                  /* per server: connected TCP socket or -1 */
    struct sockaddr_in *addrs; /* per server */
    size_t nservers;
    kvs_ring *ring;
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

kvs_client *kvs_client_new(const kvs_config *cfg, kvs_error *err)
{
    kvs_error dummy;
    if (err == NULL)
        err = &dummy;
    if (cfg == NULL || cfg->servers == NULL || cfg->nservers == 0) {
        *err = KVS_ERR_INVALID_ARGUMENT;
        return NULL;
    }
    kvs_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        *err = KVS_ERR_NO_MEMORY;
        return NULL;
    }
    c->fd = -1;
    c->nservers = cfg->nservers;
    c->addrs = calloc(cfg->nservers, sizeof c->addrs[0]);
    c->tcp = malloc(cfg->nservers * sizeof c->tcp[0]);
    if (c->addrs == NULL || c->tcp == NULL) {
        *err = KVS_ERR_NO_MEMORY;
        goto fail;
    }
    for (size_t i = 0; i < cfg->nservers; i++)
        c->tcp[i] = -1;
    for (size_t i = 0; i < cfg->nservers; i++) {
        if (cfg->servers[i] == NULL ||
            (*err = parse_addr(cfg->servers[i], &c->addrs[i])) != KVS_OK) {
            *err = KVS_ERR_INVALID_ARGUMENT;
            goto fail;
        }
    }
    c->ring = kvs_ring_new((unsigned)cfg->nservers, cfg->vnodes, err);
    if (c->ring == NULL)
        goto fail;
    c->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        *err = KVS_ERR_SYSTEM;
        goto fail;
    }
    int rcvbuf = RCVBUF_BYTES;
    (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(c->fd, (struct sockaddr *)&any, sizeof any) < 0) {
        *err = KVS_ERR_SYSTEM;
        goto fail;
    }
    c->cid = cfg->cid;
    while (c->cid == 0) {
        if (getrandom(&c->cid, sizeof c->cid, 0) != sizeof c->cid) {
            *err = KVS_ERR_SYSTEM;
            goto fail;
        }
    }
    /* a random first seq, as the Python client: a reused cid does not collide with old ids */
    if (getrandom(&c->next_seq, sizeof c->next_seq, 0) != sizeof c->next_seq) {
        *err = KVS_ERR_SYSTEM;
        goto fail;
    }
    c->next_seq = (c->next_seq >> 1) | 1u;
    c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : KVS_DEFAULT_TIMEOUT_MS;
    c->retries = cfg->retries;
    c->tcp_writes = cfg->tcp_writes;
    atomic_init(&c->dropped, 0);
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
    if (c->tcp != NULL) {
        for (size_t i = 0; i < c->nservers; i++)
            if (c->tcp[i] >= 0)
                close(c->tcp[i]);
    }
    free(c->tcp);
    free(c->addrs);
    kvs_ring_free(c->ring);
    free(c);
}

uint32_t kvs_client_cid(const kvs_client *c)
{
    return c->cid;
}

const kvs_ring *kvs_client_ring(const kvs_client *c)
{
    return c->ring;
}

int kvs_client_fd(const kvs_client *c)
{
    return c->fd;
}

uint64_t kvs_client_dropped(const kvs_client *c)
{
    return atomic_load_explicit(&c->dropped, memory_order_relaxed);
}

static int server_index(const kvs_client *c, const struct sockaddr_in *from)
{
    for (size_t i = 0; i < c->nservers; i++) {
        if (c->addrs[i].sin_addr.s_addr == from->sin_addr.s_addr &&
            c->addrs[i].sin_port == from->sin_port)
            return (int)i;
    }
    return -1;
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

struct request {
    kvs_header h; /* the request header (op, cid, seq, key) */
    uint8_t reply_op;
    size_t len; /* encoded length in c->tx */
};

/* Copy a matched reply's value and facts out to the caller. */
static kvs_error finish(const kvs_header *rh, const uint8_t *value, void *buf, size_t cap,
                        size_t *vlen, kvs_reply_info *info, int server, unsigned attempts)
{
    if (info != NULL) {
        info->status = rh->status;
        info->flags = rh->flags;
        info->epoch = rh->epoch;
        info->ver = rh->ver;
        info->seq = rh->seq;
        info->attempts = attempts;
        info->server = server;
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

static kvs_error udp_exchange(kvs_client *c, const struct request *rq, unsigned origin, void *buf,
                              size_t cap, size_t *vlen, kvs_reply_info *info)
{
    for (unsigned attempt = 1; attempt <= c->retries + 1; attempt++) {
        ssize_t sent;
        do
            sent = sendto(c->fd, c->tx, rq->len, 0, (struct sockaddr *)&c->addrs[origin],
                          sizeof c->addrs[origin]);
        while (sent < 0 && errno == EINTR);
        if (sent < 0 && errno != ECONNREFUSED && errno != ENOBUFS)
            return KVS_ERR_SYSTEM;
        int64_t deadline = now_ms() + c->timeout_ms;
        for (;;) {
            int r = wait_fd(c->fd, POLLIN, deadline);
            if (r < 0)
                return KVS_ERR_SYSTEM;
            if (r == 0)
                break; /* this attempt timed out */
            struct sockaddr_in from;
            socklen_t flen = sizeof from;
            ssize_t n =
                recvfrom(c->fd, c->rx, sizeof c->rx, MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
            if (n < 0) {
                if (errno == EAGAIN || errno == EINTR || errno == ECONNREFUSED)
                    continue;
                return KVS_ERR_SYSTEM;
            }
            kvs_header rh;
            const uint8_t *value;
            if (kvs_decode(c->rx, (size_t)n, &rh, &value) != KVS_OK) {
                atomic_fetch_add_explicit(&c->dropped, 1, memory_order_relaxed);
                continue;
            }
            if (!matches(rq, &rh))
                continue; /* a late reply to an earlier request, or not ours */
            return finish(&rh, value, buf, cap, vlen, info, server_index(c, &from), attempt);
        }
    }
    return KVS_ERR_TIMEOUT;
}

static void tcp_close(kvs_client *c, unsigned s)
{
    if (c->tcp[s] >= 0) {
        close(c->tcp[s]);
        c->tcp[s] = -1;
    }
}

static kvs_error tcp_connect(kvs_client *c, unsigned s, int64_t deadline)
{
    if (c->tcp[s] >= 0)
        return KVS_OK;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return KVS_ERR_SYSTEM;
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&c->addrs[s], sizeof c->addrs[s]) < 0) {
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
    c->tcp[s] = fd;
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

/* One request per segment, wait for the reply; the agent frames the stream by vlen. A failed
 * attempt closes the connection (so no late reply can be mistaken for the next one) and retries
 * with the same request id on a fresh connection. */
static kvs_error tcp_exchange(kvs_client *c, const struct request *rq, unsigned origin,
                              kvs_reply_info *info)
{
    kvs_error e = KVS_ERR_TIMEOUT;
    for (unsigned attempt = 1; attempt <= c->retries + 1; attempt++) {
        int64_t deadline = now_ms() + c->timeout_ms;
        e = tcp_connect(c, origin, deadline);
        if (e == KVS_OK)
            e = tcp_io(c->tcp[origin], c->tx, rq->len, 1, deadline);
        if (e == KVS_OK)
            e = tcp_io(c->tcp[origin], c->rx, KVS_HEADER_SIZE, 0, deadline);
        if (e == KVS_OK) {
            size_t vlen = (size_t)((c->rx[2] << 8) | c->rx[3]);
            if (vlen > KVS_MAX_VALUE)
                e = KVS_ERR_MALFORMED;
            else
                e = tcp_io(c->tcp[origin], c->rx + KVS_HEADER_SIZE, vlen, 0, deadline);
        }
        kvs_header rh;
        const uint8_t *value;
        if (e == KVS_OK && kvs_decode(c->rx, sizeof c->rx, &rh, &value) == KVS_OK) {
            if (matches(rq, &rh))
                return finish(&rh, value, NULL, 0, NULL, info, (int)origin, attempt);
            e = KVS_ERR_MALFORMED;
        }
        tcp_close(c, origin);
    }
    return e;
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
    unsigned origin = kvs_ring_origin(c->ring, rq.h.key);
    if (c->tcp_writes && op != KVS_OP_GET)
        return tcp_exchange(c, &rq, origin, info);
    return udp_exchange(c, &rq, origin, buf, cap, outlen, info);
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

kvs_error kvs_send(kvs_client *c, uint8_t op, const uint8_t key[KVS_KEY_SIZE], const void *value,
                   size_t vlen, uint32_t seq)
{
    if (c == NULL || key == NULL || kvs_reply_op(op) == 0)
        return KVS_ERR_INVALID_ARGUMENT;
    uint8_t msg[KVS_MAX_MESSAGE];
    kvs_header h = {.op = op, .cid = c->cid, .seq = seq};
    memcpy(h.key, key, KVS_KEY_SIZE);
    size_t len;
    kvs_error e = kvs_encode(&h, value, vlen, msg, sizeof msg, &len);
    if (e != KVS_OK)
        return e;
    unsigned origin = kvs_ring_origin(c->ring, h.key);
    ssize_t sent;
    do
        sent = sendto(c->fd, msg, len, 0, (struct sockaddr *)&c->addrs[origin],
                      sizeof c->addrs[origin]);
    while (sent < 0 && errno == EINTR);
    return sent < 0 ? KVS_ERR_SYSTEM : KVS_OK;
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
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(c->fd, msg, sizeof msg, MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
        if (n < 0) {
            if (errno == EINTR || errno == ECONNREFUSED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return KVS_ERR_SYSTEM;
            int r = wait_fd(c->fd, POLLIN, deadline);
            if (r < 0)
                return KVS_ERR_SYSTEM;
            if (r == 0)
                return KVS_ERR_TIMEOUT;
            continue;
        }
        const uint8_t *value;
        if (kvs_decode(msg, (size_t)n, h, &value) != KVS_OK || h->cid != c->cid) {
            atomic_fetch_add_explicit(&c->dropped, 1, memory_order_relaxed);
            continue;
        }
        if (vlen != NULL)
            *vlen = h->vlen;
        if (server != NULL)
            *server = server_index(c, &from);
        size_t copy = h->vlen < cap ? h->vlen : cap;
        if (copy > 0)
            memcpy(vbuf, value, copy);
        return KVS_OK;
    }
}

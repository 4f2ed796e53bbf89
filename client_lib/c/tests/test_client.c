/* The client against fake servers in threads (UDP and TCP on loopback): routing to the origin,
 * retries with the same request id, replies from another server (a redirected Get), stale and
 * malformed datagrams, timeouts, status mapping, TCP writes, the async pair, and the load
 * generator binary run open- and closed-loop against a fake server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvswitch.h"
#include "testutil.h"

enum mode { ECHO, DROP_FIRST, REPLICA, NOISE_FIRST, SILENT, STATUS, TCP_ECHO, TCP_CLOSE_FIRST, SCRIPT };

struct fake {
    int fd, replica_fd, listen_fd;
    uint16_t port;
    enum mode mode;
    uint8_t status;
    atomic_int stop;
    atomic_int requests;
    uint32_t seqs[64]; /* written by the server thread before it publishes nseqs */
    atomic_int nseqs;
    int index;                    /* ring index of this server, for the routing check */
    const kvs_ring *_Atomic ring; /* published after index */
    atomic_int misrouted;
    /* SCRIPT: data request i is answered script[i] (`after` after the script: 0 = OK); a MOVED
     * carries
     * moved_version (+ the number of RING_GETs answered so far when grow is set) */
    uint8_t script[16];
    int nscript;
    uint8_t after;
    uint32_t moved_version;
    int grow;
    /* RING_GET (any mode but SILENT): answered with ring[0..ring_len) as the RING_REPLY value,
     * ring_status as its status (ringv: its value); ring_len 0: not answered. With grow, the version (first 4 bytes)
     * goes up by one per answer. */
    uint8_t ringv[256];
    size_t ring_len;
    uint8_t ring_status;
    atomic_int ring_gets;
    double at_ms[64]; /* when each data request arrived (CLOCK_MONOTONIC), beside seqs */
    pthread_t th;
};

static int udp_socket(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    if (port)
        *port = ntohs(a.sin_port);
    return fd;
}

/* The reply a well-behaved server would send. Gets return "v=" + the key text. */
static size_t make_reply(const kvs_header *rq, uint8_t status, uint8_t *out)
{
    kvs_header h = *rq;
    h.op = kvs_reply_op(rq->op);
    h.status = status;
    char value[32];
    size_t vlen = 0;
    if (rq->op == KVS_OP_GET && status == KVS_STATUS_OK)
        vlen = (size_t)snprintf(value, sizeof value, "v=%.16s", (const char *)rq->key);
    size_t len = 0;
    kvs_encode(&h, value, vlen, out, KVS_MAX_MESSAGE, &len);
    return len;
}

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Only the server thread writes seqs; the release store of nseqs publishes them. */
static void record_seq(struct fake *f, uint32_t seq)
{
    int n = atomic_load_explicit(&f->nseqs, memory_order_relaxed);
    if (n < 64) {
        f->seqs[n] = seq;
        f->at_ms[n] = mono_ms();
        atomic_store_explicit(&f->nseqs, n + 1, memory_order_release);
    }
}

static double at_ms(struct fake *f, int i)
{
    assert_true(i < atomic_load_explicit(&f->nseqs, memory_order_acquire));
    return f->at_ms[i];
}

static uint32_t seq_at(struct fake *f, int i)
{
    assert_true(i < atomic_load_explicit(&f->nseqs, memory_order_acquire));
    return f->seqs[i];
}

static void serve_tcp(struct fake *f)
{
    int first = 1;
    while (!atomic_load(&f->stop)) {
        struct pollfd p = {.fd = f->listen_fd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int c = accept(f->listen_fd, NULL, NULL);
        if (c < 0)
            continue;
        uint8_t buf[KVS_MAX_MESSAGE];
        for (;;) {
            ssize_t n = recv(c, buf, KVS_HEADER_SIZE, MSG_WAITALL);
            if (n != KVS_HEADER_SIZE)
                break;
            size_t vlen = (size_t)(buf[2] << 8 | buf[3]);
            if (vlen && recv(c, buf + KVS_HEADER_SIZE, vlen, MSG_WAITALL) != (ssize_t)vlen)
                break;
            kvs_header h;
            if (kvs_decode(buf, KVS_HEADER_SIZE + vlen, &h, NULL) != KVS_OK)
                break;
            record_seq(f, h.seq);
            atomic_fetch_add(&f->requests, 1);
            if (f->mode == TCP_CLOSE_FIRST && first) {
                first = 0;
                break; /* drop the connection without answering */
            }
            uint8_t out[KVS_MAX_MESSAGE];
            size_t len = make_reply(&h, KVS_STATUS_OK, out);
            send(c, out, len, MSG_NOSIGNAL);
        }
        close(c);
    }
}

static void *serve(void *arg)
{
    struct fake *f = arg;
    if (f->mode == TCP_ECHO || f->mode == TCP_CLOSE_FIRST) {
        serve_tcp(f);
        return NULL;
    }
    uint8_t buf[KVS_MAX_MESSAGE], out[KVS_MAX_MESSAGE];
    while (!atomic_load(&f->stop)) {
        struct pollfd p = {.fd = f->fd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        struct sockaddr_in from;
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(f->fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
        kvs_header h;
        if (n <= 0 || kvs_decode(buf, (size_t)n, &h, NULL) != KVS_OK)
            continue;
        if (h.op == KVS_OP_RING_GET) {
            int k = atomic_fetch_add(&f->ring_gets, 1);
            if (f->mode == SILENT || f->ring_len == 0)
                continue;
            uint8_t ring[256];
            memcpy(ring, f->ringv, f->ring_len);
            if (f->grow) /* versions 1 + k: always newer than the last */
                ring[3] = (uint8_t)(ring[3] + k);
            kvs_header r = h;
            r.op = KVS_OP_RING_REPLY;
            r.status = f->ring_status;
            size_t len = 0;
            kvs_encode(&r, ring, f->ring_len, out, sizeof out, &len);
            sendto(f->fd, out, len, 0, (struct sockaddr *)&from, flen);
            continue;
        }
        int count = atomic_fetch_add(&f->requests, 1);
        record_seq(f, h.seq);
        const kvs_ring *ring = atomic_load(&f->ring);
        if (ring && (int)kvs_ring_origin(ring, h.key) != f->index)
            atomic_fetch_add(&f->misrouted, 1);
        int fd = f->mode == REPLICA ? f->replica_fd : f->fd;
        if (f->mode == SILENT || (f->mode == DROP_FIRST && count == 0))
            continue;
        if (f->mode == NOISE_FIRST) {
            sendto(fd, "junk!", 5, 0, (struct sockaddr *)&from, flen);
            kvs_header w = h;
            w.seq ^= 0x5555; /* a late reply to another request */
            size_t len = make_reply(&w, KVS_STATUS_OK, out);
            sendto(fd, out, len, 0, (struct sockaddr *)&from, flen);
            w = h;
            w.key[0] ^= 1; /* right id, wrong key */
            len = make_reply(&w, KVS_STATUS_OK, out);
            sendto(fd, out, len, 0, (struct sockaddr *)&from, flen);
            w = h;
            w.cid ^= 1; /* another client's reply */
            len = make_reply(&w, KVS_STATUS_OK, out);
            sendto(fd, out, len, 0, (struct sockaddr *)&from, flen);
            len = make_reply(&h, KVS_STATUS_OK, out);
            out[2] = 0x7f; /* truncated: vlen beyond the datagram */
            sendto(fd, out, len, 0, (struct sockaddr *)&from, flen);
        }
        if (f->mode == SCRIPT) {
            uint8_t status = count < f->nscript ? f->script[count] : f->after;
            kvs_header r = h;
            r.op = kvs_reply_op(h.op);
            r.status = status;
            uint32_t v = f->moved_version + (f->grow ? (uint32_t)atomic_load(&f->ring_gets) : 0);
            const uint8_t version[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8),
                                        (uint8_t)v};
            size_t len = 0;
            if (status == KVS_STATUS_MOVED)
                kvs_encode(&r, version, 4, out, sizeof out, &len);
            else
                len = make_reply(&h, status, out);
            sendto(f->fd, out, len, 0, (struct sockaddr *)&from, flen);
            continue;
        }
        size_t len = make_reply(&h, f->mode == STATUS ? f->status : KVS_STATUS_OK, out);
        if (f->mode == STATUS)
            out[15] |= KVS_F_DUP; /* a repeated first result: the flags reach kvs_reply_info */
        sendto(fd, out, len, 0, (struct sockaddr *)&from, flen);
    }
    return NULL;
}

/* Sockets only: the caller may set the SCRIPT and ring fields, then fake_run. */
static void fake_init(struct fake *f, enum mode mode, uint8_t status)
{
    memset(f, 0, sizeof *f);
    f->mode = mode;
    f->status = status;
    f->fd = udp_socket(&f->port);
    f->replica_fd = udp_socket(NULL);
    f->listen_fd = -1;
    if (mode == TCP_ECHO || mode == TCP_CLOSE_FIRST) {
        f->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(f->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons(f->port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
        assert_int_equal(listen(f->listen_fd, 8), 0);
    }
}

static void fake_run(struct fake *f)
{
    assert_int_equal(pthread_create(&f->th, NULL, serve, f), 0);
}

static void fake_start_status(struct fake *f, enum mode mode, uint8_t status)
{
    fake_init(f, mode, status);
    fake_run(f);
}

static void fake_start(struct fake *f, enum mode mode)
{
    fake_start_status(f, mode, KVS_STATUS_OK);
}

static void fake_stop(struct fake *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->th, NULL);
    close(f->fd);
    close(f->replica_fd);
    if (f->listen_fd >= 0)
        close(f->listen_fd);
}

static kvs_client *client_for(struct fake *fakes, size_t n, unsigned timeout_ms, unsigned retries,
                              int tcp)
{
    char text[8][32]; /* kvs_client_new copies the addresses */
    const char *servers[8];
    for (size_t i = 0; i < n; i++) {
        snprintf(text[i], sizeof text[i], "127.0.0.1:%u", fakes[i].port);
        servers[i] = text[i];
    }
    kvs_config cfg = {.servers = servers,
                      .nservers = n,
                      .timeout_ms = timeout_ms,
                      .retries = retries,
                      .tcp_writes = tcp};
    kvs_error err;
    kvs_client *c = kvs_client_new(&cfg, &err);
    assert_non_null(c);
    assert_int_not_equal(kvs_client_cid(c), 0);
    return c;
}

static void test_basic_ops(void **state)
{
    (void)state;
    struct fake f;
    fake_start(&f, ECHO);
    kvs_client *c = client_for(&f, 1, 500, 0, 0);
    char buf[64];
    size_t vlen = 0;
    kvs_reply_info info;
    assert_int_equal(kvs_get(c, "hello", 5, buf, sizeof buf, &vlen, &info), KVS_OK);
    assert_int_equal(vlen, 7);
    assert_memory_equal(buf, "v=hello", 7);
    assert_int_equal(info.attempts, 1);
    assert_int_equal(info.server, 0);
    assert_int_equal(kvs_set(c, "hello", 5, "world", 5, &info), KVS_OK);
    assert_int_equal(kvs_delete(c, "hello", 5, NULL), KVS_OK);
    /* the value does not fit: the needed size is reported */
    assert_int_equal(kvs_get(c, "hello", 5, buf, 3, &vlen, NULL), KVS_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(vlen, 7);
    /* local errors never reach the server */
    int before = atomic_load(&f.requests);
    assert_int_equal(kvs_get(c, "0123456789abcdefX", 17, buf, sizeof buf, &vlen, NULL),
                     KVS_ERR_KEY_TOO_LONG);
    static uint8_t big[KVS_MAX_VALUE + 1];
    assert_int_equal(kvs_set(c, "k", 1, big, sizeof big, NULL), KVS_ERR_VALUE_TOO_LARGE);
    assert_int_equal(atomic_load(&f.requests), before);
    /* every request had its own seq */
    for (int i = 1; i < atomic_load(&f.nseqs); i++)
        assert_int_not_equal(seq_at(&f, i), seq_at(&f, i - 1));
    kvs_client_free(c);
    fake_stop(&f);
}

static void test_retry_keeps_seq(void **state)
{
    (void)state;
    struct fake f;
    fake_start(&f, DROP_FIRST);
    kvs_client *c = client_for(&f, 1, 100, 2, 0);
    kvs_reply_info info;
    assert_int_equal(kvs_set(c, "k1", 2, "x", 1, &info), KVS_OK);
    assert_int_equal(info.attempts, 2);
    assert_int_equal(atomic_load(&f.requests), 2);
    assert_int_equal(seq_at(&f, 0), seq_at(&f, 1));
    kvs_client_free(c);
    fake_stop(&f);
}

static void test_reply_from_other_server(void **state)
{
    (void)state;
    struct fake f;
    fake_start(&f, REPLICA);
    kvs_client *c = client_for(&f, 1, 500, 0, 0);
    char buf[64];
    size_t vlen;
    kvs_reply_info info;
    assert_int_equal(kvs_get(c, "hot", 3, buf, sizeof buf, &vlen, &info), KVS_OK);
    assert_memory_equal(buf, "v=hot", 5);
    assert_int_equal(info.server, -1); /* answered by an address that is not the origin */
    kvs_client_free(c);
    fake_stop(&f);
}

static void test_noise_is_ignored(void **state)
{
    (void)state;
    struct fake f;
    fake_start(&f, NOISE_FIRST);
    kvs_client *c = client_for(&f, 1, 500, 0, 0);
    char buf[64];
    size_t vlen;
    kvs_reply_info info;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(kvs_get(c, "key", 3, buf, sizeof buf, &vlen, &info), KVS_OK);
        assert_int_equal(vlen, 5);
        assert_int_equal(info.attempts, 1);
    }
    assert_true(kvs_client_dropped(c) >= 5); /* junk and truncated datagrams counted */
    kvs_client_free(c);
    fake_stop(&f);
}

static void test_timeout(void **state)
{
    (void)state;
    struct fake f;
    fake_start(&f, SILENT);
    kvs_client *c = client_for(&f, 1, 50, 2, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char buf[8];
    size_t vlen;
    assert_int_equal(kvs_get(c, "k", 1, buf, sizeof buf, &vlen, NULL), KVS_ERR_TIMEOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    /* 3 attempts of 50 ms, then the ring is asked for (at most min(50, 100) ms: unanswered) */
    assert_true(ms >= 195 && ms < 1000); /* deadlines are whole ms */
    assert_int_equal(atomic_load(&f.requests), 3);
    assert_int_equal(atomic_load(&f.ring_gets), 1);
    kvs_client_free(c);
    fake_stop(&f);
}

static void test_statuses(void **state)
{
    (void)state;
    const struct {
        uint8_t status;
        kvs_error err;
    } cases[] = {{KVS_STATUS_NOT_FOUND, KVS_ERR_NOT_FOUND},
                 {KVS_STATUS_BAD_REQUEST, KVS_ERR_BAD_REQUEST},
                 {KVS_STATUS_TOO_LARGE, KVS_ERR_TOO_LARGE},
                 {KVS_STATUS_STALE, KVS_ERR_STALE}, /* not applied: never a success */
                 {KVS_STATUS_DUPLICATE, KVS_OK},
                 {KVS_STATUS_SERVER_ERROR, KVS_ERR_SERVER},
                 {KVS_STATUS_UNAVAILABLE, KVS_ERR_UNAVAILABLE}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fake f;
        fake_start_status(&f, STATUS, cases[i].status);
        kvs_client *c = client_for(&f, 1, 500, 0, 0);
        kvs_reply_info info;
        assert_int_equal(kvs_set(c, "k", 1, "v", 1, &info), cases[i].err);
        assert_int_equal(info.status, cases[i].status);
        assert_int_equal(info.flags, KVS_F_DUP);
        kvs_client_free(c);
        fake_stop(&f);
    }
}

static void test_routing(void **state)
{
    (void)state;
    struct fake f[3];
    for (int i = 0; i < 3; i++)
        fake_start(&f[i], ECHO);
    kvs_client *c = client_for(f, 3, 500, 0, 0);
    for (int i = 0; i < 3; i++) {
        f[i].index = i;
        atomic_store(&f[i].ring, kvs_client_ring(c));
    }
    for (int i = 0; i < 300; i++) {
        char key[16];
        int n = snprintf(key, sizeof key, "user%d", i);
        assert_int_equal(kvs_set(c, key, (size_t)n, "v", 1, NULL), KVS_OK);
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(atomic_load(&f[i].misrouted), 0);
        assert_true(atomic_load(&f[i].requests) > 30); /* every server is somebody's origin */
    }
    for (int i = 0; i < 3; i++) /* the servers use the client's ring: stop them first */
        fake_stop(&f[i]);
    kvs_client_free(c);
}

static void test_tcp_writes(void **state)
{
    (void)state;
    struct fake f;
    fake_start(&f, TCP_ECHO);
    kvs_client *c = client_for(&f, 1, 500, 1, 1);
    for (int i = 0; i < 5; i++)
        assert_int_equal(kvs_set(c, "t", 1, "value", 5, NULL), KVS_OK);
    assert_int_equal(kvs_delete(c, "t", 1, NULL), KVS_OK);
    assert_int_equal(atomic_load(&f.requests), 6);
    kvs_client_free(c);
    fake_stop(&f);

    fake_start(&f, TCP_CLOSE_FIRST);
    c = client_for(&f, 1, 500, 1, 1);
    kvs_reply_info info;
    assert_int_equal(kvs_set(c, "t", 1, "value", 5, &info), KVS_OK);
    assert_int_equal(info.attempts, 2);
    assert_int_equal(seq_at(&f, 0), seq_at(&f, 1)); /* the retry on a new connection keeps the id */
    kvs_client_free(c);
    fake_stop(&f);
}

static void test_async_pair(void **state)
{
    (void)state;
    struct fake f;
    fake_start(&f, ECHO);
    kvs_client *c = client_for(&f, 1, 500, 0, 0);
    uint8_t key[KVS_KEY_SIZE];
    kvs_make_key("async", 5, key);
    for (uint32_t seq = 100; seq < 110; seq++)
        assert_int_equal(kvs_send(c, KVS_OP_GET, key, NULL, 0, seq), KVS_OK);
    assert_int_equal(kvs_send(c, KVS_OP_CONFIRM, key, NULL, 0, 1), KVS_ERR_INVALID_ARGUMENT);
    int seen = 0;
    kvs_header h;
    char buf[4];
    size_t vlen;
    int server;
    while (kvs_recv(c, &h, buf, sizeof buf, &vlen, &server, 500) == KVS_OK) {
        assert_int_equal(h.op, KVS_OP_GET_REPLY);
        assert_in_range(h.seq, 100, 109);
        assert_int_equal(vlen, 7);           /* full length ... */
        assert_memory_equal(buf, "v=as", 4); /* ... value truncated to the buffer */
        assert_int_equal(server, 0);
        if (++seen == 10)
            break;
    }
    assert_int_equal(seen, 10);
    assert_int_equal(kvs_recv(c, &h, buf, sizeof buf, &vlen, NULL, 0), KVS_ERR_TIMEOUT);
    kvs_client_free(c);
    fake_stop(&f);
}

struct worker {
    struct fake *fake;
    int id;
    int ok;
};

/* One handle per thread, used concurrently: each thread's replies come back to it alone. */
static void *blocking_worker(void *arg)
{
    struct worker *w = arg;
    kvs_client *c = client_for(w->fake, 1, 1000, 2, 0);
    for (int i = 0; i < 200; i++) {
        char key[16], buf[32];
        int n = snprintf(key, sizeof key, "t%d-%d", w->id, i);
        size_t vlen;
        if (kvs_set(c, key, (size_t)n, "x", 1, NULL) == KVS_OK &&
            kvs_get(c, key, (size_t)n, buf, sizeof buf, &vlen, NULL) == KVS_OK &&
            vlen == (size_t)n + 2 && memcmp(buf + 2, key, (size_t)n) == 0)
            w->ok++;
    }
    kvs_client_free(c);
    return NULL;
}

struct pair {
    kvs_client *c;
    int received;
};

static void *async_receiver(void *arg)
{
    struct pair *p = arg;
    kvs_header h;
    char buf[32];
    size_t vlen;
    while (p->received < 500 && kvs_recv(p->c, &h, buf, sizeof buf, &vlen, NULL, 1000) == KVS_OK)
        p->received++;
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    struct fake f;
    fake_start(&f, ECHO);
    pthread_t th[4];
    struct worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.fake = &f, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, blocking_worker, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].ok, 200);
    }
    /* one handle: a sending thread (this one) and a receiving thread at once */
    struct pair p = {.c = client_for(&f, 1, 1000, 0, 0)};
    pthread_t rx;
    assert_int_equal(pthread_create(&rx, NULL, async_receiver, &p), 0);
    uint8_t key[KVS_KEY_SIZE];
    kvs_make_key("pair", 4, key);
    for (uint32_t seq = 1; seq <= 500; seq++) {
        assert_int_equal(kvs_send(p.c, KVS_OP_GET, key, NULL, 0, seq), KVS_OK);
        if (seq % 50 == 0)
            usleep(1000); /* stay within the socket buffers */
    }
    pthread_join(rx, NULL);
    assert_int_equal(p.received, 500);
    kvs_client_free(p.c);
    fake_stop(&f);
}

static void test_bad_config(void **state)
{
    (void)state;
    kvs_error err;
    const char *bad[] = {"127.0.0.1:0", "127.0.0.1:x", "127.0.0.1:70000", ":8900",
                         "no.such.host.invalid:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kvs_config cfg = {.servers = &bad[i], .nservers = 1};
        assert_null(kvs_client_new(&cfg, &err));
        assert_int_equal(err, KVS_ERR_INVALID_ARGUMENT);
    }
    kvs_config none = {0};
    assert_null(kvs_client_new(&none, &err));
    assert_null(kvs_client_new(NULL, NULL));
    const char *good[] = {"localhost"};
    kvs_config cfg;
    kvs_config_defaults(&cfg, good, 1);
    assert_int_equal(cfg.timeout_ms, 500);
    assert_int_equal(cfg.retries, 3);
    assert_int_equal(cfg.vnodes, KVS_DEFAULT_VNODES);
    assert_int_equal(cfg.tcp_writes, 0);
    cfg.cid = 42;
    kvs_client *c = kvs_client_new(&cfg, &err);
    assert_non_null(c);
    assert_int_equal(kvs_client_cid(c), 42);
    kvs_client_free(c);
}

static long json_int(const char *json, const char *field)
{
    long v = json_long(json, field);
    if (v == -__LONG_MAX__ - 1)
        fail_msg("no %s in %s", field, json);
    return v;
}

/* The loadgen binary `make test` built (KVS_LOADGEN); the test is skipped without it. */
static const char *loadgen_or_skip(void)
{
    const char *bin = getenv("KVS_LOADGEN");
    if (bin == NULL || access(bin, X_OK) != 0) {
        print_message("KVS_LOADGEN not set: run through `make test`; skipped\n");
        skip();
    }
    return bin;
}

static void test_loadgen(void **state)
{
    (void)state;
    const char *bin = loadgen_or_skip();
    struct fake f[2];
    fake_start(&f[0], ECHO);
    fake_start(&f[1], ECHO);
    char servers[64];
    snprintf(servers, sizeof servers, "127.0.0.1:%u,127.0.0.1:%u", f[0].port, f[1].port);
    static char out[1 << 16];
    char *open_argv[] = {
        (char *)bin, "--servers", servers,      "--rate", "2000",    "--duration",
        "1",         "--keys",    "1000",       "--zipf", "1.2",     "--write-ratio",
        "0.2",       "--shift",   "hot-in:0.3", "--json", "--quiet", NULL};
    assert_int_equal(run_capture(open_argv, out, sizeof out), 0);
    long sent = json_int(out, "sent"), received = json_int(out, "received");
    assert_in_range(sent, 1800, 2001); /* 2 000 scheduled; a stall over the 100 ms grace loses some */
    assert_int_equal(received, sent);
    assert_int_equal(json_int(out, "lost"), 0);
    assert_int_equal(json_int(out, "shifts"), 3);
    assert_int_equal(atomic_load(&f[0].requests) + atomic_load(&f[1].requests), sent);
    assert_non_null(strstr(out, "\"intervals\": [{\"t\": "));
    /* per-interval counts per server add up to the totals */
    long interval_sent = 0;
    for (const char *at = strstr(out, "\"intervals\"");
         (at = strstr(at, "\"sent_per_server\": [")) != NULL;) {
        at += strlen("\"sent_per_server\": [");
        char *end;
        interval_sent += strtol(at, &end, 10);
        interval_sent += strtol(end + 1, NULL, 10);
    }
    assert_int_equal(interval_sent, sent);

    char *closed_argv[] = {(char *)bin,    "--servers", servers,         "--closed",
                           "--duration",   "0.5",       "--keys",        "100",
                           "--value-size", "1000",      "--write-ratio", "0.5",
                           "--preload",    "--json",    "--quiet",       NULL};
    assert_int_equal(run_capture(closed_argv, out, sizeof out), 0);
    assert_true(json_int(out, "received") > 100);
    assert_int_equal(json_int(out, "lost"), 0);

    char *poisson_argv[] = {(char *)bin, "--servers",  servers,      "--rate",
                            "2000",      "--duration", "0.5",        "--arrivals",
                            "poisson",   "--shift",    "random:0.2", "--seed",
                            "9",         "--json",     "--quiet",    NULL};
    assert_int_equal(run_capture(poisson_argv, out, sizeof out), 0);
    sent = json_int(out, "sent"); /* Poisson count: mean 1000, sd ~32 */
    assert_in_range(sent, 850, 1150);
    assert_int_equal(json_int(out, "received"), sent);
    assert_int_equal(json_int(out, "shifts"), 2);

    char *window_argv[] = {(char *)bin,  "--servers", servers,   "--window", "16",
                           "--duration", "0.5",       "--keys",  "100",      "--write-ratio",
                           "0.3",        "--json",    "--quiet", NULL};
    assert_int_equal(run_capture(window_argv, out, sizeof out), 0);
    assert_true(json_int(out, "received") > 100);
    assert_int_equal(json_int(out, "received"), json_int(out, "sent"));
    assert_int_equal(json_int(out, "window"), 16);

    /* replies from an address that is not the origin (a replica after a redirect) still match */
    struct fake rf;
    fake_start(&rf, REPLICA);
    char rservers[32];
    snprintf(rservers, sizeof rservers, "127.0.0.1:%u", rf.port);
    char *replica_argv[] = {(char *)bin,  "--servers", rservers, "--rate",  "1000",
                            "--duration", "0.3",       "--json", "--quiet", NULL};
    assert_int_equal(run_capture(replica_argv, out, sizeof out), 0);
    assert_int_equal(json_int(out, "received"), json_int(out, "sent"));
    assert_int_equal(json_int(out, "replies_unknown_server"), json_int(out, "received"));
    fake_stop(&rf);

    char *bad_argv[] = {(char *)bin, "--servers", servers, "--zipf", "-1", NULL};
    assert_int_equal(run_capture(bad_argv, out, sizeof out), 2);
    char *long_key_argv[] = {(char *)bin,    "--servers",          servers,
                             "--key-prefix", "a-very-long-prefix", NULL};
    assert_int_equal(run_capture(long_key_argv, out, sizeof out), 2);
    fake_stop(&f[0]);
    fake_stop(&f[1]);
}

/* ---- elastic membership: MOVED, RETRY, UNAVAILABLE and timeouts against fake servers ---- */

/* f's RING_GET answer: ring `version` with the fakes ms[i] as members ids[i] (127.0.0.1). */
static void fake_ring(struct fake *f, uint32_t version, const uint16_t *ids, struct fake *const *ms,
                      size_t n)
{
    kvs_member m[8];
    for (size_t i = 0; i < n; i++)
        m[i] = (kvs_member){.id = ids[i], .port = ms[i]->port, .ipv4 = INADDR_LOOPBACK};
    assert_int_equal(kvs_ring_encode(version, KVS_DEFAULT_VNODES, m, n, f->ringv, sizeof f->ringv,
                                     &f->ring_len),
                     KVS_OK);
    f->ring_status = KVS_STATUS_OK;
}

static void fake_script(struct fake *f, const uint8_t *script, int n, uint32_t moved_version)
{
    memcpy(f->script, script, (size_t)n);
    f->nscript = n;
    f->moved_version = moved_version;
}

/* One SCRIPT server (id 0) and a client of it; ring_version > 0: RING_GET is answered with that
 * version and the server itself as the only member (grow: a newer one each time). */
static kvs_client *scripted(struct fake *a, const uint8_t *script, int n, uint32_t moved_version,
                            uint32_t ring_version, int grow, unsigned timeout_ms, unsigned retries)
{
    fake_init(a, SCRIPT, 0);
    fake_script(a, script, n, moved_version);
    a->grow = grow;
    struct fake *self[] = {a};
    if (ring_version > 0)
        fake_ring(a, ring_version, (const uint16_t[]){0}, self, 1);
    fake_run(a);
    return client_for(a, 1, timeout_ms, retries, 0);
}

/* A key whose origin among servers {0, 1} (version 0) is `want`. */
static void key_with_origin(const kvs_client *c, unsigned want, char *key, size_t *klen)
{
    for (int i = 0;; i++) {
        uint8_t k16[KVS_KEY_SIZE];
        int n = snprintf(key, 16, "key%d", i);
        kvs_make_key(key, (size_t)n, k16);
        if (kvs_ring_origin(kvs_client_ring(c), k16) == want) {
            *klen = (size_t)n;
            return;
        }
    }
}

/* One server answers MOVED, then (to the RING_GET) a ring naming a server the client did not
 * know, which gives the real reply: the resend keeps the request id. */
static void test_moved_learns_new_server(void **state)
{
    (void)state;
    struct fake a, b;
    fake_init(&b, ECHO, 0);
    fake_init(&a, SCRIPT, 0);
    const uint8_t moved[] = {KVS_STATUS_MOVED};
    fake_script(&a, moved, 1, 2);
    struct fake *mb[] = {&b};
    fake_ring(&a, 2, (const uint16_t[]){5}, mb, 1);
    fake_run(&a);
    fake_run(&b);
    kvs_client *c = client_for(&a, 1, 500, 0, 0);
    assert_int_equal(kvs_client_ring_version(c), 0);
    assert_int_equal(kvs_client_server(c, 5, NULL, NULL), KVS_ERR_INVALID_ARGUMENT);
    kvs_reply_info info;
    char buf[32];
    size_t vlen;
    assert_int_equal(kvs_get(c, "moving", 6, buf, sizeof buf, &vlen, &info), KVS_OK);
    assert_memory_equal(buf, "v=moving", 8);
    assert_int_equal(info.moved, 1);
    assert_int_equal(info.attempts, 2);
    assert_int_equal(info.server, 5); /* the new server, by its id */
    assert_int_equal(atomic_load(&a.requests), 1);
    assert_int_equal(atomic_load(&a.ring_gets), 1); /* asked the server that said MOVED */
    assert_int_equal(atomic_load(&b.requests), 1);
    assert_int_equal(atomic_load(&b.ring_gets), 0);
    assert_int_equal(seq_at(&a, 0), seq_at(&b, 0));
    assert_int_equal(kvs_client_ring_version(c), 2);
    assert_int_equal(kvs_client_ring_changes(c), 1);
    const kvs_ring *ring = kvs_client_ring(c);
    assert_int_equal(kvs_ring_servers(ring), 1);
    assert_int_equal(kvs_ring_member(ring, 0), 5);
    uint32_t ip;
    uint16_t port;
    assert_int_equal(kvs_client_server(c, 5, &ip, &port), KVS_OK);
    assert_int_equal(ip, INADDR_LOOPBACK);
    assert_int_equal(port, b.port);
    assert_int_equal(kvs_client_server(c, 0, NULL, &port), KVS_OK); /* never forgotten */
    assert_int_equal(port, a.port);
    /* the next request goes to the new origin at once */
    assert_int_equal(kvs_set(c, "other", 5, "x", 1, &info), KVS_OK);
    assert_int_equal(info.attempts, 1);
    assert_int_equal(atomic_load(&b.requests), 2);
    kvs_client_free(c);
    fake_stop(&a);
    fake_stop(&b);
}

/* The same server answers MOVED, then RING_REPLY (a newer ring where it is still the origin),
 * then the real reply. */
static void test_moved_same_server(void **state)
{
    (void)state;
    struct fake a;
    const uint8_t moved[] = {KVS_STATUS_MOVED};
    kvs_client *c = scripted(&a, moved, 1, 4, 4, 0, 500, 0);
    kvs_reply_info info;
    assert_int_equal(kvs_set(c, "k", 1, "v", 1, &info), KVS_OK);
    assert_int_equal(info.moved, 1);
    assert_int_equal(info.attempts, 2);
    assert_int_equal(atomic_load(&a.requests), 2);
    assert_int_equal(atomic_load(&a.ring_gets), 1);
    assert_int_equal(seq_at(&a, 0), seq_at(&a, 1));
    assert_int_equal(kvs_client_ring_version(c), 4);
    kvs_client_free(c);
    fake_stop(&a);
}

/* Every answer is MOVED with a newer version and every ring is newer still: 3 refreshes, then
 * KVS_ERR_MOVED. */
static void test_too_many_moved(void **state)
{
    (void)state;
    struct fake a;
    const uint8_t moved[] = {KVS_STATUS_MOVED, KVS_STATUS_MOVED, KVS_STATUS_MOVED,
                             KVS_STATUS_MOVED, KVS_STATUS_MOVED, KVS_STATUS_MOVED};
    kvs_client *c = scripted(&a, moved, 6, 1, 1, 1, 500, 3);
    kvs_reply_info info;
    assert_int_equal(kvs_delete(c, "k", 1, &info), KVS_ERR_MOVED);
    assert_int_equal(info.status, KVS_STATUS_MOVED);
    assert_int_equal(info.moved, KVS_MAX_REROUTES);
    assert_int_equal(info.attempts, KVS_MAX_REROUTES + 1);
    assert_int_equal(atomic_load(&a.requests), KVS_MAX_REROUTES + 1);
    assert_int_equal(atomic_load(&a.ring_gets), KVS_MAX_REROUTES);
    assert_int_equal(kvs_client_ring_version(c), KVS_MAX_REROUTES);
    kvs_client_free(c);
    fake_stop(&a);

    /* MOVED with a version the client already has (the agent is behind): no RING_GET, a
     * RETRY-like wait before each resend, and the same limit */
    c = scripted(&a, moved, 6, 0, 0, 0, 500, 0);
    double t0 = mono_ms();
    assert_int_equal(kvs_delete(c, "k", 1, &info), KVS_ERR_MOVED);
    double ms = mono_ms() - t0;
    assert_int_equal(atomic_load(&a.requests), KVS_MAX_REROUTES + 1);
    assert_int_equal(atomic_load(&a.ring_gets), 0);
    assert_true(ms >= 2 + 4 + 8); /* waited 2, 4, 8 ms */
    kvs_client_free(c);
    fake_stop(&a);
}

/* RETRY: resend after 2, 4, 8 ms (doubling), the same request id. */
static void test_retry_backoff(void **state)
{
    (void)state;
    struct fake a;
    const uint8_t retry[] = {KVS_STATUS_RETRY, KVS_STATUS_RETRY, KVS_STATUS_RETRY};
    kvs_client *c = scripted(&a, retry, 3, 0, 0, 0, 500, 0);
    kvs_reply_info info;
    assert_int_equal(kvs_set(c, "k", 1, "v", 1, &info), KVS_OK);
    assert_int_equal(info.retried, 3);
    assert_int_equal(info.attempts, 4);
    assert_int_equal(atomic_load(&a.requests), 4);
    assert_int_equal(atomic_load(&a.ring_gets), 0);
    for (int i = 1; i < 4; i++) {
        assert_int_equal(seq_at(&a, i), seq_at(&a, 0));
        double gap = at_ms(&a, i) - at_ms(&a, i - 1), want = 1 << i; /* 2, 4, 8 */
        if (gap < want || gap > want + 40)
            fail_msg("RETRY resend %d came %.2f ms after the last, want %.0f ms", i, gap, want);
    }
    kvs_client_free(c);
    fake_stop(&a);

    /* RETRY forever: the waits grow to 50 ms and stop within the request's time */
    static const uint8_t always[16] = {
        KVS_STATUS_RETRY, KVS_STATUS_RETRY, KVS_STATUS_RETRY, KVS_STATUS_RETRY,
        KVS_STATUS_RETRY, KVS_STATUS_RETRY, KVS_STATUS_RETRY, KVS_STATUS_RETRY,
        KVS_STATUS_RETRY, KVS_STATUS_RETRY, KVS_STATUS_RETRY, KVS_STATUS_RETRY,
        KVS_STATUS_RETRY, KVS_STATUS_RETRY, KVS_STATUS_RETRY, KVS_STATUS_RETRY};
    c = scripted(&a, always, 16, 0, 0, 0, 100, 1); /* the request's time: 2 x 100 ms */
    double t0 = mono_ms();
    assert_int_equal(kvs_set(c, "k", 1, "v", 1, &info), KVS_ERR_RETRY);
    double ms = mono_ms() - t0;
    assert_int_equal(info.status, KVS_STATUS_RETRY);
    /* sends at 0, 2, 6, 14, 30, 62, 112 and 162 ms; the next wait (50) would end after 200 ms
     * (a late wake-up can cost the last one) */
    int n = atomic_load(&a.requests);
    if (n < 7 || n > 8 || ms > 200 + 40)
        fail_msg("%d RETRY resends over %.1f ms", n, ms);
    assert_int_equal(info.retried, n - 1);
    double last = at_ms(&a, n - 1) - at_ms(&a, n - 2);
    assert_true(last >= 32 && last <= 50 + 40); /* capped at 50 */
    kvs_client_free(c);
    fake_stop(&a);
}

/* UNAVAILABLE (as the switch answers for a dead server) or a timeout: another member is asked for
 * the ring; a newer ring that names another origin gets the resend, the same origin the error. */
static void test_unavailable_and_timeout_reroute(void **state)
{
    (void)state;
    for (int silent = 0; silent <= 1; silent++) {
        for (int moves = 0; moves <= 1; moves++) {
            struct fake pair[2];
            struct fake *a = &pair[0], *b = &pair[1];
            fake_init(a, silent ? SILENT : STATUS, KVS_STATUS_UNAVAILABLE);
            fake_init(b, ECHO, 0);
            struct fake *both[] = {a, b}, *only_b[] = {b};
            if (moves)
                fake_ring(b, 3, (const uint16_t[]){1}, only_b, 1);
            else
                fake_ring(b, 3, (const uint16_t[]){0, 1}, both, 2);
            fake_run(a);
            fake_run(b);
            kvs_client *c = client_for(pair, 2, 50, 1, 0);
            char key[16];
            size_t klen;
            key_with_origin(c, 0, key, &klen);
            kvs_reply_info info = {0};
            kvs_error e = kvs_set(c, key, klen, "v", 1, &info);
            if (moves) {
                assert_int_equal(e, KVS_OK);
                assert_int_equal(info.rerouted, 1);
                assert_int_equal(info.server, 1);
                assert_int_equal(atomic_load(&b->requests), 1);
            } else {
                assert_int_equal(e, silent ? KVS_ERR_TIMEOUT : KVS_ERR_UNAVAILABLE);
                assert_int_equal(info.rerouted, 0);
                assert_int_equal(atomic_load(&b->requests), 0);
            }
            /* UNAVAILABLE is final at once; a silent server gets its retries first */
            assert_int_equal(atomic_load(&a->requests), silent ? 2 : 1);
            assert_int_equal(atomic_load(&a->ring_gets), 0); /* "another member" */
            assert_int_equal(atomic_load(&b->ring_gets), 1);
            assert_int_equal(kvs_client_ring_version(c), 3);
            kvs_client_free(c);
            fake_stop(a);
            fake_stop(b);
        }
    }
}

/* kvs_client_refresh_ring: a malformed ring, a non-OK status, an unknown id, no answer. */
static void test_refresh_ring(void **state)
{
    (void)state;
    struct fake a;
    fake_init(&a, ECHO, 0);
    struct fake *ma[] = {&a};
    fake_ring(&a, 9, (const uint16_t[]){0}, ma, 1);
    a.ringv[5] = 0; /* vnodes 0 */
    fake_run(&a);
    kvs_client *c = client_for(&a, 1, 100, 0, 0);
    assert_int_equal(kvs_client_refresh_ring(c, 0), KVS_ERR_MALFORMED);
    assert_int_equal(kvs_client_ring_version(c), 0);
    assert_int_equal(kvs_client_refresh_ring(c, 7), KVS_ERR_INVALID_ARGUMENT);
    kvs_client_free(c);
    fake_stop(&a);

    fake_init(&a, ECHO, 0);
    fake_ring(&a, 9, (const uint16_t[]){0}, ma, 1);
    a.ring_status = KVS_STATUS_SERVER_ERROR;
    fake_run(&a);
    c = client_for(&a, 1, 100, 0, 0);
    assert_int_equal(kvs_client_refresh_ring(c, -1), KVS_ERR_SERVER);
    kvs_client_free(c);
    fake_stop(&a);

    fake_init(&a, ECHO, 0);
    fake_ring(&a, 9, (const uint16_t[]){0}, ma, 1);
    fake_run(&a);
    c = client_for(&a, 1, 100, 0, 0);
    assert_int_equal(kvs_client_refresh_ring(c, -1), KVS_OK);
    assert_int_equal(kvs_client_ring_version(c), 9);
    const kvs_ring *old = kvs_client_ring(c);
    assert_int_equal(kvs_client_refresh_ring(c, 0), KVS_OK); /* same version: kept */
    assert_ptr_equal(kvs_client_ring(c), old);
    assert_int_equal(kvs_client_ring_changes(c), 1);
    kvs_client_free(c);
    fake_stop(&a);

    fake_init(&a, SILENT, 0);
    fake_run(&a);
    c = client_for(&a, 1, 50, 0, 0);
    assert_int_equal(kvs_client_refresh_ring(c, -1), KVS_ERR_TIMEOUT);
    kvs_client_free(c);
    fake_stop(&a);
}

/* The async pair under the same rules: kvs_follow_* with kvs_send/kvs_recv. */
static void test_follow_async(void **state)
{
    (void)state;
    struct fake a, b;
    fake_init(&b, ECHO, 0);
    fake_init(&a, SCRIPT, 0);
    const uint8_t script[] = {KVS_STATUS_RETRY, KVS_STATUS_MOVED};
    fake_script(&a, script, 2, 6);
    struct fake *mb[] = {&b};
    fake_ring(&a, 6, (const uint16_t[]){1}, mb, 1);
    fake_run(&a);
    fake_run(&b);
    kvs_client *c = client_for(&a, 1, 500, 0, 0);
    uint8_t key[KVS_KEY_SIZE];
    kvs_make_key("async", 5, key);
    kvs_follow f;
    kvs_follow_start(c, &f, key);
    assert_int_equal(f.origin, 0);
    assert_int_equal(kvs_follow_send(c, &f, KVS_OP_GET, key, NULL, 0, 77), KVS_OK);
    const kvs_next want[] = {KVS_NEXT_RESEND, KVS_NEXT_RESEND, KVS_NEXT_DONE};
    for (int i = 0; i < 3; i++) {
        kvs_header h;
        char v[32];
        size_t vlen;
        int server;
        assert_int_equal(kvs_recv(c, &h, v, sizeof v, &vlen, &server, 500), KVS_OK);
        assert_int_equal(h.seq, 77);
        unsigned delay;
        kvs_error err;
        assert_int_equal(kvs_follow_reply(c, &f, &h, v, vlen, server, &delay, &err), want[i]);
        if (want[i] == KVS_NEXT_DONE) {
            assert_int_equal(err, KVS_OK);
            assert_int_equal(server, 1);
            break;
        }
        assert_int_equal(delay, i == 0 ? KVS_RETRY_FIRST_MS : 0);
        assert_int_equal(f.origin, i == 0 ? 0 : 1);
        assert_int_equal(kvs_follow_send(c, &f, KVS_OP_GET, key, NULL, 0, 77), KVS_OK);
    }
    assert_int_equal(f.retried, 1);
    assert_int_equal(f.moved, 1);
    assert_int_equal(kvs_client_ring_version(c), 6);
    /* a timeout with a ring that does not move the key: over, KVS_ERR_TIMEOUT */
    kvs_error err;
    assert_int_equal(kvs_follow_timeout(c, &f, key, &err), KVS_NEXT_DONE);
    assert_int_equal(err, KVS_ERR_TIMEOUT);
    kvs_client_free(c);
    fake_stop(&a);
    fake_stop(&b);
}

/* The load generator under the membership rules, in all three modes: a server that answers
 * MOVED to everything and gives a ring naming a new server; then RETRY answers. */
static void test_loadgen_membership(void **state)
{
    (void)state;
    const char *bin = loadgen_or_skip();
    static char out[1 << 16];
    const char *modes[][4] = {{"--rate", "1000", NULL, NULL},
                              {"--window", "8", NULL, NULL},
                              {"--closed", NULL, NULL, NULL}};
    for (size_t m = 0; m < 3; m++) {
        struct fake a, b;
        fake_init(&b, ECHO, 0);
        fake_init(&a, SCRIPT, 0);
        a.after = KVS_STATUS_MOVED;
        a.moved_version = 2;
        struct fake *mb[] = {&b};
        fake_ring(&a, 2, (const uint16_t[]){1}, mb, 1);
        fake_run(&a);
        fake_run(&b);
        char servers[32];
        snprintf(servers, sizeof servers, "127.0.0.1:%u", a.port);
        char *argv[16] = {(char *)bin, "--servers", servers, "--duration", "0.5", "--keys", "100",
                          "--write-ratio", "0.3", "--json", "--quiet"};
        int k = 11;
        for (int i = 0; i < 4 && modes[m][i] != NULL; i++)
            argv[k++] = (char *)modes[m][i];
        argv[k] = NULL;
        assert_int_equal(run_capture(argv, out, sizeof out), 0);
        long sent = json_int(out, "sent"), moved = json_int(out, "moved_resends");
        print_message("%s: sent %ld, moved_resends %ld, server A %d, B %d requests\n", modes[m][0],
                      sent, moved, atomic_load(&a.requests), atomic_load(&b.requests));
        assert_true(sent > 50);
        assert_int_equal(json_int(out, "received"), sent);
        assert_int_equal(json_int(out, "lost"), 0);
        assert_int_equal(json_int(out, "ok"), sent);
        assert_int_equal(json_int(out, "ring_version"), 2);
        assert_int_equal(json_int(out, "ring_changes"), 1);
        assert_int_equal(atomic_load(&a.ring_gets), 1);
        /* every request A got was MOVED and resent; B answered every request */
        assert_true(moved >= 1);
        assert_int_equal(moved, atomic_load(&a.requests));
        assert_int_equal(atomic_load(&b.requests), sent);
        assert_non_null(strstr(out, "\"replies_unknown_server\": 0, \"intervals\""));
        fake_stop(&a);
        fake_stop(&b);
    }
    /* RETRY: three waits, then OK */
    struct fake a;
    fake_init(&a, SCRIPT, 0);
    const uint8_t retry[] = {KVS_STATUS_RETRY, KVS_STATUS_RETRY, KVS_STATUS_RETRY};
    fake_script(&a, retry, 3, 0);
    fake_run(&a);
    char servers[32];
    snprintf(servers, sizeof servers, "127.0.0.1:%u", a.port);
    char *argv[] = {(char *)bin, "--servers", servers, "--rate", "200", "--duration", "0.3",
                    "--json",    "--quiet",   NULL};
    assert_int_equal(run_capture(argv, out, sizeof out), 0);
    assert_int_equal(json_int(out, "retry_resends"), 3);
    assert_int_equal(json_int(out, "received"), json_int(out, "sent"));
    assert_int_equal(json_int(out, "ring_version"), 0);
    assert_int_equal(atomic_load(&a.requests), json_int(out, "sent") + 3);
    fake_stop(&a);
}

/* The open loop's per-interval "lost" (requests sent in that interval and never answered in
 * time), added up. */
static long interval_lost(const char *json)
{
    long sum = 0;
    for (const char *at = strstr(json, "\"intervals\"");
         at != NULL && (at = strstr(at, "\"lost\": ")) != NULL;) {
        at += strlen("\"lost\": ");
        sum += strtol(at, NULL, 10);
    }
    return sum;
}

/* The load generator when the key's server is dead: UNAVAILABLE (the switch's answer) and
 * timeouts make it ask another member for the ring, which no longer has the dead server. */
static void test_loadgen_dead_server(void **state)
{
    (void)state;
    const char *bin = loadgen_or_skip();
    static char out[1 << 16];
    const struct {
        enum mode a_mode;
        const char *mode, *arg;
    } cases[] = {{STATUS, "--rate", "500"}, {SILENT, "--rate", "500"}, {SILENT, "--window", "4"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fake pair[2];
        struct fake *a = &pair[0], *b = &pair[1];
        fake_init(a, cases[i].a_mode, KVS_STATUS_UNAVAILABLE);
        fake_init(b, ECHO, 0);
        struct fake *only_b[] = {b};
        fake_ring(b, 3, (const uint16_t[]){1}, only_b, 1);
        fake_run(a);
        fake_run(b);
        char servers[64];
        snprintf(servers, sizeof servers, "127.0.0.1:%u,127.0.0.1:%u", a->port, b->port);
        char *argv[] = {(char *)bin,  "--servers",    servers, (char *)cases[i].mode,
                        (char *)cases[i].arg, "--duration", "0.6", "--timeout-ms", "100",
                        "--keys",     "100",          "--json",  "--quiet", NULL};
        assert_int_equal(run_capture(argv, out, sizeof out), 0);
        long sent = json_int(out, "sent"), lost = json_int(out, "lost"),
             rerouted = json_int(out, "reroute_resends");
        print_message("A %s, %s: sent %ld, lost %ld, reroute_resends %ld, A got %d\n",
                      cases[i].a_mode == SILENT ? "silent" : "UNAVAILABLE", cases[i].mode, sent,
                      lost, rerouted, atomic_load(&a->requests));
        assert_int_equal(json_int(out, "ring_version"), 3);
        assert_int_equal(json_int(out, "errors"), 0);
        assert_true(atomic_load(&a->requests) >= 1);
        if (cases[i].a_mode == SILENT && strcmp(cases[i].mode, "--rate") == 0) {
            /* the open loop never resends a lost request; later ones avoid the dead server */
            assert_int_equal(lost, atomic_load(&a->requests));
            assert_int_equal(rerouted, 0);
            assert_true(lost < sent / 2);
            assert_int_equal(interval_lost(out), lost); /* each counted in its send interval */
        } else {
            assert_int_equal(lost, 0);
            assert_int_equal(rerouted, atomic_load(&a->requests));
        }
        assert_int_equal(atomic_load(&b->requests), sent - lost);
        fake_stop(a);
        fake_stop(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_ops),
        cmocka_unit_test(test_retry_keeps_seq),
        cmocka_unit_test(test_reply_from_other_server),
        cmocka_unit_test(test_noise_is_ignored),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_statuses),
        cmocka_unit_test(test_routing),
        cmocka_unit_test(test_tcp_writes),
        cmocka_unit_test(test_async_pair),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_moved_learns_new_server),
        cmocka_unit_test(test_moved_same_server),
        cmocka_unit_test(test_too_many_moved),
        cmocka_unit_test(test_retry_backoff),
        cmocka_unit_test(test_unavailable_and_timeout_reroute),
        cmocka_unit_test(test_refresh_ring),
        cmocka_unit_test(test_follow_async),
        cmocka_unit_test(test_loadgen),
        cmocka_unit_test(test_loadgen_membership),
        cmocka_unit_test(test_loadgen_dead_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

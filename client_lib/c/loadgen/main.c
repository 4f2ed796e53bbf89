/*
 * kvswitch-loadgen: open-loop (or closed-loop) load generator on the KVSwitch C library.
 *
 * Open loop: the main thread sends at the target rate whatever happens to replies (uniform or
 * Poisson spacing); a receive thread matches replies by (cid, seq, key) against a table of
 * outstanding requests and records each latency, measured from the request's scheduled send time
 * (so a sender that falls behind shows up as latency, not as silently lower load).
 * Closed loop: one thread, one request outstanding, as fast as replies come back.
 * Keys: "<prefix><id>" for id in 0..keys-1, ranks drawn from Zipf(skew), rank -> id through a
 * permutation that popularity shifts rewrite every N seconds.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hdr.h"
#include "kvswitch.h"
#include "popularity.h"
#include "zipf.h"

#define MAX_SERVERS 1024
#define HIGHEST_NS  (INT64_C(60) * 1000000000)
/* Server ids the per-server counts track beyond the configured ones (servers that join: their ids
 * come after the rack's; larger ids count as "unknown server"). */
#define JOIN_IDS 64
/* Requests waiting out a RETRY (or a MOVED that changed nothing) before their resend. */
#define MAX_DELAYED 4096

struct options {
    char *servers[MAX_SERVERS];
    size_t nservers;
    double rate;
    double duration;
    double skew;
    size_t keys;
    double write_ratio;
    size_t value_size;
    shift_kind shift;
    double shift_every;
    size_t shift_keys;
    unsigned timeout_ms; /* the library's per-attempt timeout (closed loop), >= 1 */
    uint64_t timeout_ns; /* the loadgen's own (open loop, window): --timeout-ms or --timeout-us */
    unsigned resends;    /* a request that timed out is sent again (same seq) up to this often */
    unsigned vnodes;
    int closed;
    unsigned window;
    int poisson;
    int preload;
    int json;
    int quiet;
    int fetch_ring;
    uint64_t seed;
    const char *prefix;
};

/* One outstanding request; slot = seq & mask. sched_ns == 0 means free or already answered.
 * The sender writes op, key and the route (f), then seq (release); the receiver reads seq
 * (acquire) first, and owns f from then on (the membership rules update it for resends). */
struct slot {
    _Atomic uint64_t sched_ns;
    _Atomic uint32_t seq;
    uint8_t op;
    uint8_t key[KVS_KEY_SIZE];
    kvs_follow f;
};

/* Resends due later (RETRY waits), by seq; one thread's. */
struct delayed {
    uint32_t seq[MAX_DELAYED];
    uint64_t due_ns[MAX_DELAYED];
    size_t n;
};

struct interval {
    double t;
    uint64_t sent, received;
    int64_t p50, p99, p999;
};

struct stats {
    hdr_hist total, interval, gets, sets;
    uint64_t received, ok, not_found, errors, duplicates, unmatched;
    /* membership: resends for MOVED, for RETRY, for UNAVAILABLE or a timeout (a new origin) */
    uint64_t moved, retried, rerouted, resent;
    uint64_t *per_server; /* replies by answering server id; [ids] = unknown */
    struct interval *intervals;
    size_t nintervals, cap_intervals;
    /* per interval, cumulative: sent per origin [ids], replies per answering server
     * [ids + 1]; the JSON prints differences */
    uint64_t *snaps;
    /* open loop: the requests sent in each interval that got no reply in time (by send time:
     * an interval's sent minus received also counts its late replies and the last one's) */
    uint64_t *lost_by_send;
};

struct run {
    struct options *o;
    kvs_client *client;
    zipf z;
    size_t *perm; /* rank -> key id */
    struct slot *slots;
    size_t mask;
    _Atomic uint64_t sent;
    _Atomic uint64_t send_errors;
    _Atomic int sending_done;
    _Atomic uint64_t *sent_per_server; /* [ids], by the sending thread; read when reporting */
    size_t ids;                        /* server ids counted: configured + JOIN_IDS */
    const uint8_t *value;              /* every Set's value (o->value_size bytes) */
    _Atomic uint32_t last_seq;         /* open loop: the last seq whose slot is published */
    uint64_t start_ns, end_ns;
    uint64_t next_shift_ns; /* UINT64_MAX without --shift */
    uint64_t last_send_ns;  /* when the last request went out */
    struct stats st;
    unsigned shifts;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleep until t (CLOCK_MONOTONIC ns): the kernel sleep covers all but the last 10 us (timer
 * slack is set to 1 ns at start), the rest yields the CPU, so a receiver thread sharing the core
 * is not starved by a spinning sender. */
static void sleep_until(uint64_t t)
{
    for (;;) {
        uint64_t now = now_ns();
        if (now >= t)
            return;
        if (t - now > 20000) {
            uint64_t wake = t - 10000;
            struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000u),
                                  .tv_nsec = (long)(wake % 1000000000u)};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        } else {
            sched_yield();
        }
    }
}

static void make_key(const struct options *o, size_t id, uint8_t key[KVS_KEY_SIZE])
{
    char text[64];
    int n = snprintf(text, sizeof text, "%s%zu", o->prefix, id);
    kvs_make_key(text, (size_t)n, key); /* length checked at start-up */
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvswitch-loadgen --servers IP:PORT[,IP:PORT...] [options]\n"
            "  --rate R           requests per second, open loop (default 10000)\n"
            "  --closed           closed loop instead: one request outstanding, no rate\n"
            "  --window W         closed loop with W requests outstanding (default 1)\n"
            "  --duration S       seconds of load (default 10)\n"
            "  --zipf S           Zipf skew of key popularity, 0 = uniform (default 0.99)\n"
            "  --keys N           number of distinct keys (default 100000)\n"
            "  --write-ratio W    fraction of Sets, 0..1 (default 0)\n"
            "  --value-size B     bytes per Set value, <= %d (default 64)\n"
            "  --shift KIND[:S]   popularity shift every S seconds (default 10): hot-in, random,\n"
            "                     hot-out, none\n"
            "  --shift-keys N     keys moved per shift (default 200)\n"
            "  --arrivals A       uniform or poisson spacing of open-loop sends (default uniform)\n"
            "  --timeout-ms T     a reply later than this counts as lost (default 1000)\n"
            "  --timeout-us T     the same in microseconds (the closed loop's library calls\n"
            "                     round it up to whole ms; the window loop keeps it exact)\n"
            "  --resends N        a request that timed out is sent again, same request id, up\n"
            "                     to N times (closed loop and window; default 0: lost)\n"
            "  --preload          Set every key once (closed loop) before the measured run\n"
            "  --key-prefix P     keys are P<id> (default \"key\"; at most 16 bytes in all)\n"
            "  --vnodes V         virtual nodes per server on the ring (default %d)\n"
            "  --fetch-ring       start with the ring a server gives (RING_GET), not version 0\n"
            "                     of --servers (which stays the address list of ids 0..n-1)\n"
            "  --seed N           random seed (default 1)\n"
            "  --json             print the summary as one JSON object on stdout\n"
            "  --quiet            no per-second lines\n",
            KVS_MAX_VALUE, KVS_DEFAULT_VNODES);
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_shift(const char *s, struct options *o)
{
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    int kind = shift_parse(s, n);
    if (kind < 0)
        return -1;
    o->shift = (shift_kind)kind;
    if (colon != NULL && (parse_double(colon + 1, &o->shift_every) != 0 || o->shift_every <= 0))
        return -1;
    return 0;
}

static int parse_servers(char *list, struct options *o)
{
    o->nservers = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (o->nservers == MAX_SERVERS)
            return -1;
        o->servers[o->nservers++] = tok;
    }
    return o->nservers > 0 ? 0 : -1;
}

static int parse_args(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"servers", required_argument, 0, 's'},
        {"rate", required_argument, 0, 'r'},
        {"closed", no_argument, 0, 'c'},
        {"duration", required_argument, 0, 'd'},
        {"window", required_argument, 0, 'W'},
        {"zipf", required_argument, 0, 'z'},
        {"keys", required_argument, 0, 'k'},
        {"write-ratio", required_argument, 0, 'w'},
        {"value-size", required_argument, 0, 'v'},
        {"shift", required_argument, 0, 'S'},
        {"shift-keys", required_argument, 0, 'K'},
        {"arrivals", required_argument, 0, 'a'},
        {"timeout-ms", required_argument, 0, 't'},
        {"timeout-us", required_argument, 0, 'u'},
        {"resends", required_argument, 0, 'R'},
        {"preload", no_argument, 0, 'p'},
        {"key-prefix", required_argument, 0, 'P'},
        {"vnodes", required_argument, 0, 'V'},
        {"seed", required_argument, 0, 'e'},
        {"json", no_argument, 0, 'j'},
        {"quiet", no_argument, 0, 'q'},
        {"fetch-ring", no_argument, 0, 'F'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    *o = (struct options){.rate = 10000,
                          .duration = 10,
                          .skew = 0.99,
                          .keys = 100000,
                          .value_size = 64,
                          .shift_every = 10,
                          .shift_keys = 200,
                          .timeout_ms = 1000,
                          .timeout_ns = 1000000000u,
                          .seed = 1,
                          .prefix = "key",
                          .window = 1};
    size_t tmp;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int bad = 0;
        switch (ch) {
        case 's': bad = parse_servers(optarg, o); break;
        case 'r': bad = parse_double(optarg, &o->rate) || o->rate <= 0; break;
        case 'c': o->closed = 1; break;
        case 'W':
            bad = parse_size(optarg, &tmp) || tmp == 0 || tmp > 4096;
            o->window = (unsigned)tmp;
            o->closed = 1;
            break;
        case 'd':
            bad = parse_double(optarg, &o->duration) || o->duration <= 0 || o->duration > 86400;
            break;
        case 'z': bad = parse_double(optarg, &o->skew) || o->skew < 0 || o->skew > 100; break;
        case 'k': bad = parse_size(optarg, &o->keys) || o->keys == 0 || o->keys > (1u << 30); break;
        case 'w':
            bad = parse_double(optarg, &o->write_ratio) || o->write_ratio < 0 || o->write_ratio > 1;
            break;
        case 'v': bad = parse_size(optarg, &o->value_size) || o->value_size > KVS_MAX_VALUE; break;
        case 'S': bad = parse_shift(optarg, o); break;
        case 'K': bad = parse_size(optarg, &o->shift_keys); break;
        case 'a':
            o->poisson = strcmp(optarg, "poisson") == 0;
            bad = !o->poisson && strcmp(optarg, "uniform") != 0;
            break;
        case 't':
            bad = parse_size(optarg, &tmp) || tmp == 0 || tmp > 60000;
            o->timeout_ms = (unsigned)tmp;
            o->timeout_ns = (uint64_t)tmp * 1000000u;
            break;
        case 'u':
            bad = parse_size(optarg, &tmp) || tmp == 0 || tmp > 60000000u;
            o->timeout_ms = (unsigned)((tmp + 999) / 1000);
            o->timeout_ns = (uint64_t)tmp * 1000u;
            break;
        case 'R':
            bad = parse_size(optarg, &tmp) || tmp > 1000;
            o->resends = (unsigned)tmp;
            break;
        case 'p': o->preload = 1; break;
        case 'P': o->prefix = optarg; break;
        case 'V':
            bad = parse_size(optarg, &tmp) || tmp > 65536;
            o->vnodes = (unsigned)tmp;
            break;
        case 'e':
            bad = parse_size(optarg, &tmp);
            o->seed = tmp;
            break;
        case 'j': o->json = 1; break;
        case 'q': o->quiet = 1; break;
        case 'F': o->fetch_ring = 1; break;
        case 'h': usage(stdout); exit(0);
        default: return -1;
        }
        if (bad) {
            fprintf(stderr, "kvswitch-loadgen: bad option value: %s\n", optarg ? optarg : "");
            return -1;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "kvswitch-loadgen: unexpected argument %s\n", argv[optind]);
        return -1;
    }
    if (o->nservers == 0) {
        fprintf(stderr, "kvswitch-loadgen: --servers is required\n");
        return -1;
    }
    char longest[64];
    int n = snprintf(longest, sizeof longest, "%s%zu", o->prefix, o->keys - 1);
    if (n < 0 || n > KVS_KEY_SIZE) {
        fprintf(stderr, "kvswitch-loadgen: key \"%s\" is longer than %d bytes\n", longest,
                KVS_KEY_SIZE);
        return -1;
    }
    if (o->shift_keys > o->keys / 2)
        o->shift_keys = o->keys / 2;
    return 0;
}

/* Popularity shifts rewrite the rank -> key permutation (done by the sending thread). */
static void apply_shift(struct run *r, rng *g)
{
    popularity_shift(r->perm, r->o->keys, r->o->shift_keys, r->o->shift, g);
    r->shifts++;
}

/* The key of the next request, after the popularity shift that is due at time now, if any. */
static size_t draw_key(struct run *r, rng *g, uint64_t now)
{
    if (now >= r->next_shift_ns) {
        apply_shift(r, g);
        r->next_shift_ns += (uint64_t)(r->o->shift_every * 1e9);
    }
    return r->perm[zipf_rank(&r->z, rng_uniform(g))];
}

static void start_clock(struct run *r, uint64_t start)
{
    r->start_ns = start;
    r->end_ns = start + (uint64_t)(r->o->duration * 1e9);
    r->next_shift_ns =
        r->o->shift != SHIFT_NONE ? start + (uint64_t)(r->o->shift_every * 1e9) : UINT64_MAX;
}

static uint8_t pick_op(struct run *r, rng *g)
{
    return r->o->write_ratio > 0 && rng_uniform(g) < r->o->write_ratio ? KVS_OP_SET : KVS_OP_GET;
}

static void count_reply(struct stats *st, const kvs_header *h, int server, size_t ids)
{
    st->received++;
    if (h->status == KVS_STATUS_OK || h->status == KVS_STATUS_DUPLICATE)
        st->ok++;
    else if (h->status == KVS_STATUS_NOT_FOUND)
        st->not_found++;
    else
        st->errors++;
    st->per_server[server >= 0 && (size_t)server < ids ? (size_t)server : ids]++;
}

static void record_latency(struct stats *st, uint8_t op, int64_t ns)
{
    hdr_record(&st->total, ns);
    hdr_record(&st->interval, ns);
    hdr_record(op == KVS_OP_GET ? &st->gets : &st->sets, ns);
}

static void count_sent(struct run *r, int origin)
{
    if (origin >= 0 && (size_t)origin < r->ids)
        atomic_fetch_add_explicit(&r->sent_per_server[origin], 1, memory_order_relaxed);
}

/* A resend the membership rules asked for, by its cause (f's counters before and after). */
static void count_resend(struct stats *st, const kvs_follow *before, const kvs_follow *after)
{
    st->moved += after->moved - before->moved;
    st->retried += after->retried - before->retried;
    st->rerouted += after->rerouted - before->rerouted;
}

static size_t snap_width(const struct run *r)
{
    return 2 * r->ids + 1;
}

/* Server ids shown: the configured ones, and any joined id that got requests or replies. */
static size_t shown_ids(const struct run *r)
{
    size_t w = r->o->nservers;
    for (size_t i = w; i < r->ids; i++)
        if (atomic_load(&r->sent_per_server[i]) != 0 || r->st.per_server[i] != 0)
            w = i + 1;
    return w;
}

/* Close one interval: print a line, keep it for --json. */
static void report_interval(struct run *r, double t, uint64_t sent, uint64_t received)
{
    struct stats *st = &r->st;
    struct interval iv = {t,
                          sent,
                          received,
                          hdr_percentile(&st->interval, 50),
                          hdr_percentile(&st->interval, 99),
                          hdr_percentile(&st->interval, 99.9)};
    if (st->nintervals < st->cap_intervals) {
        size_t n = r->ids;
        uint64_t *snap = &st->snaps[st->nintervals * snap_width(r)];
        for (size_t i = 0; i < n; i++)
            snap[i] = atomic_load_explicit(&r->sent_per_server[i], memory_order_relaxed);
        memcpy(snap + n, st->per_server, (n + 1) * sizeof *snap);
        st->intervals[st->nintervals++] = iv;
    }
    if (!r->o->quiet)
        fprintf(stderr,
                "t=%7.2fs sent=%8" PRIu64 " replies=%8" PRIu64
                " p50=%8.1fus p99=%8.1fus p999=%8.1fus%s\n",
                t, sent, received, iv.p50 / 1e3, iv.p99 / 1e3, iv.p999 / 1e3,
                t != floor(t) ? " (last, partial)" : "");
    hdr_reset(&st->interval);
}

/* Wait up to timeout_ms for one reply (its value, up to KVS_MAX_VALUE bytes, into value): 1 got
 * one, 0 none yet, -1 the socket failed (said on stderr). */
static int recv_reply(struct run *r, kvs_header *h, uint8_t *value, size_t *vlen, int *server,
                      int timeout_ms)
{
    kvs_error e = kvs_recv(r->client, h, value, KVS_MAX_VALUE, vlen, server, timeout_ms);
    if (e == KVS_ERR_TIMEOUT)
        return 0;
    if (e != KVS_OK) {
        fprintf(stderr, "kvswitch-loadgen: receive: %s: %s\n", kvs_strerror(e), strerror(errno));
        return -1;
    }
    return 1;
}

/* Per-second reporting for a loop that knows its own counts. */
struct ticker {
    uint64_t next_ns, last_sent, last_recv;
};

static void ticker_start(struct run *r, struct ticker *t)
{
    *t = (struct ticker){.next_ns = r->start_ns + 1000000000u};
}

/* Report every second that ended by now; with final, also the partial last one. */
static void tick(struct run *r, struct ticker *t, uint64_t now, uint64_t sent, int final)
{
    uint64_t received = r->st.received;
    while (now >= t->next_ns) {
        report_interval(r, (double)(t->next_ns - r->start_ns) / 1e9, sent - t->last_sent,
                        received - t->last_recv);
        t->last_sent = sent;
        t->last_recv = received;
        t->next_ns += 1000000000u;
    }
    if (final && (sent > t->last_sent || received > t->last_recv)) {
        report_interval(r, (double)(now - r->start_ns) / 1e9, sent - t->last_sent,
                        received - t->last_recv);
        t->last_sent = sent;
        t->last_recv = received;
    }
}

/* ---- the membership rules for requests in flight (open loop and window): kvs_follow_* ---- */

static void resend(struct run *r, const kvs_follow *f, uint8_t op, const uint8_t *key, uint32_t seq)
{
    if (kvs_follow_send(r->client, f, op, key, r->value, op == KVS_OP_SET ? r->o->value_size : 0,
                        seq) != KVS_OK)
        atomic_fetch_add(&r->send_errors, 1);
}

/* A reply to a request in flight: 1 if it ends the request; 0 if the request was resent, or
 * waits in d for its resend (a RETRY). */
static int follow(struct run *r, struct delayed *d, kvs_follow *f, uint8_t op, const uint8_t *key,
                  uint32_t seq, const kvs_header *h, const uint8_t *value, size_t vlen, int server)
{
    kvs_follow before = *f;
    unsigned delay_ms;
    kvs_error err;
    if (kvs_follow_reply(r->client, f, h, value, vlen, server, &delay_ms, &err) == KVS_NEXT_DONE)
        return 1;
    count_resend(&r->st, &before, f);
    if (delay_ms > 0 && d->n < MAX_DELAYED) {
        d->seq[d->n] = seq;
        d->due_ns[d->n++] = now_ns() + (uint64_t)delay_ms * 1000000u;
    } else {
        resend(r, f, op, key, seq); /* now (or, with MAX_DELAYED waiting, a little early) */
    }
    return 0;
}

/* Take one seq whose resend is due by now out of d: 1 if there was one. */
static int due(struct delayed *d, uint64_t now, uint32_t *seq)
{
    for (size_t i = 0; i < d->n; i++) {
        if (d->due_ns[i] <= now) {
            *seq = d->seq[i];
            d->n--;
            d->seq[i] = d->seq[d->n];
            d->due_ns[i] = d->due_ns[d->n];
            return 1;
        }
    }
    return 0;
}

/* How long to wait for replies: at most cap_ms, less if a resend is due sooner. */
static int wait_ms(const struct delayed *d, uint64_t now, int cap_ms)
{
    int ms = cap_ms;
    for (size_t i = 0; i < d->n; i++) {
        int left = d->due_ns[i] <= now ? 0 : (int)((d->due_ns[i] - now) / 1000000u);
        if (left < ms)
            ms = left;
    }
    return ms;
}

/* A request scheduled at sched got no reply in time: lost, in the interval it was sent in. */
static void count_lost(struct run *r, uint64_t sched)
{
    uint64_t i = (sched - r->start_ns) / 1000000000u;
    if (i < r->st.cap_intervals)
        r->st.lost_by_send[i]++;
}

/* Open loop: requests still unanswered after the timeout are lost (counted as before, never
 * resent: their reply would come too late to count). Each applies the timeout rule all the same,
 * so the client asks for the ring (at most once per KVS_RING_REFRESH_GAP_MS) and later requests
 * go to a new origin. Slots are visited in seq order from *scan. With now UINT64_MAX (the end):
 * every request still unanswered is counted lost, nothing else is done. */
static void open_timeouts(struct run *r, uint32_t *scan, uint64_t now)
{
    uint64_t timeout_ns = r->o->timeout_ns;
    uint32_t last = atomic_load_explicit(&r->last_seq, memory_order_acquire);
    while (last != 0 && (int32_t)(last - *scan) >= 0) {
        struct slot *s = &r->slots[*scan & r->mask];
        if (atomic_load_explicit(&s->seq, memory_order_acquire) == *scan) {
            uint64_t sched = atomic_load(&s->sched_ns);
            if (sched != 0 && now - sched <= timeout_ns)
                return; /* not timed out yet, and neither are the later ones */
            kvs_error err;
            if (sched != 0)
                count_lost(r, sched);
            if (sched != 0 && now != UINT64_MAX)
                (void)kvs_follow_timeout(r->client, &s->f, s->key, &err);
        }
        *scan = *scan == UINT32_MAX ? 1 : *scan + 1;
    }
}

static void *receiver(void *arg)
{
    struct run *r = arg;
    struct stats *st = &r->st;
    struct ticker tk;
    ticker_start(r, &tk);
    static struct delayed d; /* one receiver thread */
    static uint8_t value[KVS_MAX_VALUE];
    uint32_t scan = 1;
    for (;;) {
        uint64_t now = now_ns();
        tick(r, &tk, now, atomic_load(&r->sent), 0);
        if (atomic_load(&r->sending_done) &&
            (now >= r->end_ns + r->o->timeout_ns ||
             st->received + st->unmatched >= atomic_load(&r->sent)))
            break;
        uint32_t seq;
        while (due(&d, now, &seq)) {
            struct slot *s = &r->slots[seq & r->mask];
            if (atomic_load_explicit(&s->seq, memory_order_acquire) == seq &&
                atomic_load(&s->sched_ns) != 0)
                resend(r, &s->f, s->op, s->key, seq);
        }
        open_timeouts(r, &scan, now);
        kvs_header h;
        size_t vlen;
        int server;
        int got = recv_reply(r, &h, value, &vlen, &server, wait_ms(&d, now, 20));
        if (got == 0)
            continue;
        if (got < 0)
            break;
        uint64_t t = now_ns();
        struct slot *s = &r->slots[h.seq & r->mask];
        if (atomic_load_explicit(&s->seq, memory_order_acquire) != h.seq ||
            kvs_reply_op(s->op) != h.op || memcmp(s->key, h.key, KVS_KEY_SIZE) != 0) {
            st->unmatched++;
            continue;
        }
        uint64_t sched = atomic_load(&s->sched_ns);
        if (sched == 0) {
            st->duplicates++;
            continue;
        }
        if (t - sched > r->o->timeout_ns) {
            st->unmatched++; /* later than the timeout: counted as lost */
            continue;
        }
        if (!follow(r, &d, &s->f, s->op, s->key, h.seq, &h, value, vlen, server))
            continue; /* resent (MOVED, RETRY, a new origin after UNAVAILABLE) */
        atomic_store(&s->sched_ns, 0);
        count_reply(st, &h, server, r->ids);
        record_latency(st, h.op == KVS_OP_GET_REPLY ? KVS_OP_GET : KVS_OP_SET,
                       (int64_t)(t - sched));
    }
    open_timeouts(r, &scan, UINT64_MAX);
    tick(r, &tk, now_ns(), atomic_load(&r->sent), 1);
    return NULL;
}

static int run_open(struct run *r, rng *g, const uint8_t *value)
{
    struct options *o = r->o;
    size_t want = (size_t)(o->rate * (o->timeout_ns / 1e9 + 1) * 2) + 1;
    size_t size = 1024;
    while (size < want && size < (1u << 22)) /* at most 4 M slots (128 MiB, touched lazily) */
        size <<= 1;
    r->mask = size - 1;
    r->slots = calloc(size, sizeof r->slots[0]);
    if (r->slots == NULL)
        return -1;
    start_clock(r, now_ns() + 1000000); /* 1 ms to start the receiver */
    pthread_t th;
    if (pthread_create(&th, NULL, receiver, r) != 0)
        return -1;
    double period_ns = 1e9 / o->rate;
    double next = (double)r->start_ns;
    for (uint32_t seq = 1;; seq = seq == UINT32_MAX ? 1 : seq + 1) {
        uint64_t sched = (uint64_t)next;
        /* stop at the end of the schedule, or 100 ms after the end of the wall clock when the
         * sender cannot keep up with the rate (it then sends back to back) */
        if (sched >= r->end_ns || r->last_send_ns >= r->end_ns + 100000000u)
            break;
        uint8_t op = pick_op(r, g);
        size_t id = draw_key(r, g, sched);
        struct slot *s = &r->slots[seq & r->mask];
        atomic_store_explicit(&s->seq, 0, memory_order_relaxed); /* no seq 0 is ever sent */
        s->op = op;
        make_key(o, id, s->key);
        kvs_follow_start(r->client, &s->f, s->key);
        kvs_follow f = s->f; /* after the release below the receiver owns s->f */
        uint8_t key[KVS_KEY_SIZE];
        memcpy(key, s->key, sizeof key);
        atomic_store_explicit(&s->seq, seq, memory_order_release);
        sleep_until(sched);
        atomic_store(&s->sched_ns, sched);
        kvs_error e =
            kvs_follow_send(r->client, &f, op, key, value, op == KVS_OP_SET ? o->value_size : 0, seq);
        r->last_send_ns = now_ns();
        if (e != KVS_OK) {
            atomic_store(&s->sched_ns, 0);
            atomic_fetch_add(&r->send_errors, 1);
        } else {
            count_sent(r, f.origin);
            atomic_fetch_add(&r->sent, 1);
        }
        atomic_store_explicit(&r->last_seq, seq, memory_order_release);
        next += o->poisson ? -log(1.0 - rng_uniform(g)) * period_ns : period_ns;
    }
    atomic_store(&r->sending_done, 1);
    pthread_join(th, NULL);
    return 0;
}

static int run_closed(struct run *r, rng *g, const uint8_t *value)
{
    struct options *o = r->o;
    uint8_t buf[KVS_MAX_VALUE];
    start_clock(r, now_ns());
    struct ticker tk;
    ticker_start(r, &tk);
    uint64_t sent = 0;
    for (;;) {
        uint64_t t0 = now_ns();
        tick(r, &tk, t0, sent, t0 >= r->end_ns);
        if (t0 >= r->end_ns)
            break;
        uint8_t op = pick_op(r, g);
        size_t id = draw_key(r, g, t0);
        char key[64];
        int klen = snprintf(key, sizeof key, "%s%zu", o->prefix, id);
        uint8_t key16[KVS_KEY_SIZE];
        kvs_make_key(key, (size_t)klen, key16);
        count_sent(r, (int)kvs_ring_origin(kvs_client_ring(r->client), key16));
        kvs_reply_info info = {0};
        size_t vlen;
        kvs_error e = op == KVS_OP_GET
                          ? kvs_get(r->client, key, (size_t)klen, buf, sizeof buf, &vlen, &info)
                          : kvs_set(r->client, key, (size_t)klen, value, o->value_size, &info);
        sent++;
        atomic_store(&r->sent, sent);
        r->st.moved += info.moved;
        r->st.retried += info.retried;
        r->st.rerouted += info.rerouted;
        unsigned followed = 1 + info.moved + info.retried + info.rerouted;
        r->st.resent += info.attempts > followed ? info.attempts - followed : 0; /* --resends */
        if (e == KVS_ERR_TIMEOUT || e == KVS_ERR_SYSTEM || e == KVS_ERR_INVALID_ARGUMENT)
            continue; /* no reply: counted as lost (sent - received) */
        kvs_header h = {.op = kvs_reply_op(op), .status = info.status};
        count_reply(&r->st, &h, info.server, r->ids);
        record_latency(&r->st, op, (int64_t)(now_ns() - t0));
    }
    return 0;
}

/* Closed loop with a window: W requests in flight through the async pair, one thread. A reply
 * (matched by seq, op and key) or a timeout frees a place and the next request goes out. */
struct inflight {
    uint32_t seq;
    uint8_t op;
    uint8_t key[KVS_KEY_SIZE];
    uint64_t t0;       /* first send: latency */
    uint64_t deadline; /* the current attempt's timeout */
    unsigned resends;  /* --resends left */
    kvs_follow f;
};

static size_t find_inflight(const struct inflight *fl, size_t n, uint32_t seq)
{
    size_t i = 0;
    while (i < n && fl[i].seq != seq)
        i++;
    return i;
}

static int run_window(struct run *r, rng *g, const uint8_t *value)
{
    struct options *o = r->o;
    struct inflight *fl = calloc(o->window, sizeof *fl);
    static struct delayed d; /* the main thread's */
    static uint8_t rvalue[KVS_MAX_VALUE];
    if (fl == NULL)
        return -1;
    uint64_t timeout_ns = o->timeout_ns, sent = 0;
    uint32_t seq = 0;
    size_t n = 0;
    start_clock(r, now_ns());
    struct ticker tk;
    ticker_start(r, &tk);
    for (;;) {
        uint64_t now = now_ns();
        int sending = now < r->end_ns;
        tick(r, &tk, now, sent, 0);
        if (!sending && (n == 0 || now >= r->end_ns + timeout_ns))
            break; /* done, after the last replies or their timeout */
        while (sending && n < o->window) {
            struct inflight *f = &fl[n];
            seq = seq == UINT32_MAX ? 1 : seq + 1;
            f->seq = seq;
            f->op = pick_op(r, g);
            make_key(o, draw_key(r, g, now), f->key);
            f->t0 = now_ns();
            f->deadline = f->t0 + timeout_ns;
            f->resends = o->resends;
            kvs_follow_start(r->client, &f->f, f->key);
            if (kvs_follow_send(r->client, &f->f, f->op, f->key, value,
                                f->op == KVS_OP_SET ? o->value_size : 0, seq) != KVS_OK) {
                atomic_fetch_add(&r->send_errors, 1);
                break;
            }
            count_sent(r, f->f.origin);
            atomic_store(&r->sent, ++sent);
            n++;
        }
        uint32_t ready;
        while (due(&d, now, &ready)) {
            size_t i = find_inflight(fl, n, ready);
            if (i < n)
                resend(r, &fl[i].f, fl[i].op, fl[i].key, ready);
        }
        for (size_t i = 0; i < n;) { /* timed out: resent to a new origin, or lost */
            kvs_error err;
            if (now <= fl[i].deadline) {
                i++;
            } else if (kvs_follow_timeout(r->client, &fl[i].f, fl[i].key, &err) ==
                       KVS_NEXT_RESEND) {
                r->st.rerouted++;
                fl[i].deadline = now + timeout_ns;
                resend(r, &fl[i].f, fl[i].op, fl[i].key, fl[i].seq);
                i++;
            } else if (fl[i].resends > 0) { /* --resends: the same request id again */
                fl[i].resends--;
                r->st.resent++;
                fl[i].deadline = now + timeout_ns;
                resend(r, &fl[i].f, fl[i].op, fl[i].key, fl[i].seq);
                i++;
            } else {
                fl[i] = fl[--n]; /* lost (sent - received), place freed */
            }
        }
        kvs_header h;
        size_t vlen;
        int server;
        int got = recv_reply(r, &h, rvalue, &vlen, &server, wait_ms(&d, now, 10));
        if (got == 0)
            continue;
        if (got < 0) {
            free(fl);
            return -1;
        }
        size_t i = find_inflight(fl, n, h.seq);
        if (i == n || kvs_reply_op(fl[i].op) != h.op ||
            memcmp(fl[i].key, h.key, KVS_KEY_SIZE) != 0) {
            r->st.unmatched++; /* late (already timed out), duplicated or foreign */
            continue;
        }
        if (!follow(r, &d, &fl[i].f, fl[i].op, fl[i].key, h.seq, &h, rvalue, vlen, server))
            continue;
        count_reply(&r->st, &h, server, r->ids);
        record_latency(&r->st, fl[i].op, (int64_t)(now_ns() - fl[i].t0));
        fl[i] = fl[--n];
    }
    tick(r, &tk, now_ns(), sent, 1);
    free(fl);
    return 0;
}

static int preload(struct run *r, const uint8_t *value)
{
    for (size_t id = 0; id < r->o->keys; id++) {
        char key[64];
        int klen = snprintf(key, sizeof key, "%s%zu", r->o->prefix, id);
        kvs_error e = kvs_set(r->client, key, (size_t)klen, value, r->o->value_size, NULL);
        if (e != KVS_OK) {
            fprintf(stderr, "kvswitch-loadgen: preload of %s: %s\n", key, kvs_strerror(e));
            return -1;
        }
    }
    return 0;
}

static void print_summary(struct run *r, double elapsed)
{
    struct options *o = r->o;
    struct stats *st = &r->st;
    uint64_t sent = atomic_load(&r->sent);
    uint64_t lost = sent > st->received ? sent - st->received : 0;
    double tput = st->received / o->duration;
    /* the sender's actual span: longer than --duration only if it could not keep the rate */
    double send_s =
        r->last_send_ns > r->start_ns ? (double)(r->last_send_ns - r->start_ns) / 1e9 : 0;
    if (send_s < o->duration)
        send_s = o->duration;
    double us[6] = {hdr_percentile(&st->total, 50) / 1e3,
                    hdr_percentile(&st->total, 99) / 1e3,
                    hdr_percentile(&st->total, 99.9) / 1e3,
                    st->total.max / 1e3,
                    hdr_mean(&st->total) / 1e3,
                    hdr_percentile(&st->gets, 99) / 1e3};
    size_t ids = shown_ids(r);
    uint32_t ring_version = kvs_client_ring_version(r->client);
    uint64_t ring_changes = kvs_client_ring_changes(r->client);
    if (!o->json) {
        printf("mode=%s window=%u target_rate=%.0f duration=%.1fs keys=%zu zipf=%.2f "
               "write_ratio=%.2f value_size=%zu shift=%s shifts=%u\n",
               o->closed ? "closed" : "open", o->window, o->closed ? 0 : o->rate, o->duration,
               o->keys, o->skew, o->write_ratio, o->value_size, shift_name(o->shift), r->shifts);
        printf("sent=%" PRIu64 " received=%" PRIu64 " lost=%" PRIu64 " ok=%" PRIu64
               " not_found=%" PRIu64 " errors=%" PRIu64 " duplicates=%" PRIu64
               " send_errors=%" PRIu64 "\n",
               sent, st->received, lost, st->ok, st->not_found, st->errors, st->duplicates,
               (uint64_t)atomic_load(&r->send_errors));
        printf("throughput=%.0f replies/s (send rate %.0f/s over %.2fs, run %.2fs)\n", tput,
               sent / send_s, send_s, elapsed);
        printf("latency us: p50=%.1f p99=%.1f p999=%.1f max=%.1f mean=%.1f\n", us[0], us[1], us[2],
               us[3], us[4]);
        printf("requests per origin:");
        for (size_t i = 0; i < ids; i++)
            printf(" %" PRIu64, (uint64_t)atomic_load(&r->sent_per_server[i]));
        printf("\nreplies per answering server:");
        for (size_t i = 0; i < ids; i++)
            printf(" %" PRIu64, st->per_server[i]);
        printf(" %" PRIu64 " (last: unknown address)\n", st->per_server[r->ids]);
        printf("membership: ring_version=%" PRIu32 " ring_changes=%" PRIu64
               " moved_resends=%" PRIu64 " retry_resends=%" PRIu64 " reroute_resends=%" PRIu64
               " timeout_resends=%" PRIu64 "\n",
               ring_version, ring_changes, st->moved, st->retried, st->rerouted, st->resent);
        return;
    }
    printf("{\"mode\": \"%s\", \"window\": %u, \"target_rate\": %.1f, \"duration_s\": %.3f, "
           "\"keys\": %zu, "
           "\"zipf\": %.4f, \"write_ratio\": %.4f, \"value_size\": %zu, \"shift\": \"%s\", "
           "\"shifts\": %u, ",
           o->closed ? "closed" : "open", o->window, o->closed ? 0 : o->rate, o->duration, o->keys,
           o->skew, o->write_ratio, o->value_size, shift_name(o->shift), r->shifts);
    printf("\"sent\": %" PRIu64 ", \"received\": %" PRIu64 ", \"lost\": %" PRIu64
           ", \"ok\": %" PRIu64 ", \"not_found\": %" PRIu64 ", \"errors\": %" PRIu64
           ", \"duplicates\": %" PRIu64 ", \"send_errors\": %" PRIu64
           ", \"throughput\": %.1f, \"send_rate\": %.1f, "
           "\"send_s\": %.3f, ",
           sent, st->received, lost, st->ok, st->not_found, st->errors, st->duplicates,
           (uint64_t)atomic_load(&r->send_errors), tput, sent / send_s, send_s);
    printf("\"ring_version\": %" PRIu32 ", \"ring_changes\": %" PRIu64
           ", \"moved_resends\": %" PRIu64 ", \"retry_resends\": %" PRIu64
           ", \"reroute_resends\": %" PRIu64 ", \"timeout_resends\": %" PRIu64 ", ",
           ring_version, ring_changes, st->moved, st->retried, st->rerouted, st->resent);
    printf("\"latency_us\": {\"p50\": %.3f, \"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f, "
           "\"mean\": %.3f, \"get_p99\": %.3f, \"set_p99\": %.3f}, ",
           us[0], us[1], us[2], us[3], us[4], us[5], hdr_percentile(&st->sets, 99) / 1e3);
    printf("\"sent_per_server\": [");
    for (size_t i = 0; i < ids; i++)
        printf("%s%" PRIu64, i ? ", " : "", (uint64_t)atomic_load(&r->sent_per_server[i]));
    printf("], \"replies_per_server\": [");
    for (size_t i = 0; i < ids; i++)
        printf("%s%" PRIu64, i ? ", " : "", st->per_server[i]);
    printf("], \"replies_unknown_server\": %" PRIu64 ", \"intervals\": [",
           st->per_server[r->ids]);
    for (size_t i = 0; i < st->nintervals; i++) {
        struct interval *iv = &st->intervals[i];
        printf("%s{\"t\": %.2f, \"sent\": %" PRIu64 ", \"received\": %" PRIu64
               ", \"p50_us\": %.3f, \"p99_us\": %.3f, \"p999_us\": %.3f",
               i ? ", " : "", iv->t, iv->sent, iv->received, iv->p50 / 1e3, iv->p99 / 1e3,
               iv->p999 / 1e3);
        /* this interval's requests per origin and replies per answering server */
        /* snapshot layout: sent [0, r->ids), replies [r->ids, 2 r->ids), unknown [2 r->ids] */
        const uint64_t *now = &st->snaps[i * snap_width(r)];
        const uint64_t *before = i ? now - snap_width(r) : NULL;
        size_t n = r->ids;
        for (size_t k = 0; k < 2 * ids; k++) {
            size_t at = k < ids ? k : n + (k - ids);
            printf("%s%" PRIu64,
                   k == 0     ? ", \"sent_per_server\": ["
                   : k == ids ? "], \"replies_per_server\": ["
                              : ", ",
                   now[at] - (before ? before[at] : 0));
        }
        printf("], \"replies_unknown_server\": %" PRIu64,
               now[2 * n] - (before ? before[2 * n] : 0));
        if (!o->closed) /* the open loop; the closed loop resends or counts at once */
            printf(", \"lost\": %" PRIu64, st->lost_by_send[i]);
        printf("}");
    }
    printf("]}\n");
}

int main(int argc, char **argv)
{
    struct options o;
    if (parse_args(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* precise sleeps for the open-loop pacing */
    struct run r;
    memset(&r, 0, sizeof r);
    r.o = &o;
    kvs_error err;
    kvs_config cfg = {.servers = (const char *const *)o.servers,
                      .nservers = o.nservers,
                      .vnodes = o.vnodes,
                      .timeout_ms = o.timeout_ms,
                      .retries = o.resends};
    r.client = kvs_client_new(&cfg, &err);
    if (r.client == NULL) {
        fprintf(stderr, "kvswitch-loadgen: client: %s\n", kvs_strerror(err));
        return 1;
    }
    rng g;
    rng_seed(&g, o.seed);
    r.perm = malloc(o.keys * sizeof r.perm[0]);
    r.ids = o.nservers + JOIN_IDS;
    if (r.ids > KVS_MAX_SERVER_ID + 1u)
        r.ids = KVS_MAX_SERVER_ID + 1u;
    if (o.fetch_ring) {
        err = kvs_client_refresh_ring(r.client, -1);
        if (err != KVS_OK) {
            fprintf(stderr, "kvswitch-loadgen: --fetch-ring: %s\n", kvs_strerror(err));
            return 1;
        }
    }
    r.sent_per_server = calloc(r.ids, sizeof r.sent_per_server[0]);
    r.st.per_server = calloc(r.ids + 1, sizeof r.st.per_server[0]);
    r.st.cap_intervals = (size_t)o.duration + 4;
    r.st.intervals = calloc(r.st.cap_intervals, sizeof r.st.intervals[0]);
    r.st.snaps = calloc(r.st.cap_intervals * snap_width(&r), sizeof r.st.snaps[0]);
    r.st.lost_by_send = calloc(r.st.cap_intervals, sizeof r.st.lost_by_send[0]);
    uint8_t *value = malloc(o.value_size + 1);
    if (r.perm == NULL || r.sent_per_server == NULL || r.st.per_server == NULL ||
        r.st.snaps == NULL || r.st.intervals == NULL || r.st.lost_by_send == NULL ||
        value == NULL ||
        zipf_init(&r.z, o.keys, o.skew) != 0 || hdr_init(&r.st.total, HIGHEST_NS, 3) != 0 ||
        hdr_init(&r.st.interval, HIGHEST_NS, 3) != 0 || hdr_init(&r.st.gets, HIGHEST_NS, 3) != 0 ||
        hdr_init(&r.st.sets, HIGHEST_NS, 3) != 0) {
        fprintf(stderr, "kvswitch-loadgen: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < o.value_size; i++)
        value[i] = (uint8_t)('a' + i % 26);
    r.value = value;
    popularity_shuffle(r.perm, o.keys, &g);
    if (o.preload && preload(&r, value) != 0)
        return 1;
    uint64_t t0 = now_ns();
    int rc = !o.closed      ? run_open(&r, &g, value)
             : o.window > 1 ? run_window(&r, &g, value)
                            : run_closed(&r, &g, value);
    if (rc != 0) {
        fprintf(stderr, "kvswitch-loadgen: cannot start: %s\n", strerror(errno));
        return 1;
    }
    print_summary(&r, (double)(now_ns() - t0) / 1e9);
    fflush(stdout);
    kvs_client_free(r.client);
    zipf_free(&r.z);
    hdr_free(&r.st.total);
    hdr_free(&r.st.interval);
    hdr_free(&r.st.gets);
    hdr_free(&r.st.sets);
    free(r.perm);
    free(r.slots);
    free(r.sent_per_server);
    free(r.st.per_server);
    free(r.st.intervals);
    free(r.st.snaps);
    free(r.st.lost_by_send);
    free(value);
    return 0;
}

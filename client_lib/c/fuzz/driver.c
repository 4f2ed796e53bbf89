/* A standalone driver for fuzz targets with gcc (no libFuzzer): runs -runs=N inputs made by
 * mutating the seed files given on the command line (files or directories), plus random bytes.
 * Each input is copied into a heap buffer of exactly its size, so ASan catches any read past it.
 * Deterministic (fixed seed), so a failure reproduces; the failing input is written to
 * ./crash-input. usage: fuzz_reply [-runs=N] [-seed=S] [FILE|DIR ...] */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sanitizer/common_interface_defs.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvswitch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SEEDS      256
#define FUZZ_MAX_INPUT (KVS_MAX_MESSAGE + 64)

static uint8_t *seeds[MAX_SEEDS];
static size_t seed_len[MAX_SEEDS];
static size_t nseeds;

static void add_seed(const uint8_t *data, size_t len)
{
    if (nseeds == MAX_SEEDS || len > FUZZ_MAX_INPUT)
        return;
    seeds[nseeds] = malloc(len ? len : 1);
    memcpy(seeds[nseeds], data, len);
    seed_len[nseeds++] = len;
}

static void add_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return;
    static uint8_t buf[FUZZ_MAX_INPUT];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    add_seed(buf, n);
}

static void add_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return;
    if (!S_ISDIR(st.st_mode)) {
        add_file(path);
        return;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        add_file(full);
    }
    if (d != NULL)
        closedir(d);
}

static const uint8_t *current;
static size_t current_len;

/* On a failure (abort, or an ASan report), keep the input that caused it. */
static void save_current(void)
{
    FILE *f = fopen("crash-input", "wb");
    if (f != NULL) {
        fwrite(current, 1, current_len, f);
        fclose(f);
        fprintf(stderr, "fuzz_reply: failing input (%zu bytes) written to ./crash-input\n",
                current_len);
    }
}

static void on_abort(int sig)
{
    save_current();
    signal(sig, SIG_DFL);
    raise(sig);
}

static uint64_t state = 0x9e3779b97f4a7c15ULL;

static uint64_t next(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static size_t mutate(uint8_t *buf, size_t len)
{
    int rounds = 1 + (int)(next() % 4);
    for (int r = 0; r < rounds; r++) {
        switch (next() % 7) {
        case 0: /* flip a bit */
            if (len)
                buf[next() % len] ^= (uint8_t)(1u << (next() % 8));
            break;
        case 1: /* set a byte */
            if (len)
                buf[next() % len] = (uint8_t)next();
            break;
        case 2: /* truncate */
            if (len)
                len = (size_t)(next() % len);
            break;
        case 3: /* extend with random bytes */
        {
            size_t add = (size_t)(next() % 64);
            if (len + add <= FUZZ_MAX_INPUT) {
                for (size_t i = 0; i < add; i++)
                    buf[len + i] = (uint8_t)next();
                len += add;
            }
            break;
        }
        case 4: /* an interesting vlen */
            if (len >= 4) {
                static const uint16_t vl[] = {0, 1, 35, 36, 8191, 8192, 8193, 0x7fff, 0xffff};
                uint16_t v = vl[next() % (sizeof vl / sizeof vl[0])];
                buf[2] = (uint8_t)(v >> 8);
                buf[3] = (uint8_t)v;
            }
            break;
        case 5: /* vlen that matches the length exactly */
            if (len >= KVS_HEADER_SIZE) {
                size_t v = len - KVS_HEADER_SIZE;
                buf[2] = (uint8_t)(v >> 8);
                buf[3] = (uint8_t)v;
            }
            break;
        default: /* an op or status at the edges */
            if (len >= 2)
                buf[next() % 2] = (uint8_t)(next() % 17);
            break;
        }
    }
    return len;
}

int main(int argc, char **argv)
{
    long runs = 100000;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "-runs=", 6) == 0)
            runs = atol(argv[i] + 6);
        else if (strncmp(argv[i], "-seed=", 6) == 0)
            state = strtoull(argv[i] + 6, NULL, 10) | 1;
        else
            add_path(argv[i]);
    }
    __sanitizer_set_death_callback(save_current);
    signal(SIGABRT, on_abort);
    uint8_t empty[KVS_HEADER_SIZE] = {KVS_OP_GET_REPLY};
    add_seed(empty, sizeof empty);
    static uint8_t buf[FUZZ_MAX_INPUT];
    long accepted = 0;
    for (long r = 0; r < runs; r++) {
        size_t len;
        if (next() % 16 == 0) { /* random bytes */
            len = (size_t)(next() % 128);
            for (size_t i = 0; i < len; i++)
                buf[i] = (uint8_t)next();
        } else {
            size_t s = (size_t)(next() % nseeds);
            memcpy(buf, seeds[s], seed_len[s]);
            len = mutate(buf, seed_len[s]);
        }
        uint8_t *exact = malloc(len ? len : 1);
        memcpy(exact, buf, len);
        current = exact;
        current_len = len;
        kvs_header h;
        accepted += kvs_decode(exact, len, &h, NULL) == KVS_OK;
        LLVMFuzzerTestOneInput(exact, len);
        free(exact);
    }
    for (size_t i = 0; i < nseeds; i++)
        free(seeds[i]);
    printf("fuzz_reply: %ld inputs from %zu seeds, %ld accepted, no failure\n", runs, nseeds,
           accepted);
    return 0;
}

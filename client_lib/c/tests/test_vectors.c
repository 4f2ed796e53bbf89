/* The shared vectors of tests/vectors/{consistent_hash,messages}.json (converted by
 * vectors_to_text.py): the C library must compute the same hashes and origins and produce and
 * accept the same bytes as Python. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <inttypes.h>

#include "kvswitch.h"
#include "testutil.h"

#define FIELD 40000

static FILE *open_vectors(void)
{
    const char *path = getenv("KVS_VECTORS");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (f == NULL)
        fail_msg("KVS_VECTORS (%s) not readable: run through `make test`", path ? path : "unset");
    return f;
}

/* Count lines of a kind; skip the test (with a message) if its vector file is missing. */
static void require(const char *missing_name, const char *what)
{
    FILE *f = open_vectors();
    char *line = NULL;
    size_t cap = 0;
    int missing = 0;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "missing ", 8) == 0 && strstr(line, missing_name) != NULL)
            missing = 1;
    }
    free(line);
    fclose(f);
    if (missing) {
        print_message("%s is missing: skipped\n", what);
        skip();
    }
}

static void test_hashes(void **state)
{
    (void)state;
    require("consistent_hash.json", "tests/vectors/consistent_hash.json");
    FILE *f = open_vectors();
    char *line = NULL;
    size_t cap = 0;
    int hashes = 0, cases = 0;
    static char a[FIELD], b[FIELD];
    uint8_t bytes[256];
    while (getline(&line, &cap, f) > 0) {
        uint64_t fnv, hash, pos;
        unsigned servers, vnodes, origin;
        if (sscanf(line, "hash %255s %" SCNx64 " %" SCNx64, a, &fnv, &hash) == 3) {
            long n = hex_decode(a, bytes, sizeof bytes);
            assert_true(n >= 0);
            assert_true(kvs_fnv1a64(bytes, (size_t)n) == fnv);
            assert_true(kvs_hash(bytes, (size_t)n) == hash);
            hashes++;
        } else if (sscanf(line, "case %u %u %255s %255s %" SCNx64 " %u", &servers, &vnodes, a, b,
                          &pos, &origin) == 6) {
            uint8_t key16[KVS_KEY_SIZE], want16[KVS_KEY_SIZE];
            long n = hex_decode(a, bytes, sizeof bytes);
            assert_true(n >= 0);
            assert_int_equal(hex_decode(b, want16, sizeof want16), KVS_KEY_SIZE);
            assert_int_equal(kvs_make_key(bytes, (size_t)n, key16), KVS_OK);
            assert_memory_equal(key16, want16, KVS_KEY_SIZE);
            assert_true(kvs_hash(key16, KVS_KEY_SIZE) == pos);
            kvs_error err;
            kvs_ring *ring = kvs_ring_new(servers, vnodes, &err);
            assert_non_null(ring);
            if (kvs_ring_origin(ring, key16) != origin)
                fail_msg("servers=%u vnodes=%u key=%s: C says %u, vector says %u", servers, vnodes,
                         a, kvs_ring_origin(ring, key16), origin);
            kvs_ring_free(ring);
            cases++;
        }
    }
    free(line);
    fclose(f);
    print_message("%d hash vectors, %d origin cases\n", hashes, cases);
    assert_true(hashes > 0 && cases > 0);
}

/* consistent_hash.json "member_rings" (rings with gaps and additions, written by the Python side):
 * the origin of every key under every ring. Without the section: skipped with a message (the ring
 * with gaps is also checked without vectors, in test_ring). */
static void test_member_rings(void **state)
{
    (void)state;
    require("consistent_hash.json", "tests/vectors/consistent_hash.json");
    require("member_rings", "the \"member_rings\" section of tests/vectors/consistent_hash.json");
    FILE *f = open_vectors();
    char *line = NULL;
    size_t cap = 0;
    static char idtext[FIELD], lastids[FIELD], keyhex[256];
    unsigned lastvn = 0;
    kvs_ring *ring = NULL;
    int rings = 0, keys = 0;
    while (getline(&line, &cap, f) > 0) {
        unsigned vnodes, origin;
        if (sscanf(line, "mring %u %39999s %255s %u", &vnodes, idtext, keyhex, &origin) != 4)
            continue;
        if (ring == NULL || vnodes != lastvn || strcmp(idtext, lastids) != 0) {
            uint16_t ids[KVS_MAX_SERVER_ID + 1];
            size_t n = 0;
            for (char *save = NULL, *tok = strtok_r(idtext, ",", &save); tok != NULL;
                 tok = strtok_r(NULL, ",", &save)) {
                unsigned long id = strtoul(tok, NULL, 10);
                assert_true(id <= KVS_MAX_SERVER_ID && n <= KVS_MAX_SERVER_ID);
                ids[n++] = (uint16_t)id;
            }
            kvs_ring_free(ring);
            kvs_error err;
            ring = kvs_ring_from_members(1, vnodes, ids, n, &err);
            assert_non_null(ring);
            sscanf(line, "mring %*u %39999s", lastids); /* strtok_r cut idtext up */
            lastvn = vnodes;
            rings++;
        }
        uint8_t key16[KVS_KEY_SIZE];
        assert_int_equal(hex_decode(keyhex, key16, sizeof key16), KVS_KEY_SIZE);
        if (kvs_ring_origin(ring, key16) != origin)
            fail_msg("members %s vnodes %u key %s: C says %u, vector says %u", lastids, vnodes,
                     keyhex, kvs_ring_origin(ring, key16), origin);
        keys++;
    }
    kvs_ring_free(ring);
    free(line);
    fclose(f);
    print_message("%d member rings, %d keys\n", rings, keys);
    assert_true(rings > 0 && keys > 0);
}

static void test_messages(void **state)
{
    (void)state;
    require("messages.json", "tests/vectors/messages.json");
    FILE *f = open_vectors();
    char *line = NULL;
    size_t cap = 0;
    static char name[256], keyhex[256], valhex[FIELD], byteshex[FIELD];
    static uint8_t value[KVS_MAX_MESSAGE], want[KVS_MAX_MESSAGE + 64], out[KVS_MAX_MESSAGE];
    int msgs = 0, bad = 0, consts = 0, newer = 0;
    /* the ops and statuses the vector file knows (its "const" lines come before "bad" lines) */
    int vec_op[256] = {0}, vec_status[256] = {0};
    while (getline(&line, &cap, f) > 0) {
        unsigned op, status, vlen, epoch, flags;
        uint32_t cid, seq, ver;
        long cval;
        if (sscanf(line,
                   "msg %255s %u %u %u %" SCNu32 " %" SCNu32 " %u %u %" SCNu32
                   " %255s %39999s %39999s",
                   name, &op, &status, &vlen, &cid, &seq, &epoch, &flags, &ver, keyhex, valhex,
                   byteshex) == 12) {
            kvs_header h = {.op = (uint8_t)op,
                            .status = (uint8_t)status,
                            .cid = cid,
                            .seq = seq,
                            .epoch = (uint16_t)epoch,
                            .flags = (uint16_t)flags,
                            .ver = ver};
            assert_int_equal(hex_decode(keyhex, h.key, KVS_KEY_SIZE), KVS_KEY_SIZE);
            long vn = hex_decode(valhex, value, sizeof value);
            long bn = hex_decode(byteshex, want, sizeof want);
            assert_true(vn >= 0 && bn >= 0);
            assert_int_equal(vn, vlen);
            size_t len;
            assert_int_equal(kvs_encode(&h, value, (size_t)vn, out, sizeof out, &len), KVS_OK);
            assert_int_equal(len, bn);
            if (memcmp(out, want, len) != 0)
                fail_msg("message %s: C encoding differs from the vector", name);
            kvs_header d;
            const uint8_t *v;
            assert_int_equal(kvs_decode(want, (size_t)bn, &d, &v), KVS_OK);
            h.vlen = (uint16_t)vlen;
            assert_memory_equal(&d, &h, sizeof h);
            assert_memory_equal(v, value, (size_t)vn);
            msgs++;
        } else if (sscanf(line, "bad %255s %39999s", name, byteshex) == 2) {
            long bn = hex_decode(byteshex, want, sizeof want);
            assert_true(bn >= 0);
            /* vectors older than kvswitch.h: a code they call unknown may be one C knows now
             * (RING_GET/RING_REPLY, MOVED/RETRY); the merge with the Python side regenerates them */
            if ((bn >= 1 && !vec_op[want[0]] && strcmp(kvs_op_name(want[0]), "?") != 0) ||
                (bn >= 2 && !vec_status[want[1]] && strcmp(kvs_status_name(want[1]), "?") != 0)) {
                print_message("malformed vector %s uses a code the vectors do not know but "
                              "kvswitch.h does: skipped\n",
                              name);
                newer++;
                continue;
            }
            /* an exact-size heap copy, so ASan sees any read past the end */
            uint8_t *exact = malloc(bn ? (size_t)bn : 1);
            memcpy(exact, want, (size_t)bn);
            kvs_header d;
            if (kvs_decode(exact, (size_t)bn, &d, NULL) != KVS_ERR_MALFORMED)
                fail_msg("malformed vector %s was accepted", name);
            free(exact);
            bad++;
        } else if (sscanf(line, "const %255s %ld", name, &cval) == 2) {
            if (cval >= 0 && cval < 256 && strncmp(name, "op_", 3) == 0)
                vec_op[cval] = 1;
            if (cval >= 0 && cval < 256 && strncmp(name, "status_", 7) == 0)
                vec_status[cval] = 1;
            struct {
                const char *name;
                long value;
            } known[] = {
                {"header_len", KVS_HEADER_SIZE},
                {"kvs_port", KVS_PORT},
                {"max_value", KVS_MAX_VALUE},
                {"op_GET", KVS_OP_GET},
                {"op_GET_REPLY", KVS_OP_GET_REPLY},
                {"op_SET", KVS_OP_SET},
                {"op_SET_REPLY", KVS_OP_SET_REPLY},
                {"op_DEL", KVS_OP_DEL},
                {"op_DEL_REPLY", KVS_OP_DEL_REPLY},
                {"op_UPDATE", KVS_OP_UPDATE},
                {"op_UPDATE_DEL", KVS_OP_UPDATE_DEL},
                {"op_CONFIRM", KVS_OP_CONFIRM},
                {"op_PUSH", KVS_OP_PUSH},
                {"op_SYNC", KVS_OP_SYNC},
                {"op_SYNC_DONE", KVS_OP_SYNC_DONE},
                {"op_REMOVE", KVS_OP_REMOVE},
                {"op_REMOVE_REPLY", KVS_OP_REMOVE_REPLY},
                {"status_OK", KVS_STATUS_OK},
                {"status_NOT_FOUND", KVS_STATUS_NOT_FOUND},
                {"status_BAD_REQUEST", KVS_STATUS_BAD_REQUEST},
                {"status_TOO_LARGE", KVS_STATUS_TOO_LARGE},
                {"status_STALE", KVS_STATUS_STALE},
                {"status_DUPLICATE", KVS_STATUS_DUPLICATE},
                {"status_SERVER_ERROR", KVS_STATUS_SERVER_ERROR},
                {"status_UNAVAILABLE", KVS_STATUS_UNAVAILABLE},
                {"op_RING_GET", KVS_OP_RING_GET},
                {"op_RING_REPLY", KVS_OP_RING_REPLY},
                {"status_MOVED", KVS_STATUS_MOVED},
                {"status_RETRY", KVS_STATUS_RETRY},
                {"flag_F_TCP", KVS_F_TCP},
                {"flag_F_DUP", KVS_F_DUP},
                {"flag_F_REDIRECT", KVS_F_REDIRECT},
                {"flag_F_SETTLED", KVS_F_SETTLED},
            };
            int found = 0;
            for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
                if (strcmp(known[i].name, name) == 0) {
                    found = 1;
                    if (known[i].value != cval)
                        fail_msg("constant %s: kvswitch.h has %ld, vectors say %ld", name,
                                 known[i].value, cval);
                }
            }
            if (!found)
                fail_msg("constant %s of the vectors is unknown to kvswitch.h", name);
            consts++;
        }
    }
    free(line);
    fclose(f);
    print_message("%d messages, %d malformed (%d skipped as older than kvswitch.h), %d constants\n",
                  msgs, bad, newer, consts);
    assert_true(msgs > 0 && bad > 0 && consts > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hashes),
        cmocka_unit_test(test_member_rings),
        cmocka_unit_test(test_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

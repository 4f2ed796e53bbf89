/* Encode/decode round trips, malformed input, keys, error names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kvswitch.h"
#include "testutil.h"

static void fill_header(kvs_header *h, uint8_t op, uint32_t salt)
{
    memset(h, 0, sizeof *h);
    h->op = op;
    h->status = (uint8_t)(salt % 7);
    h->cid = 0x80000001u ^ salt * 2654435761u;
    h->seq = salt * 40503u;
    h->epoch = (uint16_t)(salt * 7);
    h->flags = (uint16_t)(salt & 1);
    h->ver = 0xdeadbeefu + salt;
    for (int i = 0; i < KVS_KEY_SIZE; i++)
        h->key[i] = (uint8_t)(salt + (uint32_t)i * 13);
}

static void test_round_trip(void **state)
{
    (void)state;
    static uint8_t value[KVS_MAX_VALUE], buf[KVS_MAX_MESSAGE + 10];
    for (size_t i = 0; i < sizeof value; i++)
        value[i] = (uint8_t)(i * 31 + 7);
    const size_t sizes[] = {0, 1, 15, 36, 1000, KVS_MAX_VALUE - 1, KVS_MAX_VALUE};
    uint32_t salt = 1;
    for (int op = KVS_OP_GET; op <= KVS_OP_REMOVE_REPLY; op++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++, salt++) {
            kvs_header h, d;
            fill_header(&h, (uint8_t)op, salt);
            size_t len = 0;
            assert_int_equal(kvs_encode(&h, value, sizes[s], buf, sizeof buf, &len), KVS_OK);
            assert_int_equal(len, KVS_HEADER_SIZE + sizes[s]);
            const uint8_t *v = NULL;
            assert_int_equal(kvs_decode(buf, len, &d, &v), KVS_OK);
            h.vlen = (uint16_t)sizes[s];
            assert_memory_equal(&h, &d, sizeof h);
            assert_ptr_equal(v, buf + KVS_HEADER_SIZE);
            assert_memory_equal(v, value, sizes[s]);
            /* bytes after the message are ignored */
            assert_int_equal(kvs_decode(buf, len + 10 <= sizeof buf ? len + 10 : len, &d, NULL),
                             KVS_OK);
            assert_int_equal(d.vlen, sizes[s]);
        }
    }
}

static void test_byte_layout(void **state)
{
    (void)state;
    kvs_header h = {.op = KVS_OP_SET,
                    .status = 0,
                    .cid = 0x01020304,
                    .seq = 0x05060708,
                    .epoch = 0x090a,
                    .flags = 0x0b0c,
                    .ver = 0x0d0e0f10};
    memcpy(h.key, "abcdefghijklmnop", 16);
    uint8_t buf[64];
    size_t len;
    assert_int_equal(kvs_encode(&h, "xy", 2, buf, sizeof buf, &len), KVS_OK);
    const uint8_t want[] = {3,   0,   0,   2,   1,   2,   3,   4,   5,   6,   7,   8,   9,
                            10,  11,  12,  13,  14,  15,  16,  'a', 'b', 'c', 'd', 'e', 'f',
                            'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', 'x', 'y'};
    assert_int_equal(len, sizeof want);
    assert_memory_equal(buf, want, sizeof want);
}

static void test_encode_errors(void **state)
{
    (void)state;
    static uint8_t value[KVS_MAX_VALUE + 1], buf[KVS_MAX_MESSAGE + 1];
    kvs_header h;
    fill_header(&h, KVS_OP_SET, 3);
    size_t len = 12345;
    assert_int_equal(kvs_encode(&h, value, KVS_MAX_VALUE + 1, buf, sizeof buf, &len),
                     KVS_ERR_VALUE_TOO_LARGE);
    assert_int_equal(kvs_encode(&h, value, 10, buf, KVS_HEADER_SIZE + 9, &len),
                     KVS_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(kvs_encode(&h, NULL, 10, buf, sizeof buf, &len), KVS_ERR_INVALID_ARGUMENT);
    assert_int_equal(kvs_encode(NULL, value, 0, buf, sizeof buf, &len), KVS_ERR_INVALID_ARGUMENT);
    assert_int_equal(len, 12345); /* untouched on failure */
    assert_int_equal(kvs_encode(&h, NULL, 0, buf, KVS_HEADER_SIZE, &len), KVS_OK);
    assert_int_equal(len, KVS_HEADER_SIZE);
}

static void test_malformed(void **state)
{
    (void)state;
    uint8_t buf[KVS_HEADER_SIZE + 8];
    kvs_header h;
    fill_header(&h, KVS_OP_GET_REPLY, 0);
    size_t len;
    assert_int_equal(kvs_encode(&h, "12345678", 8, buf, sizeof buf, &len), KVS_OK);
    kvs_header d;
    /* every truncation is refused; the parser only sees len bytes (ASan checks the bound: copy
     * each prefix into an exact-size heap buffer) */
    for (size_t n = 0; n < len; n++) {
        uint8_t *exact = malloc(n ? n : 1);
        memcpy(exact, buf, n);
        assert_int_equal(kvs_decode(exact, n, &d, NULL), KVS_ERR_MALFORMED);
        free(exact);
    }
    assert_int_equal(kvs_decode(NULL, 0, &d, NULL), KVS_ERR_MALFORMED);
    assert_int_equal(kvs_decode(buf, len, NULL, NULL), KVS_ERR_INVALID_ARGUMENT);
    /* vlen larger than the bytes present */
    buf[2] = 0xff;
    buf[3] = 0xff;
    assert_int_equal(kvs_decode(buf, len, &d, NULL), KVS_ERR_MALFORMED);
    buf[2] = 0;
    buf[3] = 8;
    /* unknown op or status */
    const uint8_t bad_ops[] = {0, KVS_OP_RING_REPLY + 1, 200, 255};
    for (size_t i = 0; i < sizeof bad_ops; i++) {
        buf[0] = bad_ops[i];
        assert_int_equal(kvs_decode(buf, len, &d, NULL), KVS_ERR_MALFORMED);
    }
    buf[0] = KVS_OP_RING_REPLY;
    assert_int_equal(kvs_decode(buf, len, &d, NULL), KVS_OK);
    buf[0] = KVS_OP_GET_REPLY;
    buf[1] = KVS_STATUS_RETRY + 1;
    assert_int_equal(kvs_decode(buf, len, &d, NULL), KVS_ERR_MALFORMED);
    buf[1] = KVS_STATUS_MOVED;
    assert_int_equal(kvs_decode(buf, len, &d, NULL), KVS_OK);
    buf[1] = KVS_STATUS_SERVER_ERROR;
    assert_int_equal(kvs_decode(buf, len, &d, NULL), KVS_OK);
}

static void test_keys(void **state)
{
    (void)state;
    uint8_t k[KVS_KEY_SIZE];
    assert_int_equal(kvs_make_key("abc", 3, k), KVS_OK);
    const uint8_t want[KVS_KEY_SIZE] = {'a', 'b', 'c'};
    assert_memory_equal(k, want, KVS_KEY_SIZE);
    assert_int_equal(kvs_make_key("", 0, k), KVS_OK);
    const uint8_t zero[KVS_KEY_SIZE] = {0};
    assert_memory_equal(k, zero, KVS_KEY_SIZE);
    assert_int_equal(kvs_make_key(NULL, 0, k), KVS_OK);
    assert_int_equal(kvs_make_key("0123456789abcdef", 16, k), KVS_OK);
    assert_memory_equal(k, "0123456789abcdef", 16);
    assert_int_equal(kvs_make_key("0123456789abcdefg", 17, k), KVS_ERR_KEY_TOO_LONG);
    assert_int_equal(kvs_make_key(NULL, 3, k), KVS_ERR_INVALID_ARGUMENT);
}

static void test_names(void **state)
{
    (void)state;
    const int errors[] = {KVS_OK,
                          KVS_ERR_NOT_FOUND,
                          KVS_ERR_BAD_REQUEST,
                          KVS_ERR_TOO_LARGE,
                          KVS_ERR_STALE,
                          KVS_ERR_SERVER,
                          KVS_ERR_UNAVAILABLE,
                          KVS_ERR_MOVED,
                          KVS_ERR_RETRY,
                          KVS_ERR_KEY_TOO_LONG,
                          KVS_ERR_VALUE_TOO_LARGE,
                          KVS_ERR_BUFFER_TOO_SMALL,
                          KVS_ERR_MALFORMED,
                          KVS_ERR_TIMEOUT,
                          KVS_ERR_INVALID_ARGUMENT,
                          KVS_ERR_SYSTEM,
                          KVS_ERR_NO_MEMORY,
                          KVS_ERR_CLOSED};
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        assert_string_not_equal(kvs_strerror(errors[i]), "unknown error");
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(kvs_strerror(errors[i]), kvs_strerror(errors[j]));
    }
    assert_string_equal(kvs_strerror(999), "unknown error");
    assert_string_equal(kvs_strerror(-1), "unknown error");
    assert_int_equal(kvs_status_error(KVS_STATUS_OK), KVS_OK);
    assert_int_equal(kvs_status_error(KVS_STATUS_DUPLICATE), KVS_OK);
    assert_int_equal(kvs_status_error(KVS_STATUS_NOT_FOUND), KVS_ERR_NOT_FOUND);
    assert_int_equal(kvs_status_error(KVS_STATUS_BAD_REQUEST), KVS_ERR_BAD_REQUEST);
    assert_int_equal(kvs_status_error(KVS_STATUS_TOO_LARGE), KVS_ERR_TOO_LARGE);
    assert_int_equal(kvs_status_error(KVS_STATUS_STALE), KVS_ERR_STALE);
    assert_int_equal(kvs_status_error(KVS_STATUS_SERVER_ERROR), KVS_ERR_SERVER);
    assert_int_equal(kvs_status_error(KVS_STATUS_UNAVAILABLE), KVS_ERR_UNAVAILABLE);
    assert_int_equal(kvs_status_error(KVS_STATUS_MOVED), KVS_ERR_MOVED);
    assert_int_equal(kvs_status_error(KVS_STATUS_RETRY), KVS_ERR_RETRY);
    assert_int_equal(kvs_status_error(77), KVS_ERR_SERVER);
    assert_string_equal(kvs_op_name(KVS_OP_SYNC_DONE), "SYNC_DONE");
    assert_string_equal(kvs_op_name(KVS_OP_REMOVE_REPLY), "REMOVE_REPLY");
    assert_string_equal(kvs_op_name(0), "?");
    assert_string_equal(kvs_op_name(KVS_OP_RING_GET), "RING_GET");
    assert_string_equal(kvs_op_name(KVS_OP_RING_REPLY), "RING_REPLY");
    assert_string_equal(kvs_op_name(17), "?");
    assert_string_equal(kvs_status_name(KVS_STATUS_DUPLICATE), "DUPLICATE");
    assert_string_equal(kvs_status_name(KVS_STATUS_UNAVAILABLE), "UNAVAILABLE");
    assert_string_equal(kvs_status_name(KVS_STATUS_MOVED), "MOVED");
    assert_string_equal(kvs_status_name(KVS_STATUS_RETRY), "RETRY");
    assert_string_equal(kvs_status_name(10), "?");
    assert_int_equal(kvs_reply_op(KVS_OP_GET), KVS_OP_GET_REPLY);
    assert_int_equal(kvs_reply_op(KVS_OP_SET), KVS_OP_SET_REPLY);
    assert_int_equal(kvs_reply_op(KVS_OP_DEL), KVS_OP_DEL_REPLY);
    assert_int_equal(kvs_reply_op(KVS_OP_REMOVE), KVS_OP_REMOVE_REPLY);
    assert_int_equal(kvs_reply_op(KVS_OP_RING_GET), KVS_OP_RING_REPLY);
    assert_int_equal(kvs_reply_op(KVS_OP_CONFIRM), 0);
    assert_int_equal(kvs_reply_op(KVS_OP_RING_REPLY), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),    cmocka_unit_test(test_byte_layout),
        cmocka_unit_test(test_encode_errors), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_keys),          cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

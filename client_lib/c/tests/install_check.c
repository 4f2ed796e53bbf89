/* Built against an installed copy through pkg-config (make test: install-check): the header, the
 * shared and the static library are all usable by an outside program. */
#include <kvswitch.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    uint8_t key[KVS_KEY_SIZE], buf[KVS_MAX_MESSAGE];
    kvs_header h = {.op = KVS_OP_GET, .cid = 1, .seq = 2};
    size_t len;
    if (kvs_make_key("k", 1, key) != KVS_OK)
        return 1;
    memcpy(h.key, key, sizeof key);
    if (kvs_encode(&h, NULL, 0, buf, sizeof buf, &len) != KVS_OK || len != KVS_HEADER_SIZE)
        return 1;
    kvs_error err;
    kvs_ring *ring = kvs_ring_new(4, 0, &err);
    if (ring == NULL)
        return 1;
    printf("install check: origin of \"k\" among 4 servers = %u (%s)\n", kvs_ring_origin(ring, key),
           kvs_strerror(KVS_OK));
    kvs_ring_free(ring);
    return 0;
}

/* Fuzz target for the reply parser (libFuzzer entry point; fuzz/driver.c runs it without clang).
 * Invariants: kvs_decode never reads outside [data, data + size) (ASan), accepts exactly the
 * messages docs/protocol.md allows, and an accepted message re-encodes to the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "kvswitch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kvs_header h;
    const uint8_t *value = NULL;
    kvs_error e = kvs_decode(data, size, &h, &value);
    int well_formed = size >= KVS_HEADER_SIZE &&
                      (size_t)KVS_HEADER_SIZE + ((size_t)data[2] << 8 | data[3]) <= size &&
                      data[0] >= KVS_OP_GET && data[0] <= KVS_OP_REMOVE_REPLY &&
                      data[1] <= KVS_STATUS_UNAVAILABLE;
    if ((e == KVS_OK) != well_formed)
        abort();
    if (e != KVS_OK) {
        if (e != KVS_ERR_MALFORMED)
            abort();
        return 0;
    }
    if (value != data + KVS_HEADER_SIZE || KVS_HEADER_SIZE + (size_t)h.vlen > size)
        abort();
    if (h.vlen > KVS_MAX_VALUE)
        return 0; /* decodable (as over TCP) but not encodable over UDP */
    static uint8_t out[KVS_MAX_MESSAGE];
    size_t len;
    if (kvs_encode(&h, value, h.vlen, out, sizeof out, &len) != KVS_OK || len > size ||
        memcmp(out, data, len) != 0)
        abort();
    return 0;
}

/* Helpers shared by the C tests (header-only; every test is one program). */
#ifndef KVS_TESTUTIL_H
#define KVS_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decode hex ("-" = empty) into out (capacity cap); the byte count, or -1 on bad hex. */
static inline long hex_decode(const char *hex, uint8_t *out, size_t cap)
{
    if (strcmp(hex, "-") == 0)
        return 0;
    size_t n = strlen(hex);
    if (n % 2 != 0 || n / 2 > cap)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (uint8_t)v;
    }
    return (long)(n / 2);
}

#endif

/* Helpers shared by the C tests (header-only; every test is one program). */
#ifndef KVS_TESTUTIL_H
#define KVS_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Run argv[0] with argv, its stdout into out (NUL-terminated); its exit status, -1 if killed. */
static inline int run_capture(char *const argv[], char *out, size_t cap)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    size_t got = 0;
    ssize_t n;
    while (got + 1 < cap && (n = read(p[0], out + got, cap - 1 - got)) > 0)
        got += (size_t)n;
    out[got] = '\0';
    close(p[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The integer value of "field": in a flat JSON text, or LONG_MIN if absent. */
static inline long json_long(const char *json, const char *field)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", field);
    const char *at = strstr(json, pat);
    return at ? strtol(at + strlen(pat), NULL, 10) : (-__LONG_MAX__ - 1);
}

#endif

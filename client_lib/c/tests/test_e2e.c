/* End to end: a real Python agent (`python -m kvswitch agent`, built-in store) on a free loopback
 * port, driven through the C library (UDP and TCP) and the load generator. Skipped with a message
 * when the kvswitch package is not importable (KVS_PYTHON, default the venv's python). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvswitch.h"
#include "testutil.h"

struct agent {
    pid_t pid;
    uint16_t port;
    char log[64];
};

static const char *python(void)
{
    const char *py = getenv("KVS_PYTHON");
    return py ? py : "python3";
}

/* A port free for both UDP and TCP right now. */
static uint16_t free_port(void)
{
    for (int tries = 0; tries < 50; tries++) {
        int u = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        bind(u, (struct sockaddr *)&a, sizeof a);
        getsockname(u, (struct sockaddr *)&a, &len);
        int t = socket(AF_INET, SOCK_STREAM, 0);
        int ok = bind(t, (struct sockaddr *)&a, sizeof a) == 0;
        close(t);
        close(u);
        if (ok)
            return ntohs(a.sin_port);
    }
    fail_msg("no free port");
    return 0;
}

static int importable(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        execlp(python(), python(), "-c", "import kvswitch.agent.main", (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int start_agent(void **state)
{
    if (!importable()) {
        print_message("kvswitch agent not importable with %s: end-to-end tests skipped\n",
                      python());
        *state = NULL;
        return 0;
    }
    struct agent *a = calloc(1, sizeof *a);
    a->port = free_port();
    char port[16];
    snprintf(port, sizeof port, "%u", a->port);
    /* the agent's output goes to a log file (a pipe closed after start-up would kill it with
     * SIGPIPE on its next line) */
    snprintf(a->log, sizeof a->log, "/tmp/kvs-c-e2e-agent-XXXXXX");
    int log = mkstemp(a->log);
    assert_true(log >= 0);
    a->pid = fork();
    if (a->pid == 0) {
        dup2(log, 1);
        dup2(log, 2);
        execlp(python(), python(), "-m", "kvswitch", "agent", "--listen", "127.0.0.1", "--port",
               port, "--max-value", "4096", (char *)NULL);
        _exit(127);
    }
    close(log);
    /* ready when it prints its "serving" line */
    char line[2048] = "";
    int ready = 0;
    for (int i = 0; i < 400 && !ready; i++) {
        usleep(50000);
        FILE *f = fopen(a->log, "r");
        size_t n = f ? fread(line, 1, sizeof line - 1, f) : 0;
        if (f)
            fclose(f);
        line[n] = '\0';
        ready = strstr(line, "serving") != NULL;
        if (!ready && waitpid(a->pid, NULL, WNOHANG) == a->pid)
            break;
    }
    if (!ready) {
        kill(a->pid, SIGKILL);
        waitpid(a->pid, NULL, 0);
        unlink(a->log);
        fail_msg("agent did not start: %s", line);
    }
    *state = a;
    return 0;
}

static int stop_agent(void **state)
{
    struct agent *a = *state;
    if (a != NULL) {
        kill(a->pid, SIGTERM);
        int status;
        for (int i = 0; i < 50 && waitpid(a->pid, &status, WNOHANG) == 0; i++)
            usleep(100000);
        if (waitpid(a->pid, &status, WNOHANG) == 0) {
            kill(a->pid, SIGKILL);
            waitpid(a->pid, &status, 0);
        }
        unlink(a->log);
        free(a);
    }
    return 0;
}

static kvs_client *connect_agent(const struct agent *a, int tcp)
{
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", a->port);
    const char *servers[] = {addr};
    kvs_config cfg = {
        .servers = servers, .nservers = 1, .timeout_ms = 1000, .retries = 2, .tcp_writes = tcp};
    kvs_error err;
    kvs_client *c = kvs_client_new(&cfg, &err);
    assert_non_null(c);
    return c;
}

static void crud(kvs_client *c, const char *key)
{
    size_t klen = strlen(key);
    char buf[KVS_MAX_VALUE];
    size_t vlen;
    kvs_reply_info info;
    kvs_delete(c, key, klen, NULL);
    assert_int_equal(kvs_get(c, key, klen, buf, sizeof buf, &vlen, NULL), KVS_ERR_NOT_FOUND);
    assert_int_equal(kvs_set(c, key, klen, "first", 5, &info), KVS_OK);
    assert_int_equal(info.status, KVS_STATUS_OK);
    assert_int_equal(kvs_get(c, key, klen, buf, sizeof buf, &vlen, &info), KVS_OK);
    assert_int_equal(vlen, 5);
    assert_memory_equal(buf, "first", 5);
    assert_int_equal(info.server, 0);
    assert_int_equal(kvs_set(c, key, klen, "", 0, NULL), KVS_OK); /* empty values exist */
    assert_int_equal(kvs_get(c, key, klen, buf, sizeof buf, &vlen, NULL), KVS_OK);
    assert_int_equal(vlen, 0);
    assert_int_equal(kvs_delete(c, key, klen, NULL), KVS_OK);
    assert_int_equal(kvs_get(c, key, klen, buf, sizeof buf, &vlen, NULL), KVS_ERR_NOT_FOUND);
    assert_int_equal(kvs_delete(c, key, klen, NULL), KVS_ERR_NOT_FOUND);
}

static void test_udp(void **state)
{
    if (*state == NULL)
        skip();
    kvs_client *c = connect_agent(*state, 0);
    crud(c, "c-udp-key");
    crud(c, "0123456789abcdef"); /* a full 16-byte key */
    /* the largest value the agent takes (--max-value 4096), and one over it */
    static uint8_t big[5000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 7);
    assert_int_equal(kvs_set(c, "big", 3, big, 4096, NULL), KVS_OK);
    static uint8_t back[KVS_MAX_VALUE];
    size_t vlen;
    assert_int_equal(kvs_get(c, "big", 3, back, sizeof back, &vlen, NULL), KVS_OK);
    assert_int_equal(vlen, 4096);
    assert_memory_equal(back, big, 4096);
    assert_int_equal(kvs_set(c, "big", 3, big, 5000, NULL), KVS_ERR_TOO_LARGE);
    kvs_client_free(c);
}

static void test_tcp(void **state)
{
    if (*state == NULL)
        skip();
    kvs_client *c = connect_agent(*state, 1);
    crud(c, "c-tcp-key");
    kvs_client_free(c);
}

/* Two clients (a writer over TCP, a reader over UDP) see each other's writes. */
static void test_two_clients(void **state)
{
    if (*state == NULL)
        skip();
    kvs_client *w = connect_agent(*state, 1), *r = connect_agent(*state, 0);
    for (int i = 0; i < 50; i++) {
        char key[16], val[32], buf[32];
        int kn = snprintf(key, sizeof key, "shared%d", i % 5);
        int vn = snprintf(val, sizeof val, "value-%d", i);
        assert_int_equal(kvs_set(w, key, (size_t)kn, val, (size_t)vn, NULL), KVS_OK);
        size_t vlen;
        assert_int_equal(kvs_get(r, key, (size_t)kn, buf, sizeof buf, &vlen, NULL), KVS_OK);
        assert_int_equal(vlen, vn);
        assert_memory_equal(buf, val, (size_t)vn);
    }
    kvs_client_free(w);
    kvs_client_free(r);
}

/* The loadgen against the test's agent with args (after --servers): its --json summary in out. */
static void run_loadgen(void **state, const char *const *args, size_t nargs, char *out, size_t cap)
{
    struct agent *a = *state;
    const char *bin = getenv("KVS_LOADGEN");
    if (a == NULL || bin == NULL)
        skip();
    char servers[32];
    snprintf(servers, sizeof servers, "127.0.0.1:%u", a->port);
    char *argv[32] = {(char *)bin, "--servers", servers};
    assert_true(nargs + 6 <= sizeof argv / sizeof argv[0]);
    for (size_t i = 0; i < nargs; i++)
        argv[3 + i] = (char *)args[i];
    argv[3 + nargs] = "--json";
    argv[4 + nargs] = "--quiet";
    assert_int_equal(run_capture(argv, out, cap), 0);
}

static void test_loadgen_against_agent(void **state)
{
    static const char *const args[] = {"--rate", "1000",          "--duration", "1",  "--keys",
                                       "200",    "--preload",     "--write-ratio", "0.1"};
    static char out[1 << 16];
    run_loadgen(state, args, sizeof args / sizeof args[0], out, sizeof out);
    long received = json_long(out, "received"), not_found = json_long(out, "not_found");
    print_message("loadgen against the agent: %ld replies in 1 s\n", received);
    assert_true(received >= 900);
    assert_int_equal(not_found, 0); /* every key was preloaded */
}

/* --resends with a timeout far below the round trip: requests are sent again with the same request
 * id while the first attempt is on its way; the agent answers repeats with the first result. */
static void test_loadgen_resends_below_the_round_trip(void **state)
{
    static const char *const args[] = {"--window", "4",   "--duration",   "1",   "--keys",
                                       "20",       "--write-ratio", "0.5", "--timeout-us",
                                       "200",      "--resends",     "100"};
    static char out[1 << 16];
    run_loadgen(state, args, sizeof args / sizeof args[0], out, sizeof out);
    long received = json_long(out, "received"), resent = json_long(out, "timeout_resends");
    long errors = json_long(out, "errors");
    print_message("loadgen resending after 200 us: %ld replies, %ld resends\n", received, resent);
    assert_true(received > 100 && resent > 100);
    assert_int_equal(errors, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_udp),
        cmocka_unit_test(test_tcp),
        cmocka_unit_test(test_two_clients),
        cmocka_unit_test(test_loadgen_against_agent),
        cmocka_unit_test(test_loadgen_resends_below_the_round_trip),
    };
    return cmocka_run_group_tests(tests, start_agent, stop_agent);
}

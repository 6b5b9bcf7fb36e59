// Runner for the C unit tests.
//
//   cd-tests              run every test, each in a forked child with a timeout
//   cd-tests --list       print test names, one per line
//   cd-tests NAME...      run the named tests (or those whose name starts with
//                         NAME when it ends in '*')
//
// Prints one line per test (`ok`, `FAIL` or `skip NAME: reason`) and ends
// with "N passed, M failed, K skipped".
// CD_TEST_TIMEOUT (seconds, default 120) bounds each test; CD_TEST_SEED fixes
// the random seed (otherwise a fresh seed per run, printed on failure). The
// HIP emulator's thread order is seeded from the same seed (CD_HIP_EMU_SEED,
// unless set), so CD_TEST_SEED also reproduces the order a kernel ran in; a
// failure line also names the CD_HIP_EMU_* settings in effect.

#include "tests/unit/check.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *name;
    cd_test_fn fn;
    const char *file;
} test_entry;

static test_entry *g_tests;
static int g_skip_fd = -1; // in a test's child: the pipe CD_SKIP's reason goes to
static size_t g_ntests, g_cap;
static uint64_t g_rng;

void cd_test_register(const char *name, cd_test_fn fn, const char *file) {
    if (g_ntests == g_cap) {
        g_cap = g_cap ? g_cap * 2 : 64;
        g_tests = realloc(g_tests, g_cap * sizeof *g_tests);
        if (!g_tests) abort();
    }
    g_tests[g_ntests++] = (test_entry){name, fn, file};
}

uint64_t cd_test_rand(void) {
    // splitmix64
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float cd_test_randf(float lo, float hi) {
    return lo + (hi - lo) * (float)((cd_test_rand() >> 40) / (double)(1ull << 24));
}

int cd_test_randi(int lo, int hi) { return lo + (int)(cd_test_rand() % (uint64_t)(hi - lo + 1)); }

void cd_test_skip(const char *fmt, ...) {
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    fflush(stdout);
    if (g_skip_fd >= 0) {
        ssize_t n = write(g_skip_fd, reason, strlen(reason));
        (void)n;
    }
    _exit(CD_TEST_SKIP_STATUS);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const test_entry *)a)->name, ((const test_entry *)b)->name);
}

static int selected(const char *name, int argc, char **argv) {
    if (argc == 0) return 1;
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(argv[i]);
        if (n && argv[i][n - 1] == '*') {
            if (strncmp(name, argv[i], n - 1) == 0) return 1;
        } else if (strcmp(name, argv[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum { RUN_PASSED, RUN_FAILED, RUN_SKIPPED };

// Runs one test in a child; returns RUN_PASSED, RUN_FAILED, or RUN_SKIPPED
// with the test's reason in skip_reason.
static int run_one(const test_entry *t, uint64_t seed, int timeout_s, char *skip_reason, size_t reason_len) {
    fflush(stdout);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        perror("pipe");
        return RUN_FAILED;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        close(fds[0]);
        close(fds[1]);
        return RUN_FAILED;
    }
    if (pid == 0) {
        close(fds[0]);
        g_skip_fd = fds[1];
        g_rng = seed;
        if (!getenv("CD_HIP_EMU_SEED")) {
            char s[32];
            snprintf(s, sizeof s, "%llu", (unsigned long long)seed);
            setenv("CD_HIP_EMU_SEED", s, 1);
        }
        alarm((unsigned)timeout_s);
        t->fn();
        fflush(stdout);
        _exit(0);
    }
    close(fds[1]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
    }
    // The reason was written before the child exited, so it is in the pipe
    // now; read without blocking, as a helper the test forked may still hold
    // the write end.
    size_t got = 0;
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    for (ssize_t n; got + 1 < reason_len && (n = read(fds[0], skip_reason + got, reason_len - 1 - got)) > 0;)
        got += (size_t)n;
    skip_reason[got] = 0;
    close(fds[0]);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return RUN_PASSED;
    if (WIFEXITED(st) && WEXITSTATUS(st) == CD_TEST_SKIP_STATUS) return RUN_SKIPPED;
    if (WIFSIGNALED(st))
        fprintf(stderr, "  %s: killed by signal %d%s\n", t->name, WTERMSIG(st),
                WTERMSIG(st) == SIGALRM ? " (timeout)" : "");
    return RUN_FAILED;
}

int main(int argc, char **argv) {
    qsort(g_tests, g_ntests, sizeof *g_tests, cmp_name);
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < g_ntests; i++) printf("%s\n", g_tests[i].name);
        return 0;
    }
    const char *s = getenv("CD_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid();
    const char *to = getenv("CD_TEST_TIMEOUT");
    int timeout_s = to ? atoi(to) : 120;

    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < g_ntests; i++) {
        const test_entry *t = &g_tests[i];
        if (!selected(t->name, argc - 1, argv + 1)) continue;
        double t0 = now_s();
        char reason[512];
        int rc = run_one(t, seed + i, timeout_s, reason, sizeof reason);
        if (rc == RUN_PASSED) {
            passed++;
            printf("ok   %s (%.2fs)\n", t->name, now_s() - t0);
        } else if (rc == RUN_SKIPPED) {
            skipped++;
            printf("skip %s: %s\n", t->name, reason[0] ? reason : "(no reason given)");
        } else {
            failed++;
            // The base seed: run alone with it, the test gets seed + i again.
            printf("FAIL %s (%s, CD_TEST_SEED=%llu", t->name, t->file, (unsigned long long)seed);
            static const char *const emu[] = {"CD_HIP_EMU_WAVE_SIZE", "CD_HIP_EMU_ORDER", "CD_HIP_EMU_SEED"};
            for (size_t k = 0; k < sizeof emu / sizeof emu[0]; k++)
                if (getenv(emu[k])) printf(" %s=%s", emu[k], getenv(emu[k]));
            printf(")\n");
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}

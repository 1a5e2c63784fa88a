/*
 * sync_fault.c - an LD_PRELOAD shim for fault-injection tests: fsync and
 * fdatasync fail with EIO, without syncing, as a disk that lost the writes
 * would make them fail. Built by the Makefile as <variant>/test-preload/
 * sync_fault.so for tests only; no shipped program links it. Used by
 * tests/integration/oltp_sync_fault.c on cabrank-ledger. Any thread of the
 * process that preloads it; no state but the counter and the generator.
 *
 * Environment (read at the first call):
 *   CR_SYNC_FAULT_AFTER=N  calls 1..N go through, every later one fails;
 *   CR_SYNC_FAULT_PROB=P   each call fails with probability P (0..1), drawn
 *                          from a generator seeded by CR_SYNC_FAULT_SEED
 *                          (default 1), so a run repeats itself;
 *   neither: every call goes through.
 * Each failure is written to stderr as "sync_fault: fd N: EIO (call K)".
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int sync_fn(int fd);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Protected by lock. */
static bool configured;
static unsigned long after;
static bool has_after;
static double prob;
static uint64_t rng;
static unsigned long calls;

static void configure(void)
{
    const char *a = getenv("CR_SYNC_FAULT_AFTER");
    const char *p = getenv("CR_SYNC_FAULT_PROB");
    const char *s = getenv("CR_SYNC_FAULT_SEED");

    configured = true;
    if (a != NULL && a[0] != '\0') {
        after = strtoul(a, NULL, 10);
        has_after = true;
    }
    if (p != NULL && p[0] != '\0')
        prob = strtod(p, NULL);
    rng = s != NULL && s[0] != '\0' ? strtoull(s, NULL, 10) : 1;
    if (rng == 0)
        rng = 1;
}

/* xorshift64*: a double in [0, 1). */
static double next_unit(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* Whether this call fails; its number in *k. */
static bool is_failing(unsigned long *k)
{
    bool fail;

    pthread_mutex_lock(&lock);
    if (!configured)
        configure();
    *k = ++calls;
    fail = (has_after && *k > after) || (prob > 0 && next_unit() < prob);
    pthread_mutex_unlock(&lock);
    return fail;
}

static int call(const char *name, int fd)
{
    unsigned long k;
    sync_fn *real;
    char msg[96];
    int n;

    if (is_failing(&k)) {
        n = snprintf(msg, sizeof(msg), "sync_fault: %s fd %d: EIO (call %lu)\n", name, fd, k);
        if (n > 0)
            (void)!write(STDERR_FILENO, msg, (size_t)n);
        errno = EIO;
        return -1;
    }
    real = (sync_fn *)dlsym(RTLD_NEXT, name);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return real(fd);
}

int fsync(int fd)
{
    return call("fsync", fd);
}

int fdatasync(int fd)
{
    return call("fdatasync", fd);
}

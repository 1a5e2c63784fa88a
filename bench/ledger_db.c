/*
 * ledger_db.c - the ledger database's group commit benchmark: THREADS
 * threads each applying keyed transfers between random accounts (1024,
 * funded so none fails) through ledger_db_apply for SECONDS seconds, on a
 * fresh SQLite file in DIR, once without and once with group commit; it
 * prints durable transfers/s, commits (fsyncs) and units per commit for
 * each. Without group commit the writers queue in SQLite's busy handler
 * (it polls with sleeps of up to 100 ms), which is part of what group
 * commit saves; the elapsed time includes the threads' last wait. Not a
 * test: figures vary with the disk and the machine's load.
 *
 * Usage: ledger_db [threads [seconds [dir]]]   (defaults 64 2 /tmp)
 */
#include "../apps/oltp/ledger_db.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ACCOUNTS 1024

struct worker {
    struct ledger_db *db;
    uint32_t id;
    uint64_t ok;
    uint64_t failed;
};

/* Set by run() when the time is up; relaxed atomics: the workers need
 * only see it eventually, and join orders their counts. */
static int stop;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *transfers(void *p)
{
    struct worker *w = p;
    unsigned seed = w->id * 2654435761u;

    for (uint32_t i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
        uint64_t from = 1 + (uint64_t)rand_r(&seed) % ACCOUNTS;
        struct ledger_op op = {
            .op = OLTP_OP_TRANSFER,
            .account = from,
            .to = 1 + (from + (uint64_t)rand_r(&seed) % (ACCOUNTS - 1)) % ACCOUNTS,
            .amount = 1 + rand_r(&seed) % 100,
        };
        struct ledger_result res;

        memcpy(op.key, &w->id, sizeof(w->id));
        memcpy(op.key + 4, &i, sizeof(i));
        op.key[15] = 1;
        if (ledger_db_apply(w->db, &op, 1, &res) == 0 && res.status == OLTP_ST_OK)
            w->ok++;
        else
            w->failed++;
    }
    return NULL;
}

static int run(const char *dir, bool group, int threads, int seconds)
{
    char path[512];
    struct ledger_db_config cfg = {.url = path, .group_commit = group};
    struct ledger_db *db;
    struct ledger_db_stats st;
    struct ledger_db_stats st0;
    struct ledger_op ops[64];
    struct ledger_result res;
    struct worker *w = calloc((size_t)threads, sizeof(*w));
    pthread_t *th = calloc((size_t)threads, sizeof(*th));
    uint64_t ok = 0;
    uint64_t failed = 0;
    uint64_t t0;
    double secs;

    snprintf(path, sizeof(path), "%s/bench_ledger_db_%d_%s.db", dir, (int)getpid(),
             group ? "group" : "single");
    if (w == NULL || th == NULL || ledger_db_open(&db, &cfg) != 0) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    /* Opened 32 accounts a unit: 64 ops, OLTP_MAX_SESSION_OPS. */
    for (uint64_t a = 1; a <= ACCOUNTS; a += 32) {
        for (uint64_t k = 0; k < 32; k++) {
            ops[2 * k] = (struct ledger_op){.op = OLTP_OP_OPEN, .account = a + k};
            ops[2 * k + 1] =
                (struct ledger_op){.op = OLTP_OP_DEPOSIT, .account = a + k, .amount = 1000000000};
        }
        if (ledger_db_apply(db, ops, 64, &res) != 0 || res.status != OLTP_ST_OK) {
            fprintf(stderr, "setup failed\n");
            return 1;
        }
    }
    ledger_db_stats(db, &st0);
    __atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
    t0 = now_ns();
    for (int t = 0; t < threads; t++) {
        w[t] = (struct worker){.db = db, .id = (uint32_t)t + 1};
        if (pthread_create(&th[t], NULL, transfers, &w[t]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    sleep((unsigned)seconds);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        ok += w[t].ok;
        failed += w[t].failed;
    }
    secs = (double)(now_ns() - t0) / 1e9;
    ledger_db_stats(db, &st);
    printf("group_commit=%-3s threads=%d seconds=%.2f transfers=%llu failed=%llu "
           "transfers/s=%.0f commits=%llu units/commit=%.1f max_batch=%llu "
           "retries=%llu\n",
           group ? "on" : "off", threads, secs, (unsigned long long)ok, (unsigned long long)failed,
           (double)ok / secs, (unsigned long long)(st.commits - st0.commits),
           st.commits > st0.commits
               ? (double)(st.units - st0.units) / (double)(st.commits - st0.commits)
               : 0.0,
           (unsigned long long)st.max_batch, (unsigned long long)st.retries);
    ledger_db_close(db);
    for (size_t i = 0; i < 3; i++) {
        static const char *const suffix[] = {"", "-wal", "-shm"};
        char f[600];

        snprintf(f, sizeof(f), "%s%s", path, suffix[i]);
        unlink(f);
    }
    free(th);
    free(w);
    return 0;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 64;
    int seconds = argc > 2 ? atoi(argv[2]) : 2;
    const char *dir = argc > 3 ? argv[3] : "/tmp";

    if (threads < 1 || threads > 4096 || seconds < 1) {
        fprintf(stderr, "usage: %s [threads [seconds [dir]]]\n", argv[0]);
        return 2;
    }
    printf("# %s %d %d %s\n", argv[0], threads, seconds, dir);
    if (run(dir, false, threads, seconds) != 0 || run(dir, true, threads, seconds) != 0)
        return 1;
    return 0;
}

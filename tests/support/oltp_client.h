/*
 * oltp_client.h - what the OLTP tests share (tests/integration/oltp_*.c,
 * tests/unit/test_gateway.c): a blocking client of the frame protocol
 * (apps/oltp/proto.h), a database with funded accounts, a load of keyed
 * transfers from client threads (resent after a lost connection if asked),
 * and the end check of such a load, run by the program's own checker
 * (apps/oltp/oltp_check.h) against the database. Test code: 127.0.0.1 only.
 */
#ifndef CABRANK_TEST_OLTP_CLIENT_H
#define CABRANK_TEST_OLTP_CLIENT_H

#include "../../apps/oltp/proto.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CR_TEST_OLTP_MAX_CLIENTS 16
#define CR_TEST_OLTP_MAX_PER     400
/* A transfer's status while it has no answer. */
#define CR_TEST_OLTP_NO_ANSWER 0xffff

/* Starts the built program prog (cr_test_build_path) with args (NULL-
 * terminated, at most 30) and waits up to timeout_ms for it to say the port
 * it listens on (cr_test_spawn_server): the child in *pid, the port in *port.
 * 0, or -errno (-E2BIG: too many args) after saying why on stderr.
 * Caller's thread only (it forks). */
int cr_test_oltp_spawn(const char *prog, char *const args[], pid_t *pid, uint16_t *port,
                       int timeout_ms);

/*
 * Runs the built cabrank-oltp-load with args (NULL-terminated, at most 30),
 * its stdout collected into out (NUL-terminated; echoed to stderr for the
 * log of the run). Returns its exit status, or -1 if it did not end within
 * timeout_ms (then killed). Caller's thread only (it forks).
 */
int cr_test_oltp_run_load(char **args, char *out, size_t cap, int timeout_ms);

/* Encodes r and writes it to fd (blocking). 0 or -errno (-EINVAL: r does
 * not encode). Thread-safe. */
int cr_test_oltp_send(int fd, const struct oltp_req *r);

/* Reads one reply frame from fd within timeout_ms into *rp. 0, -EBADMSG
 * (too long, or not exactly one reply frame), or cr_test_read_exact's
 * error. Thread-safe. */
int cr_test_oltp_recv(int fd, struct oltp_reply *rp, int timeout_ms);

/* cr_test_oltp_send, then cr_test_oltp_recv; a reply with another id is
 * -EBADMSG. Thread-safe. */
int cr_test_oltp_call(int fd, const struct oltp_req *r, struct oltp_reply *rp, int timeout_ms);

/* The key of client's seq-th transfer: "cCC-sSSSSSSSSSS" (client < 100),
 * zero-padded to OLTP_KEY_SIZE. Thread-safe. */
void cr_test_oltp_key(unsigned client, unsigned seq, uint8_t key[OLTP_KEY_SIZE]);

/* Opens the database at url (ledger_db_config.url, created if need be) and
 * accounts 1..accounts, each funded with balance. 0 or -errno (-EIO: an
 * account refused). Thread-safe. */
int cr_test_oltp_make_db(const char *url, unsigned accounts, int64_t balance);

struct cr_test_oltp_load;

/* One transfer a load client sent, and the answer's status. */
struct cr_test_oltp_xfer {
    uint64_t from;
    uint64_t to;
    int64_t amount;
    uint16_t status; /* CR_TEST_OLTP_NO_ANSWER: none */
};

/* One load client's record. Its thread writes it; read it after the join. */
struct cr_test_oltp_client {
    struct cr_test_oltp_load *ld;
    unsigned idx;
    unsigned sent;       /* transfers sent at least once: x[0..sent) */
    unsigned failed;     /* gave up on a transfer (no answer, no more tries) */
    unsigned unexpected; /* answers neither OK nor INSUFFICIENT */
    uint16_t last_unexpected;
    struct cr_test_oltp_xfer x[CR_TEST_OLTP_MAX_PER];
};

/*
 * A load: clients threads, each sending per_client keyed transfers between
 * random accounts of 1..accounts (amounts 1..max_amount) in turn on its own
 * connection to 127.0.0.1:port, waiting reply_tmo_ms for each answer. Client
 * i draws from rand_r seeded seed + i * 7919 (a run repeats itself). On a lost
 * connection or a wrong reply, a client with reconnect set connects again
 * (every 20 ms) and resends the same transfer with its key until deadline_ms
 * (cr_test_now_ms()); without, it gives up.
 */
struct cr_test_oltp_load_config {
    uint16_t port;
    unsigned clients;    /* at most CR_TEST_OLTP_MAX_CLIENTS */
    unsigned per_client; /* at most CR_TEST_OLTP_MAX_PER */
    unsigned accounts;   /* at least 2 */
    unsigned max_amount; /* at least 1 */
    unsigned seed;
    int reply_tmo_ms;
    bool reconnect;
    uint64_t deadline_ms;
};

struct cr_test_oltp_load {
    /* Immutable while the load runs. */
    struct cr_test_oltp_load_config cfg;
    /* Counted while the load runs, by every client. */
    atomic_uint acked;
    atomic_uint lost_connections;
    struct cr_test_oltp_client c[CR_TEST_OLTP_MAX_CLIENTS];
    pthread_t th[CR_TEST_OLTP_MAX_CLIENTS];
    unsigned started;
};

/* Clears ld, copies cfg into it and starts the client threads. 0 or -errno
 * (-EINVAL: cfg out of range; otherwise those started still run: join
 * them). Caller's thread only. */
int cr_test_oltp_load_start(struct cr_test_oltp_load *ld,
                            const struct cr_test_oltp_load_config *cfg);

/* Waits for every started client thread. Caller's thread only. */
void cr_test_oltp_load_join(struct cr_test_oltp_load *ld);

/* What cr_test_oltp_check found. */
struct cr_test_oltp_verdict {
    bool ok;             /* every check passed */
    unsigned acked;      /* transfers answered OK */
    unsigned unanswered; /* transfers sent and never answered */
    unsigned in_doubt;   /* transfers answered IN_DOUBT: present or not */
    uint64_t accounts;
    int64_t sum;
    char report[2048]; /* the checker's lines and every failed check */
};

/*
 * The end check of a joined load against the database at db_url, by
 * oltp_check_run: every acknowledged transfer is there exactly once with
 * the arguments it was sent with; no row carries a key no client sent or
 * a refused transfer's (one answered IN_DOUBT may be there or not); the
 * sum of the balances is accounts * balance and
 * none is negative. Also: the database has accounts accounts, some transfer
 * was acknowledged, and every transfer sent was answered (the checker
 * allows an unanswered transfer applied twice). 0 with *v, or -errno (no
 * temporary log, no memory). Caller's thread only.
 */
int cr_test_oltp_check(const struct cr_test_oltp_load *ld, const char *db_url, unsigned accounts,
                       int64_t balance, struct cr_test_oltp_verdict *v);

#endif /* CABRANK_TEST_OLTP_CLIENT_H */

/*
 * oltp_load.c - the OLTP load generator (oltp_load.h): setup, the clients'
 * request mix, the run and its report. One thread per client, each with its
 * own blocking-style connection (oltp_load_conn.c: every call bounded by a
 * deadline) and one request outstanding; the run's shared state is a ticket counter (the
 * request bound and the open-loop schedule) and the two log files. Results
 * are per client and summed after the join, so the hot path shares nothing
 * but the ticket counter.
 *
 * Lock order: only run.log_lock, held around a write(2) of a client's
 * buffered log lines.
 */
#include "oltp_load.h"

#include "oltp_check.h"
#include "oltp_load_conn.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S 1000000000ULL
/* How long one request may wait for its reply, and past the end of a
 * timed run, how long the requests still in flight may. */
#define REQUEST_TIMEOUT_NS (30 * NS_PER_S)
#define END_GRACE_NS       (10 * NS_PER_S)
/* How long --retry keeps trying when the run has no time bound. */
#define RETRY_WINDOW_NS (60 * NS_PER_S)
#define LOG_BUF         (64 * 1024)
#define SETUP_WINDOW    64
#define MAX_AMOUNT      100

struct run {
    /* Immutable once the clients start. */
    const struct oltp_load_config *cfg;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    uint64_t accounts;
    uint64_t start_ns;
    uint64_t end_ns;      /* 0: no time bound */
    double ns_per_ticket; /* open loop: 1e9 / rate; 0: closed */
    int log_fd;           /* -1: no log */
    int sent_fd;
    /* Relaxed: a counter, nothing is published through it. */
    _Atomic uint64_t next_ticket;
    pthread_mutex_t log_lock;
    /* Protected by log_lock. */
    bool log_failed;
};

struct logbuf {
    int fd;
    size_t len;
    char buf[LOG_BUF];
};

/* One client: everything here belongs to its thread until the join. */
struct client {
    struct run *run;
    pthread_t tid;
    int fd;
    uint64_t next_id;
    uint64_t rng;
    size_t rlen;
    unsigned char rbuf[OLTP_LOAD_RBUF];
    struct logbuf ack;
    struct logbuf sent;
    struct bench_samples samples;
    uint64_t max_ns;
    struct oltp_load_result r; /* counters only */
};

static void sleep_until(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / NS_PER_S), .tv_nsec = (long)(ns % NS_PER_S)};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* splitmix64: fast, and good enough for accounts, amounts and keys that
 * only need to be unique (two 64-bit draws from a getrandom seed). */
static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t seed(void)
{
    uint64_t s;

    if (getrandom(&s, sizeof(s), 0) != (ssize_t)sizeof(s))
        s = oltp_load_now_ns() ^ ((uint64_t)getpid() << 32);
    return s;
}

/* ------------------------------------------------------------------ logs */

static void log_flush(struct run *run, struct logbuf *lb)
{
    const char *p = lb->buf;
    size_t left = lb->len;

    if (lb->len == 0)
        return;
    lb->len = 0;
    if (lb->fd < 0)
        return;
    pthread_mutex_lock(&run->log_lock);
    while (left > 0) {
        ssize_t n = write(lb->fd, p, left);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            run->log_failed = true;
            break;
        }
        p += n;
        left -= (size_t)n;
    }
    pthread_mutex_unlock(&run->log_lock);
}

static void log_add(struct run *run, struct logbuf *lb, const struct oltp_req *t)
{
    struct ledger_op op = {
        .op = OLTP_OP_TRANSFER, .account = t->account, .to = t->to, .amount = t->amount};

    if (lb->fd < 0)
        return;
    memcpy(op.key, t->key, OLTP_KEY_SIZE);
    if (lb->len + OLTP_LOG_LINE_MAX > sizeof(lb->buf))
        log_flush(run, lb);
    lb->len += oltp_log_format(&op, lb->buf + lb->len);
}

/* ------------------------------------------------------------------ requests */

static void drop_conn(struct client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->rlen = 0;
}

static uint64_t io_deadline(const struct run *run)
{
    uint64_t d = oltp_load_now_ns() + REQUEST_TIMEOUT_NS;

    if (run->end_ns != 0 && d > run->end_ns + END_GRACE_NS)
        d = run->end_ns + END_GRACE_NS;
    return d;
}

/*
 * Sends req (its id set here) and reads its reply. 0, or -errno with the
 * connection dropped; *sent says whether any of the request may have
 * reached the server (false when the connection could not be made).
 */
static int roundtrip(struct client *c, struct oltp_req *req, struct oltp_reply *rep, bool *sent)
{
    struct run *run = c->run;
    unsigned char frame[OLTP_MAX_FRAME];
    uint64_t deadline = io_deadline(run);
    size_t len;
    int err;

    *sent = false;
    if (c->fd < 0) {
        int fd =
            oltp_load_connect(&run->addr, run->addrlen, run->cfg->connect_per_request, deadline);

        if (fd < 0) {
            c->r.conn_errors++;
            /* A server that is down refuses at once: no busy loop. */
            sleep_until(oltp_load_now_ns() + 10000000);
            return fd;
        }
        c->fd = fd;
    }
    req->id = ++c->next_id;
    len = oltp_req_encode(req, frame, sizeof(frame));
    assert(len > 0);
    *sent = true;
    err = oltp_load_send_all(c->fd, frame, len, deadline);
    if (err == 0)
        err = oltp_load_read_reply(c->fd, c->rbuf, &c->rlen, rep, deadline);
    if (err == 0 && (rep->id != req->id || rep->op != req->op))
        err = -EPROTO;
    if (err < 0) {
        if (err == -EPROTO)
            c->r.proto_errors++;
        else
            c->r.conn_errors++;
        drop_conn(c);
        return err;
    }
    if (run->cfg->connect_per_request)
        drop_conn(c);
    c->r.replies++;
    if (rep->status < OLTP_ST_COUNT)
        c->r.status[rep->status]++;
    return 0;
}

/* Whether --retry may try again now, after a pause that grows with n. */
static bool retry_pause(struct client *c, unsigned n)
{
    struct run *run = c->run;
    uint64_t limit = run->end_ns != 0 ? run->end_ns : run->start_ns + RETRY_WINDOW_NS;
    uint64_t pause = (uint64_t)10000000 << (n < 5 ? n : 5);
    uint64_t now = oltp_load_now_ns();

    if (!run->cfg->retry || now + pause >= limit)
        return false;
    sleep_until(now + pause);
    c->r.retries++;
    return true;
}

/* Whether req, whose last try ended with err or status, may go again: when
 * it is known not applied, or it carries a key (the ledger applies a key
 * once). An unkeyed write lost in flight or in doubt never goes twice. */
static bool is_resendable(const struct oltp_req *req, int err, uint16_t status)
{
    if (err == 0 && (status == OLTP_ST_UNAVAILABLE || status == OLTP_ST_INTERNAL))
        return true;
    return oltp_req_is_idempotent(req);
}

static void random_transfer(struct client *c, struct oltp_req *t, uint64_t session)
{
    uint64_t n = c->run->accounts;
    uint64_t a;
    uint64_t b;

    memset(t, 0, sizeof(*t));
    t->op = OLTP_OP_TRANSFER;
    t->session = session;
    a = next_rand(&c->rng);
    b = next_rand(&c->rng);
    memcpy(t->key, &a, 8);
    memcpy(t->key + 8, &b, 8);
    t->account = 1 + next_rand(&c->rng) % n;
    t->to = 1 + (t->account - 1 + 1 + next_rand(&c->rng) % (n - 1)) % n;
    t->amount = 1 + (int64_t)(next_rand(&c->rng) % MAX_AMOUNT);
}

static void do_transfer(struct client *c, uint64_t due_ns)
{
    struct run *run = c->run;
    struct oltp_req req;
    struct oltp_reply rep;
    bool sent = false;

    random_transfer(c, &req, 0);
    for (unsigned attempt = 0;; attempt++) {
        bool this_sent;
        int err = roundtrip(c, &req, &rep, &this_sent);

        sent |= this_sent;
        if (err == 0 && rep.status == OLTP_ST_OK) {
            uint64_t lat = oltp_load_now_ns() - due_ns;

            log_add(run, &c->ack, &req);
            c->r.acked++;
            if (bench_samples_add(&c->samples, lat) == 0)
                c->r.samples++;
            if (lat > c->max_ns)
                c->max_ns = lat;
            return;
        }
        if (err == 0 && rep.status == OLTP_ST_INSUFFICIENT)
            return;
        if (err == 0 && rep.status == OLTP_ST_IN_DOUBT)
            c->r.in_doubt++;
        /* A lost connection, the gateway could not place it, or the
         * database failed: known not applied (UNAVAILABLE, INTERNAL), or
         * of unknown outcome, which only its key makes safe to resend. */
        if ((err < 0 || rep.status == OLTP_ST_UNAVAILABLE || rep.status == OLTP_ST_IN_DOUBT ||
             rep.status == OLTP_ST_INTERNAL) &&
            is_resendable(&req, err, rep.status) && retry_pause(c, attempt))
            continue;
        if (err == 0 || !run->cfg->retry)
            c->r.unexpected++;
        /* Any answer but IN_DOUBT says the transfer was not applied. */
        if (!sent || (err == 0 && rep.status != OLTP_ST_IN_DOUBT))
            return;
        /* The outcome is unknown: the checker must accept the key in the
         * database or not. */
        log_add(run, &c->sent, &req);
        c->r.in_flight++;
        return;
    }
}

static void do_balance(struct client *c)
{
    struct oltp_req req = {.op = OLTP_OP_BALANCE};
    struct oltp_reply rep;
    bool sent;
    int err;

    req.account = 1 + next_rand(&c->rng) % c->run->accounts;
    err = roundtrip(c, &req, &rep, &sent);
    if ((err < 0 && !c->run->cfg->retry) || (err == 0 && rep.status != OLTP_ST_OK))
        c->r.unexpected++;
}

/* BEGIN, two transfers queued on the session, COMMIT. */
static void do_session(struct client *c)
{
    struct run *run = c->run;
    struct oltp_req req = {.op = OLTP_OP_BEGIN};
    struct oltp_req t[2];
    struct oltp_reply rep;
    uint64_t session;
    bool sent;
    int err;

    err = roundtrip(c, &req, &rep, &sent);
    if (err < 0 || rep.status != OLTP_ST_OK)
        goto out_unexpected;
    session = rep.session;
    for (int i = 0; i < 2; i++) {
        random_transfer(c, &t[i], session);
        err = roundtrip(c, &t[i], &rep, &sent);
        if (err < 0)
            goto out_unexpected;
        if (rep.status != OLTP_ST_QUEUED) {
            struct oltp_req abort_req = {.op = OLTP_OP_ABORT, .session = session};

            c->r.unexpected++;
            (void)roundtrip(c, &abort_req, &rep, &sent);
            return;
        }
    }
    req = (struct oltp_req){.op = OLTP_OP_COMMIT, .session = session};
    err = roundtrip(c, &req, &rep, &sent);
    if (err == 0 && rep.status == OLTP_ST_OK && rep.count == 2) {
        log_add(run, &c->ack, &t[0]);
        log_add(run, &c->ack, &t[1]);
        c->r.acked += 2;
        c->r.sessions++;
        return;
    }
    if (err == 0 && rep.status == OLTP_ST_INSUFFICIENT)
        return;
    if (err == 0 && rep.status == OLTP_ST_IN_DOUBT)
        c->r.in_doubt += 2;
    /* The COMMIT went out and its answer is lost or IN_DOUBT: its transfers
     * may be applied or not. Any other answer says they were not. */
    if (sent && (err < 0 || rep.status == OLTP_ST_IN_DOUBT)) {
        log_add(run, &c->sent, &t[0]);
        log_add(run, &c->sent, &t[1]);
        c->r.in_flight += 2;
    }
out_unexpected:
    if (err == 0 || !run->cfg->retry)
        c->r.unexpected++;
}

/* Claims the next request of the run: false when a bound is reached.
 * Open loop: waits until the request is due, and says when in *due. */
static bool next_request(struct client *c, uint64_t *due)
{
    struct run *run = c->run;
    uint64_t t = atomic_fetch_add_explicit(&run->next_ticket, 1, memory_order_relaxed);
    uint64_t now = oltp_load_now_ns();

    if (run->cfg->requests != 0 && t >= run->cfg->requests)
        return false;
    if (run->end_ns != 0 && now >= run->end_ns)
        return false;
    if (run->ns_per_ticket == 0) {
        *due = now;
        return true;
    }
    *due = run->start_ns + (uint64_t)((double)t * run->ns_per_ticket);
    if (run->end_ns != 0 && *due >= run->end_ns)
        return false;
    if (*due > now)
        sleep_until(*due);
    return true;
}

static void *client_main(void *arg)
{
    struct client *c = arg;
    uint64_t due;

    while (next_request(c, &due)) {
        unsigned pick = c->run->cfg->mix == OLTP_MIX_MIXED ? next_rand(&c->rng) % 10 : 0;

        /* mixed: 7 in 10 single transfers, 2 balance reads, 1 session. */
        if (pick < 7)
            do_transfer(c, due);
        else if (pick < 9)
            do_balance(c);
        else
            do_session(c);
    }
    drop_conn(c);
    log_flush(c->run, &c->ack);
    log_flush(c->run, &c->sent);
    return NULL;
}

/* ------------------------------------------------------------------ setup */

static int setup_error(FILE *err, const char *what, uint64_t account, int e)
{
    fprintf(err, "setup: %s of account %" PRIu64 ": %s\n", what, account,
            e < 0 ? strerror(-e) : oltp_status_name((unsigned)e));
    return e < 0 ? e : -EPROTO;
}

/* Sends reqs[0..n) in one write and reads their n replies, in any order,
 * into reps (by id - first id). */
static int pipeline(int fd, struct oltp_req *reqs, struct oltp_reply *reps, size_t n,
                    uint64_t *next_id, unsigned char *rbuf, size_t *rlen)
{
    static const size_t cap = SETUP_WINDOW * (OLTP_HEADER_SIZE + 64);
    unsigned char *out = malloc(cap);
    uint64_t first = *next_id + 1;
    uint64_t deadline = oltp_load_now_ns() + REQUEST_TIMEOUT_NS;
    size_t len = 0;
    int err;

    if (out == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        reqs[i].id = ++*next_id;
        len += oltp_req_encode(&reqs[i], out + len, cap - len);
    }
    err = oltp_load_send_all(fd, out, len, deadline);
    free(out);
    for (size_t i = 0; i < n && err == 0; i++) {
        struct oltp_reply rep;

        err = oltp_load_read_reply(fd, rbuf, rlen, &rep, deadline);
        if (err == 0 && (rep.id < first || rep.id >= first + n))
            err = -EPROTO;
        if (err == 0)
            reps[rep.id - first] = rep;
    }
    return err;
}

int oltp_load_setup(const struct oltp_load_config *cfg, FILE *err)
{
    uint64_t accounts = cfg->accounts != 0 ? cfg->accounts : OLTP_LOAD_ACCOUNTS;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    struct oltp_req *reqs;
    struct oltp_reply *reps;
    unsigned char *rbuf;
    size_t rlen = 0;
    uint64_t next_id = 0;
    int fd;
    int e;

    e = oltp_load_resolve(cfg->target, &addr, &addrlen);
    if (e < 0) {
        fprintf(err, "setup: bad target %s\n", cfg->target);
        return e;
    }
    reqs = calloc(SETUP_WINDOW, sizeof(*reqs));
    reps = calloc(SETUP_WINDOW, sizeof(*reps));
    rbuf = malloc(OLTP_LOAD_RBUF);
    if (reqs == NULL || reps == NULL || rbuf == NULL) {
        e = -ENOMEM;
        goto out_free;
    }
    fd = oltp_load_connect(&addr, addrlen, false, oltp_load_now_ns() + REQUEST_TIMEOUT_NS);
    if (fd < 0) {
        fprintf(err, "setup: connect to %s: %s\n", cfg->target, strerror(-fd));
        e = fd;
        goto out_free;
    }
    for (uint64_t base = 1; base <= accounts; base += SETUP_WINDOW) {
        size_t n =
            accounts - base + 1 < SETUP_WINDOW ? (size_t)(accounts - base + 1) : SETUP_WINDOW;

        for (size_t i = 0; i < n; i++)
            reqs[i] = (struct oltp_req){.op = OLTP_OP_OPEN, .account = base + i};
        e = pipeline(fd, reqs, reps, n, &next_id, rbuf, &rlen);
        for (size_t i = 0; i < n && e == 0; i++) {
            if (reps[i].status != OLTP_ST_OK && reps[i].status != OLTP_ST_EXISTS)
                e = setup_error(err, "open", base + i, reps[i].status);
        }
        if (e < 0)
            goto out_close;
        /* The key makes the deposit happen once, however often setup runs:
         * "crsetup" and the account. */
        for (size_t i = 0; i < n; i++) {
            uint64_t a = base + i;

            reqs[i] =
                (struct oltp_req){.op = OLTP_OP_DEPOSIT, .account = a, .amount = OLTP_LOAD_DEPOSIT};
            memcpy(reqs[i].key, "crsetup", 8);
            for (int b = 0; b < 8; b++)
                reqs[i].key[8 + b] = (uint8_t)(a >> (56 - 8 * b));
        }
        e = pipeline(fd, reqs, reps, n, &next_id, rbuf, &rlen);
        for (size_t i = 0; i < n && e == 0; i++) {
            if (reps[i].status != OLTP_ST_OK)
                e = setup_error(err, "deposit", base + i, reps[i].status);
        }
        if (e < 0)
            goto out_close;
    }
out_close:
    if (e < 0 && e != -EPROTO)
        fprintf(err, "setup: %s: %s\n", cfg->target, strerror(-e));
    close(fd);
out_free:
    free(rbuf);
    free(reps);
    free(reqs);
    return e;
}

/* ------------------------------------------------------------------ the run */

static int open_log(const char *path, const char *suffix, bool append, FILE *err)
{
    char p[4096];
    int fd;

    snprintf(p, sizeof(p), "%s%s", path, suffix);
    fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
    if (fd < 0) {
        int e = -errno;

        fprintf(err, "log %s: %s\n", p, strerror(-e));
        return e;
    }
    return fd;
}

static void add_result(struct oltp_load_result *to, const struct oltp_load_result *r)
{
    to->acked += r->acked;
    to->replies += r->replies;
    to->sessions += r->sessions;
    to->in_flight += r->in_flight;
    to->in_doubt += r->in_doubt;
    for (int i = 0; i < OLTP_ST_COUNT; i++)
        to->status[i] += r->status[i];
    to->conn_errors += r->conn_errors;
    to->proto_errors += r->proto_errors;
    to->retries += r->retries;
    to->unexpected += r->unexpected;
    to->samples += r->samples;
}

int oltp_load_run(const struct oltp_load_config *cfg, struct oltp_load_result *res, FILE *err)
{
    unsigned nclients = cfg->clients != 0 ? cfg->clients : 1;
    struct run run = {.cfg = cfg, .log_fd = -1, .sent_fd = -1};
    struct client *cs;
    struct bench_samples all = {0};
    unsigned started = 0;
    int e;

    memset(res, 0, sizeof(*res));
    e = oltp_load_resolve(cfg->target, &run.addr, &run.addrlen);
    if (e < 0) {
        fprintf(err, "bad target %s\n", cfg->target);
        return e;
    }
    run.accounts = cfg->accounts != 0 ? cfg->accounts : OLTP_LOAD_ACCOUNTS;
    if (run.accounts < 2) {
        fprintf(err, "a transfer needs two accounts\n");
        return -EINVAL;
    }
    if (cfg->rate > 0)
        run.ns_per_ticket = 1e9 / cfg->rate;
    if (cfg->log != NULL) {
        run.log_fd = open_log(cfg->log, "", cfg->append, err);
        if (run.log_fd < 0)
            return -EIO;
        run.sent_fd = open_log(cfg->log, ".sent", cfg->append, err);
        if (run.sent_fd < 0) {
            e = -EIO;
            goto out_close_log;
        }
    }
    cs = calloc(nclients, sizeof(*cs));
    if (cs == NULL) {
        e = -ENOMEM;
        goto out_close_sent;
    }
    pthread_mutex_init(&run.log_lock, NULL);
    atomic_init(&run.next_ticket, 0);
    run.start_ns = oltp_load_now_ns();
    if (cfg->seconds > 0 || cfg->requests == 0)
        run.end_ns = run.start_ns + (uint64_t)((cfg->seconds > 0 ? cfg->seconds : 1.0) * 1e9);
    for (; started < nclients; started++) {
        struct client *c = &cs[started];

        c->run = &run;
        c->fd = -1;
        c->rng = seed();
        c->ack.fd = run.log_fd;
        c->sent.fd = run.sent_fd;
        if (pthread_create(&c->tid, NULL, client_main, c) != 0) {
            fprintf(err, "pthread_create failed for client %u\n", started);
            /* The bound ends the started ones. */
            atomic_store_explicit(&run.next_ticket, UINT64_MAX / 2, memory_order_relaxed);
            break;
        }
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(cs[i].tid, NULL);
    res->elapsed_s = (double)(oltp_load_now_ns() - run.start_ns) / 1e9;
    e = started == nclients ? 0 : -EAGAIN;
    for (unsigned i = 0; i < started; i++) {
        struct client *c = &cs[i];

        add_result(res, &c->r);
        if (c->max_ns > 0 && (double)c->max_ns / 1e3 > res->max_us)
            res->max_us = (double)c->max_ns / 1e3;
        for (size_t k = 0; k < c->samples.len && e == 0; k++)
            e = bench_samples_add(&all, c->samples.v[k]);
        bench_samples_fini(&c->samples);
    }
    res->pcts = bench_samples_pcts(&all);
    bench_samples_fini(&all);
    free(cs);
    pthread_mutex_destroy(&run.log_lock);
    /* The checker and whoever reads the results may rely on the logs. */
    if (run.log_fd >= 0 && (run.log_failed || fsync(run.log_fd) < 0 || fsync(run.sent_fd) < 0)) {
        fprintf(err, "log %s: write or fsync failed\n", cfg->log);
        e = -EIO;
    }
out_close_sent:
    if (run.sent_fd >= 0)
        close(run.sent_fd);
out_close_log:
    if (run.log_fd >= 0)
        close(run.log_fd);
    return e;
}

void oltp_load_print(const struct oltp_load_config *cfg, const struct oltp_load_result *res,
                     FILE *out)
{
    bool first = true;

    fprintf(out, "load: %s, %u clients, ", cfg->target, cfg->clients != 0 ? cfg->clients : 1);
    if (cfg->rate > 0)
        fprintf(out, "open loop at %.0f/s", cfg->rate);
    else
        fprintf(out, "closed loop");
    fprintf(out, ", %s%s%s\n", cfg->mix == OLTP_MIX_MIXED ? "mixed" : "transfers",
            cfg->connect_per_request ? ", a connection per request" : "",
            cfg->retry ? ", retry" : "");
    fprintf(out,
            "transfers acknowledged: %" PRIu64 " in %.2f s = %.0f/s (in %" PRIu64
            " sessions: %" PRIu64 ")\n",
            res->acked, res->elapsed_s,
            res->elapsed_s > 0 ? (double)res->acked / res->elapsed_s : 0, res->sessions,
            res->sessions * 2);
    if (res->samples > 0)
        fprintf(out,
                "latency us: p50 %.0f  p90 %.0f  p99 %.0f  p99.9 %.0f  max %.0f  (%" PRIu64
                " transfers%s)\n",
                res->pcts.p50_us, res->pcts.p90_us, res->pcts.p99_us, res->pcts.p999_us,
                res->max_us, res->samples, cfg->rate > 0 ? ", from their scheduled send" : "");
    else
        fprintf(out, "latency us: no acknowledged transfer\n");
    fprintf(out, "replies: %" PRIu64, res->replies);
    for (unsigned s = 0; s < OLTP_ST_COUNT; s++) {
        if (res->status[s] == 0)
            continue;
        fprintf(out, "%s%s %" PRIu64, first ? " (" : ", ", oltp_status_name(s), res->status[s]);
        first = false;
    }
    fprintf(out, "%s\n", first ? "" : ")");
    fprintf(out,
            "errors: connection %" PRIu64 ", protocol %" PRIu64 ", retries %" PRIu64
            ", answered in doubt %" PRIu64 ", outcome unknown %" PRIu64 ", unexpected %" PRIu64
            "\n",
            res->conn_errors, res->proto_errors, res->retries, res->in_doubt, res->in_flight,
            res->unexpected);
}

/*
 * svc_line.c - the line-protocol service (lab_services.h) and the counters
 * shared with the echo service. The service runs on the models' serving threads (in worker
 * processes under the process models); one connection's calls never
 * overlap (it counts it if they do), different connections' calls run
 * concurrently, and the service object holds only read-only data and a
 * pointer to the counts, atomics in a MAP_SHARED page that every forked
 * worker shares with the test (a zero-copy segment a child still holds
 * when it exits is released by cr__conn_destroy in that child, so
 * `releases` reaches 0 there too).
 */
#include "lab_services.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PIECE      (64 * 1024)
#define BIG_QUEUED (2 * PIECE) /* BIG output queued ahead at most */
#define MAX_ID     64

struct line_conn {
    int busy;          /* atomic: a call is inside this connection */
    uint64_t big_left; /* BIG bytes not queued yet */
    bool big_tail;     /* the "\n" after a BIG body is still to queue */
};

static void enter(struct cr_test_svc *t, struct line_conn *lc)
{
    /* acq_rel exchange: pairs with the release store in leave() on
     * whichever thread ran the previous call. */
    if (__atomic_exchange_n(&lc->busy, 1, __ATOMIC_ACQ_REL) != 0)
        __atomic_fetch_add(&t->n->overlaps, 1, __ATOMIC_RELAXED);
}

static void leave(struct cr_test_svc *t, struct line_conn *lc, struct cr_conn *c)
{
    uint64_t pending = cr_conn_pending(c);
    uint64_t max = __atomic_load_n(&t->n->max_pending, __ATOMIC_RELAXED);

    while (pending > max && !__atomic_compare_exchange_n(&t->n->max_pending, &max, pending, false,
                                                         __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    __atomic_store_n(&lc->busy, 0, __ATOMIC_RELEASE);
}

static void on_release(void *arg)
{
    struct cr_test_svc *t = arg;

    __atomic_fetch_sub(&t->n->releases, 1, __ATOMIC_RELAXED);
}

/* A line's answer is queued (a BIG body may still follow from drained):
 * counted here and in the server's statistics. */
static void answered(struct cr_test_svc *t, struct cr_conn *c)
{
    __atomic_fetch_add(&t->n->requests, 1, __ATOMIC_RELAXED);
    cr_conn_request_done(c);
}

/* Queues "<id> <a><b>\n" with reserve/commit. */
static int reply(struct cr_conn *c, const char *id, size_t idlen, const char *a, const char *b,
                 size_t blen)
{
    size_t alen = strlen(a);
    size_t need = idlen + 1 + alen + blen + 1;
    char *p = cr_conn_reserve(c, need);

    if (p == NULL)
        return -ENOMEM;
    memcpy(p, id, idlen);
    p[idlen] = ' ';
    memcpy(p + idlen + 1, a, alen);
    memcpy(p + idlen + 1 + alen, b, blen);
    p[need - 1] = '\n';
    cr_conn_commit(c, need);
    return 0;
}

/* Queues BIG pieces while little is queued; the rest from drained(). */
static int queue_big(struct cr_test_svc *t, struct line_conn *lc, struct cr_conn *c)
{
    while (lc->big_left > 0 && cr_conn_pending(c) < BIG_QUEUED) {
        size_t piece = lc->big_left < PIECE ? (size_t)lc->big_left : PIECE;
        int err;

        __atomic_fetch_add(&t->n->releases, 1, __ATOMIC_RELAXED);
        err = cr_conn_write_ref(c, t->xs, piece, on_release, t);
        if (err < 0)
            return err;
        lc->big_left -= piece;
    }
    if (lc->big_left == 0 && lc->big_tail) {
        lc->big_tail = false;
        return cr_conn_write(c, "\n", 1);
    }
    return 0;
}

/* Parses a decimal argument no larger than max. */
static bool parse_num(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0 || len > 12)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

static bool is_op(const char *op, size_t oplen, const char *name)
{
    return oplen == strlen(name) && memcmp(op, name, oplen) == 0;
}

/* Answers one complete line (without its '\n'); -errno to close. */
static int serve_line(struct cr_test_svc *t, struct line_conn *lc, struct cr_conn *c,
                      const char *line, size_t len)
{
    const char *sp = memchr(line, ' ', len);
    const char *id = line;
    size_t idlen = sp != NULL ? (size_t)(sp - line) : len;
    const char *op = sp != NULL ? sp + 1 : line + len;
    size_t rest = len - (size_t)(op - line);
    const char *sp2 = memchr(op, ' ', rest);
    size_t oplen = sp2 != NULL ? (size_t)(sp2 - op) : rest;
    const char *arg = sp2 != NULL ? sp2 + 1 : op + rest;
    size_t arglen = len - (size_t)(arg - line);
    char num[32];
    uint64_t n;

    __atomic_fetch_add(&t->n->started, 1, __ATOMIC_RELAXED);
    if (idlen == 0 || idlen > MAX_ID)
        return reply(c, "-", 1, "ERR malformed", "", 0);
    if (oplen == 0)
        return reply(c, id, idlen, "ERR malformed", "", 0);
    if (is_op(op, oplen, "ECHO"))
        return reply(c, id, idlen, "OK ", arg, arglen);
    if (is_op(op, oplen, "SLEEP")) {
        struct timespec ts;

        if (!parse_num(arg, arglen, CR_TEST_SLEEP_MAX, &n))
            return reply(c, id, idlen, "ERR bad argument", "", 0);
        ts.tv_sec = (time_t)(n / 1000);
        ts.tv_nsec = (long)(n % 1000) * 1000000L;
        while (nanosleep(&ts, &ts) < 0)
            ;
        return reply(c, id, idlen, "OK", "", 0);
    }
    if (is_op(op, oplen, "BIG")) {
        if (!parse_num(arg, arglen, CR_TEST_BIG_MAX, &n))
            return reply(c, id, idlen, "ERR bad argument", "", 0);
        snprintf(num, sizeof(num), "%llu", (unsigned long long)n);
        if (reply(c, id, idlen, "OK ", num, strlen(num)) < 0)
            return -ENOMEM;
        lc->big_left = n;
        lc->big_tail = true;
        return queue_big(t, lc, c);
    }
    if (is_op(op, oplen, "FILE")) {
        if (!parse_num(arg, arglen, CR_TEST_FILE_MAX, &n))
            return reply(c, id, idlen, "ERR bad argument", "", 0);
        snprintf(num, sizeof(num), "%llu", (unsigned long long)n);
        if (reply(c, id, idlen, "OK ", num, strlen(num)) < 0)
            return -ENOMEM;
        __atomic_fetch_add(&t->n->releases, 1, __ATOMIC_RELAXED);
        if (cr_conn_write_file(c, t->file_fd, 0, (size_t)n, on_release, t) < 0)
            return -ENOMEM;
        return cr_conn_write(c, "\n", 1);
    }
    if (is_op(op, oplen, "CLOSE")) {
        cr_conn_close_after_flush(c);
        return reply(c, id, idlen, "BYE", "", 0);
    }
    return reply(c, id, idlen, "ERR unknown op", "", 0);
}

static int line_open(void *ctx, struct cr_conn *c, void **state)
{
    struct cr_test_svc *t = ctx;
    struct line_conn *lc = calloc(1, sizeof(*lc));

    CR_UNUSED(c);
    if (lc == NULL)
        return -ENOMEM;
    __atomic_fetch_add(&t->n->opened, 1, __ATOMIC_RELAXED);
    *state = lc;
    return 0;
}

static ssize_t line_input(void *ctx, void *state, struct cr_conn *c, const char *data, size_t len)
{
    struct cr_test_svc *t = ctx;
    struct line_conn *lc = state;
    size_t scan = len < CR_TEST_LINE_MAX + 1 ? len : CR_TEST_LINE_MAX + 1;
    const char *nl;
    ssize_t ret;

    enter(t, lc);
    if (lc->big_left > 0 || lc->big_tail) {
        ret = 0; /* a BIG answer is still going out: later replies wait */
        goto out;
    }
    nl = memchr(data, '\n', scan);
    if (nl == NULL) {
        ret = 0;
        if (len > CR_TEST_LINE_MAX) {
            cr_conn_close_after_flush(c);
            if (cr_conn_write(c, "- ERR too long\n", 15) < 0) {
                ret = -ENOMEM;
                goto out;
            }
            answered(t, c);
            ret = -EBADMSG;
        }
        goto out;
    }
    ret = serve_line(t, lc, c, data, (size_t)(nl - data));
    if (ret == 0) {
        answered(t, c);
        ret = nl + 1 - data;
    }
out:
    leave(t, lc, c);
    return ret;
}

static void line_drained(void *ctx, void *state, struct cr_conn *c)
{
    struct cr_test_svc *t = ctx;
    struct line_conn *lc = state;

    enter(t, lc);
    if ((lc->big_left > 0 || lc->big_tail) && queue_big(t, lc, c) < 0)
        cr_conn_close_after_flush(c);
    leave(t, lc, c);
}

static void line_close(void *ctx, void *state)
{
    struct cr_test_svc *t = ctx;

    __atomic_fetch_add(&t->n->closed, 1, __ATOMIC_RELAXED);
    free(state);
}

int cr_test_line_init(struct cr_test_svc *t)
{
    size_t done = 0;
    int err = cr_test_svc_init_common(t);

    if (err < 0)
        return err;
    t->xs = malloc(PIECE);
    if (t->xs == NULL) {
        err = -ENOMEM;
        goto out_unmap;
    }
    memset(t->xs, 'x', PIECE);
    t->file_fd = memfd_create("cr-test-line", MFD_CLOEXEC);
    if (t->file_fd < 0) {
        err = -errno;
        goto out_free;
    }
    while (done < CR_TEST_FILE_MAX) {
        char ys[4096];
        ssize_t n;

        memset(ys, 'y', sizeof(ys));
        n = write(t->file_fd, ys, sizeof(ys));
        if (n < 0) {
            err = -errno;
            goto out_close;
        }
        done += (size_t)n;
    }
    t->svc = (struct cr_service){
        .name = "line",
        .ctx = t,
        .open = line_open,
        .input = line_input,
        .drained = line_drained,
        .close = line_close,
    };
    return 0;

out_close:
    close(t->file_fd);
    t->file_fd = -1;
out_free:
    free(t->xs);
    t->xs = NULL;
out_unmap:
    cr_test_svc_fini(t);
    return err;
}

int cr_test_svc_init_common(struct cr_test_svc *t)
{
    void *p;

    memset(t, 0, sizeof(*t));
    t->file_fd = -1;
    /* MAP_SHARED, not private: the process models fork their workers after
     * init, and what the service counts there must reach the test. An
     * anonymous page is zeroed. */
    p = mmap(NULL, sizeof(*t->n), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    t->n = p;
    return 0;
}

void cr_test_svc_fini(struct cr_test_svc *t)
{
    if (t->file_fd >= 0)
        close(t->file_fd);
    t->file_fd = -1;
    free(t->xs);
    t->xs = NULL;
    if (t->n != NULL)
        munmap(t->n, sizeof(*t->n));
    t->n = NULL;
}

uint64_t cr_test_svc_get(const uint64_t *counter)
{
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

uint64_t cr_test_svc_outstanding(const struct cr_test_svc *t)
{
    return __atomic_load_n(&t->n->releases, __ATOMIC_RELAXED);
}

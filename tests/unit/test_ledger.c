/*
 * test_ledger.c - cabrank-ledger's transaction service (apps/oltp/ledger.c)
 * driven through a cr_server (model lf, 4 threads) on 127.0.0.1:0 in this
 * process, over a SQLite database in a temporary directory: every op and
 * its statuses through a real socket; 100 pipelined frames in one write
 * answered with their ids; 100 pipelined transfers of one connection
 * answered in order in fewer commits, an overdraft among them refused alone; malformed, unknown and
 * oversized frames (an error reply and the stream goes on, or a close); sessions: a commit applies
 * its ops at once and atomically, an abort nothing, a session continues on other connections, 64
 * sessions interleave over 4 workers, the op limit, ops refused inside a session, a session busy
 * while its commit runs (the database held by the test), BEGIN beyond the session caps (in all
 * and per connection: TOO_MANY_SESSIONS), a PING
 * keeping a session alive; an abandoned session expires with no request arriving (the sweeper), and
 * the idle connection timeout.
 */
#include <cabrank/server.h>

#include "../../apps/oltp/ledger.h"
#include "../../apps/oltp/ledger_db.h"
#include "../../apps/oltp/proto.h"
#include "../support/oltp_client.h"
#include "../support/support.h"

#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Waits that expect something (replies, the sweeper), generous for TSan. */
#define TMO_MS 20000

struct fixture {
    char dir[64];
    char db[96];
    struct ledger *l;
    struct cr_server *s;
    uint16_t port;
};

static void fx_start_cfg(struct fixture *f, struct ledger_config *lc)
{
    struct cr_server_config sc = {.model = "lf", .threads = 4};
    char addr[64];

    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/cr-ledger-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/ledger.db", f->dir);
    lc->db_url = f->db;
    ck_assert_int_eq(ledger_create(&f->l, lc), 0);
    sc.listen[0] = "127.0.0.1:0";
    ck_assert_int_eq(cr_server_create(&f->s, &sc, ledger_service(f->l)), 0);
    ck_assert_int_eq(cr_server_address(f->s, 0, addr, sizeof(addr)), 0);
    f->port = (uint16_t)atoi(strrchr(addr, ':') + 1);
    ck_assert_int_eq(cr_server_start(f->s), 0);
}

static void fx_start(struct fixture *f)
{
    struct ledger_config lc = {.group_commit = true};

    fx_start_cfg(f, &lc);
}

static void fx_finish(struct fixture *f)
{
    char path[160];
    static const char *const files[] = {"ledger.db", "ledger.db-wal", "ledger.db-shm",
                                        "ledger.db-journal"};

    cr_server_stop(f->s, true);
    ck_assert_int_eq(cr_server_wait(f->s), 0);
    cr_server_destroy(f->s);
    ledger_destroy(f->l);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", f->dir, files[i]);
        unlink(path);
    }
    rmdir(f->dir);
}

/* ------------------------------------------------------------------ client */

struct client {
    int fd;
};

static void cl_open(struct client *c, uint16_t port)
{
    c->fd = cr_test_connect(port);
    ck_assert_int_ge(c->fd, 0);
}

static void cl_close(struct client *c)
{
    close(c->fd);
    c->fd = -1;
}

static struct oltp_req mk(uint8_t op, uint64_t id, uint64_t session, uint64_t account, uint64_t to,
                          int64_t amount, unsigned key)
{
    struct oltp_req r;

    memset(&r, 0, sizeof(r));
    r.op = op;
    r.id = id;
    r.session = session;
    r.account = account;
    r.to = to;
    r.amount = amount;
    r.limit = 10;
    if (key != 0)
        snprintf((char *)r.key, sizeof(r.key), "k%u", key);
    return r;
}

static void cl_send_raw(struct client *c, const void *buf, size_t len)
{
    ck_assert_int_eq(cr_test_write_all(c->fd, buf, len), 0);
}

static void cl_send(struct client *c, const struct oltp_req *r)
{
    ck_assert_int_eq(cr_test_oltp_send(c->fd, r), 0);
}

/* Reads one reply frame (never more, so pipelined replies stay in the
 * socket). 0, or -EPIPE at end of stream, -ETIMEDOUT, -EBADMSG. */
static int cl_reply(struct client *c, struct oltp_reply *rp)
{
    return cr_test_oltp_recv(c->fd, rp, TMO_MS);
}

/* Sends r and reads its reply, which must carry r's id and op. */
static struct oltp_reply call(struct client *c, struct oltp_req r)
{
    struct oltp_reply rp;

    cl_send(c, &r);
    ck_assert_int_eq(cl_reply(c, &rp), 0);
    ck_assert_uint_eq(rp.id, r.id);
    ck_assert_uint_eq(rp.op, r.op);
    return rp;
}

static uint16_t st_of(struct client *c, struct oltp_req r)
{
    return call(c, r).status;
}

static int64_t balance_of(struct client *c, uint64_t account)
{
    struct oltp_reply rp = call(c, mk(OLTP_OP_BALANCE, 9999, 0, account, 0, 0, 0));

    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    return rp.balance;
}

/* ------------------------------------------------------------------ tests */

START_TEST(each_op_answers_with_its_status)
{
    struct fixture f;
    struct client c;
    struct oltp_reply rp;
    struct oltp_req r;

    fx_start(&f);
    cl_open(&c, f.port);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_PING, 1, 0, 0, 0, 0, 0)), OLTP_ST_OK);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 2, 0, 1, 0, 0, 0)), OLTP_ST_OK);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 3, 0, 1, 0, 0, 0)), OLTP_ST_EXISTS);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 4, 0, 2, 0, 0, 0)), OLTP_ST_OK);
    rp = call(&c, mk(OLTP_OP_DEPOSIT, 5, 0, 1, 0, 100, 0));
    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    ck_assert_int_eq(rp.balance, 100);
    rp = call(&c, mk(OLTP_OP_WITHDRAW, 6, 0, 1, 0, 30, 0));
    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    ck_assert_int_eq(rp.balance, 70);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_WITHDRAW, 7, 0, 1, 0, 71, 0)), OLTP_ST_INSUFFICIENT);
    rp = call(&c, mk(OLTP_OP_TRANSFER, 8, 0, 1, 2, 20, 1));
    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    ck_assert_int_eq(rp.balance, 50);
    /* The same key again (a retry) is applied once; with other arguments
     * it is refused. */
    rp = call(&c, mk(OLTP_OP_TRANSFER, 9, 0, 1, 2, 20, 1));
    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    ck_assert_int_eq(rp.balance, 50);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_TRANSFER, 10, 0, 1, 2, 21, 1)), OLTP_ST_KEY_REUSED);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_TRANSFER, 11, 0, 1, 2, 5, 0)), OLTP_ST_NEED_KEY);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_TRANSFER, 12, 0, 1, 1, 5, 2)), OLTP_ST_BAD_ACCOUNT);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_TRANSFER, 13, 0, 1, 3, 5, 3)), OLTP_ST_NO_ACCOUNT);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_TRANSFER, 14, 0, 1, 2, 51, 4)), OLTP_ST_INSUFFICIENT);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 15, 0, 0, 0, 5, 0)), OLTP_ST_BAD_ACCOUNT);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 16, 0, 1, 0, 0, 0)), OLTP_ST_BAD_AMOUNT);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 17, 0, 1, 0, -5, 0)), OLTP_ST_BAD_AMOUNT);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 18, 0, 7, 0, 5, 0)), OLTP_ST_NO_ACCOUNT);
    ck_assert_int_eq(balance_of(&c, 1), 50);
    ck_assert_int_eq(balance_of(&c, 2), 20);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_BALANCE, 19, 0, 7, 0, 0, 0)), OLTP_ST_NO_ACCOUNT);
    r = mk(OLTP_OP_HISTORY, 20, 0, 1, 0, 0, 0);
    rp = call(&c, r);
    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    ck_assert_uint_eq(rp.count, 3);
    ck_assert_int_eq(rp.hist[0].delta, -20); /* newest first: the transfer */
    ck_assert_uint_eq(rp.hist[0].other, 2);
    ck_assert_int_eq(rp.hist[1].delta, -30);
    ck_assert_int_eq(rp.hist[2].delta, 100);
    r.limit = 1;
    ck_assert_uint_eq(call(&c, r).count, 1);
    r.limit = 0;
    ck_assert_uint_eq(call(&c, r).status, OLTP_ST_MALFORMED);
    r.account = 7;
    r.limit = 5;
    ck_assert_uint_eq(call(&c, r).status, OLTP_ST_NO_ACCOUNT);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_COMMIT, 21, 0, 0, 0, 0, 0)), OLTP_ST_NO_SESSION);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_ABORT, 22, 0, 0, 0, 0, 0)), OLTP_ST_NO_SESSION);
    cl_close(&c);
    fx_finish(&f);
}
END_TEST

START_TEST(pipelined_frames_are_answered_with_their_ids)
{
    enum { N = 100 };
    struct fixture f;
    struct client c;
    unsigned char *buf = malloc(N * OLTP_MAX_FRAME);
    bool seen[N] = {false};
    size_t len = 0;

    ck_assert_ptr_nonnull(buf);
    fx_start(&f);
    cl_open(&c, f.port);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 1, 0, 5, 0, 0, 0)), OLTP_ST_OK);
    /* Ids out of order, so that a reply matched by position would not do. */
    for (unsigned i = 0; i < N; i++) {
        uint64_t id = 1000 + (i * 37) % N;
        struct oltp_req r = mk(i % 10 == 9 ? OLTP_OP_BALANCE : OLTP_OP_DEPOSIT, id, 0, 5, 0,
                               (int64_t)id, (unsigned)id);

        len += oltp_req_encode(&r, buf + len, OLTP_MAX_FRAME);
    }
    cl_send_raw(&c, buf, len);
    for (unsigned i = 0; i < N; i++) {
        struct oltp_reply rp;
        uint64_t id = 1000 + (i * 37) % N;

        ck_assert_int_eq(cl_reply(&c, &rp), 0);
        /* In order: the replies of one connection follow its frames. */
        ck_assert_uint_eq(rp.id, id);
        ck_assert_uint_lt(rp.id - 1000, N);
        ck_assert(!seen[rp.id - 1000]);
        seen[rp.id - 1000] = true;
        ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    }
    {
        int64_t want = 0;

        for (unsigned i = 0; i < N; i++) {
            if (i % 10 != 9)
                want += 1000 + (int64_t)((i * 37) % N);
        }
        ck_assert_int_eq(balance_of(&c, 5), want);
    }
    cl_close(&c);
    fx_finish(&f);
    free(buf);
}
END_TEST

/*
 * 100 transfers pipelined in one write on one connection, with a BALANCE
 * among them and an overdraft in the middle: every transfer answered in
 * order with its id and the balance it left (so applied in order), the
 * overdraft INSUFFICIENT while its neighbours go through, the BALANCE
 * seeing the transfers before it, and far fewer commits than transfers:
 * the connection's writes share group commits.
 */
START_TEST(pipelined_writes_of_one_connection_share_commits)
{
    enum { N = 100, FAIL_AT = 50, BALANCE_AT = 70, AMOUNT = 10, INITIAL = 1000 };
    struct fixture f;
    struct client c;
    unsigned char *buf = malloc((N + 1) * OLTP_MAX_FRAME);
    struct ledger_stats before;
    struct ledger_stats after;
    int64_t want = INITIAL;
    size_t len = 0;

    ck_assert_ptr_nonnull(buf);
    fx_start(&f);
    cl_open(&c, f.port);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 1, 0, 1, 0, 0, 0)), OLTP_ST_OK);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 2, 0, 2, 0, 0, 0)), OLTP_ST_OK);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 3, 0, 1, 0, INITIAL, 3)), OLTP_ST_OK);
    ledger_stats(f.l, &before);
    for (unsigned i = 0; i < N; i++) {
        int64_t amount = i == FAIL_AT ? INITIAL * 10 : AMOUNT;
        struct oltp_req r = mk(OLTP_OP_TRANSFER, 5000 + i, 0, 1, 2, amount, 100 + i);

        if (i == BALANCE_AT) {
            struct oltp_req b = mk(OLTP_OP_BALANCE, 4000, 0, 1, 0, 0, 0);

            len += oltp_req_encode(&b, buf + len, OLTP_MAX_FRAME);
        }
        len += oltp_req_encode(&r, buf + len, OLTP_MAX_FRAME);
    }
    cl_send_raw(&c, buf, len);
    for (unsigned i = 0; i < N; i++) {
        struct oltp_reply rp;

        if (i == BALANCE_AT) {
            ck_assert_int_eq(cl_reply(&c, &rp), 0);
            ck_assert_uint_eq(rp.id, 4000);
            ck_assert_uint_eq(rp.status, OLTP_ST_OK);
            ck_assert_int_eq(rp.balance, want);
        }
        ck_assert_int_eq(cl_reply(&c, &rp), 0);
        ck_assert_uint_eq(rp.id, 5000 + i);
        ck_assert_uint_eq(rp.op, OLTP_OP_TRANSFER);
        if (i == FAIL_AT) {
            ck_assert_uint_eq(rp.status, OLTP_ST_INSUFFICIENT);
            continue;
        }
        want -= AMOUNT;
        ck_assert_uint_eq(rp.status, OLTP_ST_OK);
        ck_assert_int_eq(rp.balance, want);
    }
    ck_assert_int_eq(balance_of(&c, 1), INITIAL - (N - 1) * AMOUNT);
    ck_assert_int_eq(balance_of(&c, 2), (N - 1) * AMOUNT);
    ledger_stats(f.l, &after);
    ck_assert_uint_eq(after.writes - before.writes, N);
    ck_assert_uint_eq(after.units - before.units, N);
    /* One commit per transfer without the runs; with them, one per run
     * (64 at most: 2 when the write arrives whole). */
    ck_assert_uint_lt(after.commits - before.commits, N);
    ck_assert_uint_gt(after.max_batch, 1);
    cl_close(&c);
    fx_finish(&f);
    free(buf);
}
END_TEST

/* A header with the given fields and len body bytes of zero after it. */
static size_t raw_frame(unsigned char *p, uint8_t kind, uint8_t flags, uint32_t len, uint64_t id)
{
    memset(p, 0, OLTP_HEADER_SIZE + (len <= OLTP_MAX_BODY ? len : 0));
    p[0] = OLTP_MAGIC0;
    p[1] = OLTP_MAGIC1;
    p[2] = kind;
    p[3] = flags;
    p[4] = (unsigned char)(len >> 24);
    p[5] = (unsigned char)(len >> 16);
    p[6] = (unsigned char)(len >> 8);
    p[7] = (unsigned char)len;
    for (int i = 0; i < 8; i++)
        p[8 + i] = (unsigned char)(id >> (56 - 8 * i));
    return OLTP_HEADER_SIZE + (len <= OLTP_MAX_BODY ? len : 0);
}

/* Sends a PING then frame[0..len) on a new connection: the PING is
 * answered, then the connection is closed. */
static void expect_close_after(uint16_t port, const unsigned char *frame, size_t len)
{
    struct client c;
    struct oltp_reply rp;

    cl_open(&c, port);
    cl_send(&c, &(struct oltp_req){.op = OLTP_OP_PING, .id = 77});
    cl_send_raw(&c, frame, len);
    ck_assert_int_eq(cl_reply(&c, &rp), 0);
    ck_assert_uint_eq(rp.id, 77);
    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    ck_assert_int_eq(cl_reply(&c, &rp), -EPIPE);
    cl_close(&c);
}

START_TEST(bad_frames_get_an_error_reply_or_a_close)
{
    struct fixture f;
    struct client c;
    struct oltp_reply rp;
    unsigned char fr[OLTP_MAX_FRAME + 64];
    size_t n;

    fx_start(&f);
    cl_open(&c, f.port);
    /* A body of the wrong size for its op, then an unknown op: answered,
     * and the stream goes on. */
    n = raw_frame(fr, OLTP_OP_BALANCE, 0, 3, 41);
    n += raw_frame(fr + n, 99, 0, 5, 42);
    n += raw_frame(fr + n, OLTP_OP_PING, 0, 0, 43);
    cl_send_raw(&c, fr, n);
    ck_assert_int_eq(cl_reply(&c, &rp), 0);
    ck_assert_uint_eq(rp.id, 41);
    ck_assert_uint_eq(rp.status, OLTP_ST_MALFORMED);
    ck_assert_int_eq(cl_reply(&c, &rp), 0);
    ck_assert_uint_eq(rp.id, 42);
    ck_assert_uint_eq(rp.op, 99);
    ck_assert_uint_eq(rp.status, OLTP_ST_UNKNOWN_OP);
    ck_assert_int_eq(cl_reply(&c, &rp), 0);
    ck_assert_uint_eq(rp.id, 43);
    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    /* The largest legal body, of an op that wants another size. */
    n = raw_frame(fr, OLTP_OP_DEPOSIT, 0, OLTP_MAX_BODY, 44);
    cl_send_raw(&c, fr, n);
    ck_assert_int_eq(cl_reply(&c, &rp), 0);
    ck_assert_uint_eq(rp.id, 44);
    ck_assert_uint_eq(rp.status, OLTP_ST_MALFORMED);
    cl_close(&c);

    /* Streams that cannot be delimited: closed, after what came before. */
    n = raw_frame(fr, OLTP_OP_PING, 0, OLTP_MAX_BODY + 1, 50);
    expect_close_after(f.port, fr, n);
    n = raw_frame(fr, OLTP_OP_PING, 1, 0, 51);
    expect_close_after(f.port, fr, n);
    n = raw_frame(fr, OLTP_REPLY | OLTP_OP_PING, 0, 2, 52);
    expect_close_after(f.port, fr, n);
    n = raw_frame(fr, 0, 0, 0, 53);
    expect_close_after(f.port, fr, n);
    expect_close_after(f.port, (const unsigned char *)"GET / HTTP/1.1\r\n\r\n", 18);
    fx_finish(&f);
}
END_TEST

START_TEST(session_commit_applies_its_ops_atomically)
{
    struct fixture f;
    struct client c;
    struct oltp_reply rp;
    uint64_t s;

    fx_start(&f);
    cl_open(&c, f.port);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 1, 0, 1, 0, 0, 0)), OLTP_ST_OK);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 2, 0, 2, 0, 0, 0)), OLTP_ST_OK);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 3, 0, 1, 0, 100, 0)), OLTP_ST_OK);

    rp = call(&c, mk(OLTP_OP_BEGIN, 4, 0, 0, 0, 0, 0));
    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    s = rp.session;
    ck_assert_uint_ne(s, 0);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_TRANSFER, 5, s, 1, 2, 30, 10)), OLTP_ST_QUEUED);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_WITHDRAW, 6, s, 1, 0, 50, 0)), OLTP_ST_QUEUED);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 7, s, 2, 0, 5, 0)), OLTP_ST_QUEUED);
    /* Queued, not applied. */
    ck_assert_int_eq(balance_of(&c, 1), 100);
    ck_assert_int_eq(balance_of(&c, 2), 0);
    rp = call(&c, mk(OLTP_OP_COMMIT, 8, s, 0, 0, 0, 0));
    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    ck_assert_uint_eq(rp.count, 3);
    ck_assert_uint_eq(rp.session, s);
    ck_assert_int_eq(balance_of(&c, 1), 20);
    ck_assert_int_eq(balance_of(&c, 2), 35);
    /* The session ended with its commit. */
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_COMMIT, 9, s, 0, 0, 0, 0)), OLTP_ST_NO_SESSION);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 10, s, 1, 0, 1, 0)), OLTP_ST_NO_SESSION);

    /* One op that fails undoes the ones before it. */
    s = call(&c, mk(OLTP_OP_BEGIN, 11, 0, 0, 0, 0, 0)).session;
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_TRANSFER, 12, s, 2, 1, 10, 11)), OLTP_ST_QUEUED);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_WITHDRAW, 13, s, 2, 0, 1000, 0)), OLTP_ST_QUEUED);
    rp = call(&c, mk(OLTP_OP_COMMIT, 14, s, 0, 0, 0, 0));
    ck_assert_uint_eq(rp.status, OLTP_ST_INSUFFICIENT);
    ck_assert_int_eq(balance_of(&c, 1), 20);
    ck_assert_int_eq(balance_of(&c, 2), 35);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_COMMIT, 15, s, 0, 0, 0, 0)), OLTP_ST_NO_SESSION);
    /* The refused unit left its key unused. */
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_TRANSFER, 16, 0, 2, 1, 10, 11)), OLTP_ST_OK);
    ck_assert_int_eq(balance_of(&c, 1), 30);

    /* An empty session commits nothing. */
    s = call(&c, mk(OLTP_OP_BEGIN, 17, 0, 0, 0, 0, 0)).session;
    rp = call(&c, mk(OLTP_OP_COMMIT, 18, s, 0, 0, 0, 0));
    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    ck_assert_uint_eq(rp.count, 0);
    cl_close(&c);
    fx_finish(&f);
}
END_TEST

START_TEST(session_abort_applies_nothing)
{
    struct fixture f;
    struct client c;
    struct ledger_stats st;
    uint64_t s;

    fx_start(&f);
    cl_open(&c, f.port);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 1, 0, 1, 0, 0, 0)), OLTP_ST_OK);
    s = call(&c, mk(OLTP_OP_BEGIN, 2, 0, 0, 0, 0, 0)).session;
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 3, s, 1, 0, 40, 0)), OLTP_ST_QUEUED);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_PING, 4, s, 0, 0, 0, 0)), OLTP_ST_OK);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_ABORT, 5, s, 0, 0, 0, 0)), OLTP_ST_OK);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_COMMIT, 6, s, 0, 0, 0, 0)), OLTP_ST_NO_SESSION);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_ABORT, 7, s, 0, 0, 0, 0)), OLTP_ST_NO_SESSION);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_PING, 8, s, 0, 0, 0, 0)), OLTP_ST_NO_SESSION);
    ck_assert_int_eq(balance_of(&c, 1), 0);
    ledger_stats(f.l, &st);
    ck_assert_uint_eq(st.sessions, 1);
    ck_assert_uint_eq(st.session_aborts, 1);
    ck_assert_uint_eq(st.live_sessions, 0);
    cl_close(&c);
    fx_finish(&f);
}
END_TEST

START_TEST(session_refuses_what_it_cannot_hold)
{
    struct fixture f;
    struct client c;
    uint64_t s;

    fx_start(&f);
    cl_open(&c, f.port);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 1, 0, 1, 0, 0, 0)), OLTP_ST_OK);
    s = call(&c, mk(OLTP_OP_BEGIN, 2, 0, 0, 0, 0, 0)).session;
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_BALANCE, 3, s, 1, 0, 0, 0)), OLTP_ST_NOT_IN_SESSION);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_HISTORY, 4, s, 1, 0, 0, 0)), OLTP_ST_NOT_IN_SESSION);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 5, s, 2, 0, 0, 0)), OLTP_ST_NOT_IN_SESSION);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_BEGIN, 6, s, 0, 0, 0, 0)), OLTP_ST_NOT_IN_SESSION);
    /* Values are checked before the op is queued. */
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 7, s, 1, 0, 0, 0)), OLTP_ST_BAD_AMOUNT);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_TRANSFER, 8, s, 1, 2, 1, 0)), OLTP_ST_NEED_KEY);
    for (unsigned i = 0; i < OLTP_MAX_SESSION_OPS; i++)
        ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 100 + i, s, 1, 0, 1, 0)), OLTP_ST_QUEUED);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 200, s, 1, 0, 1, 0)), OLTP_ST_TOO_LARGE);
    /* The session stays whole after a refusal. */
    ck_assert_uint_eq(call(&c, mk(OLTP_OP_COMMIT, 201, s, 0, 0, 0, 0)).count, OLTP_MAX_SESSION_OPS);
    ck_assert_int_eq(balance_of(&c, 1), OLTP_MAX_SESSION_OPS);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 202, 12345, 1, 0, 1, 0)), OLTP_ST_NO_SESSION);
    cl_close(&c);
    fx_finish(&f);
}
END_TEST

START_TEST(session_continues_on_other_connections)
{
    struct fixture f;
    struct client a;
    struct client b;
    struct client c;
    uint64_t s;

    fx_start(&f);
    cl_open(&a, f.port);
    cl_open(&b, f.port);
    cl_open(&c, f.port);
    ck_assert_uint_eq(st_of(&a, mk(OLTP_OP_OPEN, 1, 0, 1, 0, 0, 0)), OLTP_ST_OK);
    s = call(&a, mk(OLTP_OP_BEGIN, 2, 0, 0, 0, 0, 0)).session;
    cl_close(&a); /* the session outlives the connection that began it */
    ck_assert_uint_eq(st_of(&b, mk(OLTP_OP_DEPOSIT, 3, s, 1, 0, 7, 0)), OLTP_ST_QUEUED);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 4, s, 1, 0, 8, 0)), OLTP_ST_QUEUED);
    ck_assert_uint_eq(st_of(&b, mk(OLTP_OP_DEPOSIT, 5, s, 1, 0, 9, 0)), OLTP_ST_QUEUED);
    ck_assert_uint_eq(call(&c, mk(OLTP_OP_COMMIT, 6, s, 0, 0, 0, 0)).count, 3);
    ck_assert_int_eq(balance_of(&b, 1), 24);
    cl_close(&b);
    cl_close(&c);
    fx_finish(&f);
}
END_TEST

/*
 * 64 sessions over 8 connections and 4 worker threads: each round sends
 * every session one op on a different connection than the round before
 * (all connections written before any is read, so the workers serve them
 * at once), then each session commits on yet another connection.
 */
START_TEST(many_sessions_interleave_over_fewer_workers)
{
    enum { SESSIONS = 64, CONNS = 8, ROUNDS = 4 };
    struct fixture f;
    struct client *c = calloc(CONNS, sizeof(*c));
    uint64_t sid[SESSIONS];
    unsigned char *buf = malloc(SESSIONS * OLTP_MAX_FRAME);
    struct ledger_stats st;

    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(buf);
    fx_start(&f);
    for (unsigned k = 0; k < CONNS; k++)
        cl_open(&c[k], f.port);
    for (unsigned i = 0; i < SESSIONS; i++) {
        ck_assert_uint_eq(st_of(&c[0], mk(OLTP_OP_OPEN, 1, 0, 100 + i, 0, 0, 0)), OLTP_ST_OK);
        sid[i] = call(&c[i % CONNS], mk(OLTP_OP_BEGIN, 2, 0, 0, 0, 0, 0)).session;
        ck_assert_uint_ne(sid[i], 0);
    }
    for (unsigned r = 0; r <= ROUNDS; r++) {
        unsigned expect[CONNS] = {0};

        for (unsigned k = 0; k < CONNS; k++) {
            size_t len = 0;

            for (unsigned i = 0; i < SESSIONS; i++) {
                struct oltp_req q;

                if ((i + r) % CONNS != k)
                    continue;
                /* The last round commits. */
                q = r < ROUNDS ? mk(OLTP_OP_DEPOSIT, i, sid[i], 100 + i, 0, r + 1, 0)
                               : mk(OLTP_OP_COMMIT, i, sid[i], 0, 0, 0, 0);
                len += oltp_req_encode(&q, buf + len, OLTP_MAX_FRAME);
                expect[k]++;
            }
            cl_send_raw(&c[k], buf, len);
        }
        for (unsigned k = 0; k < CONNS; k++) {
            for (unsigned j = 0; j < expect[k]; j++) {
                struct oltp_reply rp;

                ck_assert_int_eq(cl_reply(&c[k], &rp), 0);
                ck_assert_uint_lt(rp.id, SESSIONS);
                ck_assert_uint_eq(rp.session, sid[rp.id]);
                if (r < ROUNDS) {
                    ck_assert_uint_eq(rp.status, OLTP_ST_QUEUED);
                } else {
                    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
                    ck_assert_uint_eq(rp.count, ROUNDS);
                }
            }
        }
    }
    for (unsigned i = 0; i < SESSIONS; i++)
        ck_assert_int_eq(balance_of(&c[i % CONNS], 100 + i), 1 + 2 + 3 + 4);
    ledger_stats(f.l, &st);
    ck_assert_uint_eq(st.sessions, SESSIONS);
    ck_assert_uint_eq(st.session_commits, SESSIONS);
    ck_assert_uint_eq(st.live_sessions, 0);
    for (unsigned k = 0; k < CONNS; k++)
        cl_close(&c[k]);
    fx_finish(&f);
    free(buf);
    free(c);
}
END_TEST

/*
 * A request of a session whose COMMIT is being applied finds it busy. The
 * test holds the database's write lock from a connection of its own, so
 * the commit waits in the database (its busy timeout) for as long as the
 * test needs; then the commit completes and the session is gone.
 */
START_TEST(session_is_busy_while_its_commit_runs)
{
    struct fixture f;
    struct client a;
    struct client b;
    struct oltp_reply rp;
    sqlite3 *h = NULL;
    uint64_t s;
    uint64_t deadline;
    uint16_t st;

    fx_start(&f);
    cl_open(&a, f.port);
    cl_open(&b, f.port);
    ck_assert_uint_eq(st_of(&a, mk(OLTP_OP_OPEN, 1, 0, 1, 0, 0, 0)), OLTP_ST_OK);
    s = call(&a, mk(OLTP_OP_BEGIN, 2, 0, 0, 0, 0, 0)).session;
    ck_assert_uint_eq(st_of(&a, mk(OLTP_OP_DEPOSIT, 3, s, 1, 0, 9, 0)), OLTP_ST_QUEUED);
    ck_assert_int_eq(sqlite3_open(f.db, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    cl_send(&a, &(struct oltp_req){.op = OLTP_OP_COMMIT, .id = 4, .session = s});
    /* Until the commit has checked the session out, a PING finds it idle. */
    deadline = cr_test_now_ms() + TMO_MS / 4;
    do {
        st = st_of(&b, mk(OLTP_OP_PING, 5, s, 0, 0, 0, 0));
        if (st == OLTP_ST_OK)
            usleep(2000);
    } while (st == OLTP_ST_OK && cr_test_now_ms() < deadline);
    ck_assert_uint_eq(st, OLTP_ST_SESSION_BUSY);
    ck_assert_uint_eq(st_of(&b, mk(OLTP_OP_DEPOSIT, 6, s, 1, 0, 1, 0)), OLTP_ST_SESSION_BUSY);
    ck_assert_int_eq(sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_close(h), SQLITE_OK);
    ck_assert_int_eq(cl_reply(&a, &rp), 0);
    ck_assert_uint_eq(rp.id, 4);
    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    ck_assert_uint_eq(rp.count, 1);
    ck_assert_uint_eq(st_of(&b, mk(OLTP_OP_PING, 7, s, 0, 0, 0, 0)), OLTP_ST_NO_SESSION);
    ck_assert_int_eq(balance_of(&b, 1), 9);
    cl_close(&a);
    cl_close(&b);
    fx_finish(&f);
}
END_TEST

/* Two BEGINs on c answered OK, a third TOO_MANY_SESSIONS with no session (ids 1..3); the
 * first session. */
static uint64_t begin_two_then_refused(struct client *c)
{
    struct oltp_reply rp = call(c, mk(OLTP_OP_BEGIN, 1, 0, 0, 0, 0, 0));
    uint64_t first = rp.session;

    ck_assert_uint_eq(rp.status, OLTP_ST_OK);
    ck_assert_uint_ne(first, 0);
    ck_assert_uint_eq(st_of(c, mk(OLTP_OP_BEGIN, 2, 0, 0, 0, 0, 0)), OLTP_ST_OK);
    rp = call(c, mk(OLTP_OP_BEGIN, 3, 0, 0, 0, 0, 0));
    ck_assert_uint_eq(rp.status, OLTP_ST_TOO_MANY_SESSIONS);
    ck_assert_uint_eq(rp.session, 0);
    return first;
}

/* BEGIN beyond max_sessions is refused; ending a session makes room. */
START_TEST(begin_beyond_max_sessions_is_refused)
{
    struct ledger_config lc = {.group_commit = true, .max_sessions = 2};
    struct fixture f;
    struct client c;
    uint64_t s1;

    fx_start_cfg(&f, &lc);
    cl_open(&c, f.port);
    s1 = begin_two_then_refused(&c);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_ABORT, 4, s1, 0, 0, 0, 0)), OLTP_ST_OK);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_BEGIN, 5, 0, 0, 0, 0, 0)), OLTP_ST_OK);
    cl_close(&c);
    fx_finish(&f);
}
END_TEST

/* BEGIN beyond max_sessions_per_conn is refused on that connection only; a session counts
 * against the connection that began it until it ends, on whichever connection. */
START_TEST(begin_beyond_max_sessions_per_conn_is_refused)
{
    struct ledger_config lc = {.group_commit = true, .max_sessions_per_conn = 2};
    struct fixture f;
    struct client a;
    struct client b;
    struct ledger_stats st;
    uint64_t s1;

    fx_start_cfg(&f, &lc);
    cl_open(&a, f.port);
    cl_open(&b, f.port);
    s1 = begin_two_then_refused(&a);
    /* The other connection has its own. */
    ck_assert_uint_eq(st_of(&b, mk(OLTP_OP_BEGIN, 4, 0, 0, 0, 0, 0)), OLTP_ST_OK);
    /* a's session ended on b gives a its room back. */
    ck_assert_uint_eq(st_of(&b, mk(OLTP_OP_ABORT, 5, s1, 0, 0, 0, 0)), OLTP_ST_OK);
    ck_assert_uint_eq(st_of(&a, mk(OLTP_OP_BEGIN, 6, 0, 0, 0, 0, 0)), OLTP_ST_OK);
    ck_assert_uint_eq(st_of(&a, mk(OLTP_OP_BEGIN, 7, 0, 0, 0, 0, 0)), OLTP_ST_TOO_MANY_SESSIONS);
    ledger_stats(f.l, &st);
    ck_assert_uint_eq(st.begins_refused, 2);
    ck_assert_uint_eq(st.live_sessions, 3);
    cl_close(&a);
    cl_close(&b);
    fx_finish(&f);
}
END_TEST

/* A PING with the session restarts its idle clock: pinged for over twice
 * its timeout, it is still there. */
START_TEST(ping_keeps_a_session_alive)
{
    struct ledger_config lc = {.group_commit = true, .session_timeout_ms = 1000};
    struct fixture f;
    struct client c;
    uint64_t s;
    uint64_t until;

    fx_start_cfg(&f, &lc);
    cl_open(&c, f.port);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 1, 0, 1, 0, 0, 0)), OLTP_ST_OK);
    s = call(&c, mk(OLTP_OP_BEGIN, 2, 0, 0, 0, 0, 0)).session;
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 3, s, 1, 0, 4, 0)), OLTP_ST_QUEUED);
    until = cr_test_now_ms() + 2200;
    while (cr_test_now_ms() < until) {
        usleep(50000);
        ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_PING, 4, s, 0, 0, 0, 0)), OLTP_ST_OK);
    }
    ck_assert_uint_eq(call(&c, mk(OLTP_OP_COMMIT, 5, s, 0, 0, 0, 0)).count, 1);
    ck_assert_int_eq(balance_of(&c, 1), 4);
    cl_close(&c);
    fx_finish(&f);
}
END_TEST

/* An abandoned session is collected by the sweeper with no request
 * arriving, and then answers NO_SESSION. */
START_TEST(abandoned_session_expires)
{
    struct ledger_config lc = {.group_commit = true, .session_timeout_ms = 200};
    struct fixture f;
    struct client c;
    struct ledger_stats st;
    uint64_t s;
    uint64_t t0;
    uint64_t deadline;

    fx_start_cfg(&f, &lc);
    cl_open(&c, f.port);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_OPEN, 1, 0, 1, 0, 0, 0)), OLTP_ST_OK);
    t0 = cr_test_now_ms();
    s = call(&c, mk(OLTP_OP_BEGIN, 2, 0, 0, 0, 0, 0)).session;
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_DEPOSIT, 3, s, 1, 0, 5, 0)), OLTP_ST_QUEUED);
    deadline = cr_test_now_ms() + TMO_MS;
    do {
        usleep(10000);
        ledger_stats(f.l, &st);
    } while (st.live_sessions != 0 && cr_test_now_ms() < deadline);
    ck_assert_uint_eq(st.live_sessions, 0);
    ck_assert_uint_eq(st.expired, 1);
    /* Not before its time. */
    ck_assert_uint_ge(cr_test_now_ms() - t0, 200);
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_COMMIT, 4, s, 0, 0, 0, 0)), OLTP_ST_NO_SESSION);
    ck_assert_int_eq(balance_of(&c, 1), 0);
    cl_close(&c);
    fx_finish(&f);
}
END_TEST

START_TEST(idle_connection_is_closed)
{
    struct ledger_config lc = {.group_commit = true, .idle_timeout_ms = 150};
    struct fixture f;
    struct client c;
    struct oltp_reply rp;
    uint64_t t0;

    fx_start_cfg(&f, &lc);
    cl_open(&c, f.port);
    /* Read before the request: the server's idle time starts after it, so
     * a stall of this thread cannot make the close look early. */
    t0 = cr_test_now_ms();
    ck_assert_uint_eq(st_of(&c, mk(OLTP_OP_PING, 1, 0, 0, 0, 0, 0)), OLTP_ST_OK);
    ck_assert_int_eq(cl_reply(&c, &rp), -EPIPE);
    ck_assert_uint_ge(cr_test_now_ms() - t0, 140);
    cl_close(&c);
    fx_finish(&f);
}
END_TEST

Suite *ledger_suite(void);

Suite *ledger_suite(void)
{
    Suite *s = suite_create("ledger");
    TCase *tc = tcase_create("service");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, each_op_answers_with_its_status);
    tcase_add_test(tc, pipelined_frames_are_answered_with_their_ids);
    tcase_add_test(tc, pipelined_writes_of_one_connection_share_commits);
    tcase_add_test(tc, bad_frames_get_an_error_reply_or_a_close);
    tcase_add_test(tc, session_commit_applies_its_ops_atomically);
    tcase_add_test(tc, session_abort_applies_nothing);
    tcase_add_test(tc, session_refuses_what_it_cannot_hold);
    tcase_add_test(tc, session_continues_on_other_connections);
    tcase_add_test(tc, many_sessions_interleave_over_fewer_workers);
    tcase_add_test(tc, session_is_busy_while_its_commit_runs);
    tcase_add_test(tc, begin_beyond_max_sessions_is_refused);
    tcase_add_test(tc, begin_beyond_max_sessions_per_conn_is_refused);
    tcase_add_test(tc, ping_keeps_a_session_alive);
    tcase_add_test(tc, abandoned_session_expires);
    tcase_add_test(tc, idle_connection_is_closed);
    suite_add_tcase(s, tc);
    return s;
}

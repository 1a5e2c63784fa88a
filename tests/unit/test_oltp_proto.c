/*
 * test_oltp_proto.c - the transaction service's wire protocol (apps/oltp/proto.c):
 * every request op and every reply shape round trips and has the documented byte
 * layout; every prefix of a frame is -EAGAIN; each malformed frame gets its documented
 * result (-EBADMSG, or the frame's size with OLTP_ST_MALFORMED / OLTP_ST_UNKNOWN_OP);
 * frames back to back decode in order; encoders never write past cap; the value checks
 * and the idempotency rule. Inputs to the decoders, and the buffers of the encoders,
 * end right before a PROT_NONE page (picohttpparser's test.c), so that a read or write
 * past the end crashes the test.
 */
#include "../../apps/oltp/proto.h"
#include "../support/guard.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Inputs and outputs end right before a PROT_NONE page (../support/guard.h). */
static void teardown(void)
{
    cr_test_guard_release();
}

/* ---------------------------------------------------------------- helpers */

static ssize_t req_decode(const uint8_t *data, size_t len, struct oltp_req *r, uint16_t *status)
{
    *status = 0xffff;
    return oltp_req_decode(cr_test_guard_put(data, len), len, r, status);
}

static ssize_t reply_decode(const uint8_t *data, size_t len, struct oltp_reply *r)
{
    return oltp_reply_decode(cr_test_guard_put(data, len), len, r);
}

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* Writes a header; returns OLTP_HEADER_SIZE. */
static size_t header(uint8_t *p, uint8_t kind, uint8_t flags, uint32_t len, uint64_t id,
                     uint64_t session)
{
    p[0] = OLTP_MAGIC0;
    p[1] = OLTP_MAGIC1;
    p[2] = kind;
    p[3] = flags;
    put_be(p + 4, len, 4);
    put_be(p + 8, id, 8);
    put_be(p + 16, session, 8);
    return OLTP_HEADER_SIZE;
}

static const size_t req_sizes[] = {
    [OLTP_OP_OPEN] = 8,    [OLTP_OP_DEPOSIT] = 32, [OLTP_OP_WITHDRAW] = 32, [OLTP_OP_TRANSFER] = 40,
    [OLTP_OP_BALANCE] = 8, [OLTP_OP_HISTORY] = 12, [OLTP_OP_BEGIN] = 0,     [OLTP_OP_COMMIT] = 0,
    [OLTP_OP_ABORT] = 0,   [OLTP_OP_PING] = 0,
};

/* A request of op with every field it carries set to a distinct value with high bits
 * set (so a byte-order or width mistake shows), and the others zero. */
static struct oltp_req sample_req(uint8_t op)
{
    struct oltp_req r = {
        .op = op, .id = 0x0102030405060708ULL + op, .session = 0xf1f2f3f4f5f6f7f8ULL};

    switch (op) {
    case OLTP_OP_TRANSFER:
        r.to = 0x8877665544332211ULL;
        /* fall through */
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
        r.amount = op == OLTP_OP_WITHDRAW ? INT64_MIN : -2;
        for (int i = 0; i < OLTP_KEY_SIZE; i++)
            r.key[i] = (uint8_t)(0xa0 + i);
        /* fall through */
    case OLTP_OP_OPEN:
    case OLTP_OP_BALANCE:
        r.account = 0xfedcba9876543210ULL;
        break;
    case OLTP_OP_HISTORY:
        r.account = 42;
        r.limit = 0xdeadbeef;
        break;
    default:
        break;
    }
    return r;
}

static void assert_req_eq(const struct oltp_req *a, const struct oltp_req *b)
{
    ck_assert_uint_eq(a->op, b->op);
    ck_assert_uint_eq(a->id, b->id);
    ck_assert_uint_eq(a->session, b->session);
    ck_assert_uint_eq(a->account, b->account);
    ck_assert_uint_eq(a->to, b->to);
    ck_assert_int_eq(a->amount, b->amount);
    ck_assert_uint_eq(a->limit, b->limit);
    ck_assert_mem_eq(a->key, b->key, OLTP_KEY_SIZE);
}

static void assert_reply_eq(const struct oltp_reply *a, const struct oltp_reply *b)
{
    ck_assert_uint_eq(a->op, b->op);
    ck_assert_uint_eq(a->id, b->id);
    ck_assert_uint_eq(a->session, b->session);
    ck_assert_uint_eq(a->status, b->status);
    ck_assert_int_eq(a->balance, b->balance);
    ck_assert_uint_eq(a->count, b->count);
    for (uint32_t i = 0; i < a->count && a->op == OLTP_OP_HISTORY; i++) {
        ck_assert_uint_eq(a->hist[i].txn, b->hist[i].txn);
        ck_assert_int_eq(a->hist[i].delta, b->hist[i].delta);
        ck_assert_uint_eq(a->hist[i].other, b->hist[i].other);
    }
}

static struct oltp_reply reply;
static struct oltp_reply reply2;
static uint8_t frame[OLTP_MAX_FRAME + 64];

/* ---------------------------------------------------------------- requests */

START_TEST(request_of_every_op_round_trips)
{
    uint8_t op = (uint8_t)(_i + 1);
    struct oltp_req in = sample_req(op);
    struct oltp_req out;
    uint16_t status;
    size_t n = oltp_req_encode(&in, frame, sizeof(frame));
    uint64_t id;
    uint64_t session;
    uint8_t kind;

    ck_assert_uint_eq(n, OLTP_HEADER_SIZE + req_sizes[op]);
    memset(&out, 0x55, sizeof(out));
    ck_assert_int_eq(req_decode(frame, n, &out, &status), (ssize_t)n);
    ck_assert_uint_eq(status, OLTP_ST_OK);
    assert_req_eq(&out, &in);

    ck_assert_int_eq(oltp_frame_peek(cr_test_guard_put(frame, n), n, false, &id, &session, &kind),
                     (ssize_t)n);
    ck_assert_uint_eq(id, in.id);
    ck_assert_uint_eq(session, in.session);
    ck_assert_uint_eq(kind, op);
    ck_assert_int_eq(oltp_frame_peek(cr_test_guard_put(frame, n), n, true, NULL, NULL, NULL),
                     -EBADMSG);
}
END_TEST

START_TEST(request_bytes_follow_the_documented_layout)
{
    static const uint8_t want[] = {
        0xcb, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x28, /* TRANSFER, len 40 */
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* id */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, /* session */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, /* from */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, /* to */
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, /* amount -2 */
        1,    2,    3,    4,    5,    6,    7,    8,    9, 10, 11, 12, 13, 14, 15, 16};
    struct oltp_req r = {.op = OLTP_OP_TRANSFER,
                         .id = 0x0102030405060708ULL,
                         .session = 0x100,
                         .account = 7,
                         .to = 1ULL << 32,
                         .amount = -2,
                         .key = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};
    struct oltp_req out;
    uint16_t status;

    ck_assert_uint_eq(oltp_req_encode(&r, frame, sizeof(frame)), sizeof(want));
    ck_assert_mem_eq(frame, want, sizeof(want));
    ck_assert_int_eq(req_decode(want, sizeof(want), &out, &status), (ssize_t)sizeof(want));
    assert_req_eq(&out, &r);

    /* HISTORY's limit is a u32 after the account. */
    r = (struct oltp_req){.op = OLTP_OP_HISTORY, .account = 9, .limit = 0x01020304};
    ck_assert_uint_eq(oltp_req_encode(&r, frame, sizeof(frame)), 36);
    ck_assert_uint_eq(frame[2], OLTP_OP_HISTORY);
    ck_assert_uint_eq(frame[7], 12);
    ck_assert_uint_eq(frame[31], 9);
    ck_assert_uint_eq(frame[32], 1);
    ck_assert_uint_eq(frame[35], 4);
}
END_TEST

START_TEST(every_prefix_of_a_request_is_eagain)
{
    uint8_t op = (uint8_t)(_i + 1);
    struct oltp_req in = sample_req(op);
    struct oltp_req out;
    uint16_t status;
    size_t n = oltp_req_encode(&in, frame, sizeof(frame));

    ck_assert_uint_gt(n, 0);
    for (size_t k = 0; k < n; k++) {
        ck_assert_int_eq(req_decode(frame, k, &out, &status), -EAGAIN);
        ck_assert_int_eq(oltp_frame_peek(cr_test_guard_put(frame, k), k, false, NULL, NULL, NULL),
                         -EAGAIN);
    }
    ck_assert_int_eq(req_decode(frame, n, &out, &status), (ssize_t)n);
}
END_TEST

START_TEST(decoder_reads_nothing_at_length_zero)
{
    struct oltp_req out;
    uint16_t status;

    /* A zero length at the guard page: any read at all would fault. */
    ck_assert_int_eq(oltp_req_decode(cr_test_guard_room(0), 0, &out, &status), -EAGAIN);
    ck_assert_int_eq(oltp_reply_decode(cr_test_guard_room(0), 0, &reply), -EAGAIN);
    ck_assert_int_eq(oltp_frame_peek(cr_test_guard_room(0), 0, true, NULL, NULL, NULL), -EAGAIN);
}
END_TEST

/* A bad header byte fails as soon as it arrives, and the whole frame fails too. */
struct bad_header {
    const char *name;
    size_t at;   /* the offset of the bad byte */
    uint8_t val; /* its value */
    size_t fail; /* the shortest prefix that fails */
};

static const struct bad_header bad_req_headers[] = {
    {"magic0", 0, 0xcc, 1},
    {"magic1", 1, 0x02, 2},
    {"reply kind", 2, OLTP_REPLY | OLTP_OP_PING, 3},
    {"reply kind of unknown op", 2, 0xff, 3},
    {"kind 0", 2, 0x00, 3},
    {"flags 1", 3, 0x01, 4},
    {"flags 0x80", 3, 0x80, 4},
    {"len over max", 6, 0x10, 8}, /* 0x00001000 + 1 below */
    {"len 2^31", 4, 0x80, 8},
};

START_TEST(request_decoder_refuses_a_bad_header)
{
    const struct bad_header *c = &bad_req_headers[_i];
    struct oltp_req in = sample_req(OLTP_OP_PING);
    struct oltp_req out;
    uint16_t status;
    size_t n = oltp_req_encode(&in, frame, sizeof(frame));

    frame[c->at] = c->val;
    if (c->at >= 4 && c->at < 8 && c->val == 0x10)
        frame[7] = 0x01; /* len = OLTP_MAX_BODY + 1 */
    for (size_t k = 0; k < c->fail; k++)
        ck_assert_int_eq(req_decode(frame, k, &out, &status), -EAGAIN);
    for (size_t k = c->fail; k <= n; k++) {
        ck_assert_msg(req_decode(frame, k, &out, &status) == -EBADMSG, "%s at %zu", c->name, k);
        ck_assert_uint_eq(status, 0xffff);
        ck_assert_int_eq(oltp_frame_peek(cr_test_guard_put(frame, k), k, false, NULL, NULL, NULL),
                         -EBADMSG);
    }
}
END_TEST

START_TEST(oversize_len_is_refused_from_the_header_alone)
{
    struct oltp_req out;
    uint16_t status;

    /* OLTP_MAX_BODY itself is legal: the header waits for the body. */
    header(frame, OLTP_OP_PING, 0, OLTP_MAX_BODY, 1, 0);
    ck_assert_int_eq(req_decode(frame, OLTP_HEADER_SIZE, &out, &status), -EAGAIN);
    header(frame, OLTP_OP_PING, 0, OLTP_MAX_BODY + 1, 1, 0);
    ck_assert_int_eq(req_decode(frame, 8, &out, &status), -EBADMSG);
    ck_assert_int_eq(req_decode(frame, OLTP_HEADER_SIZE, &out, &status), -EBADMSG);
    header(frame, OLTP_REPLY | OLTP_OP_PING, 0, UINT32_MAX, 1, 0);
    ck_assert_int_eq(reply_decode(frame, OLTP_HEADER_SIZE, &reply), -EBADMSG);
}
END_TEST

START_TEST(wrong_body_size_is_malformed_and_skipped_whole)
{
    uint8_t op = (uint8_t)(_i + 1);
    static const int deltas[] = {-1, 1, 8};
    struct oltp_req out;
    uint16_t status;

    for (size_t d = 0; d < sizeof(deltas) / sizeof(deltas[0]); d++) {
        long body = (long)req_sizes[op] + deltas[d];
        size_t n;

        if (body < 0)
            continue;
        n = header(frame, op, 0, (uint32_t)body, 77, 88) + (size_t)body;
        memset(frame + OLTP_HEADER_SIZE, 0xee, (size_t)body);
        for (size_t k = 0; k < n; k++)
            ck_assert_int_eq(req_decode(frame, k, &out, &status), -EAGAIN);
        ck_assert_int_eq(req_decode(frame, n, &out, &status), (ssize_t)n);
        ck_assert_uint_eq(status, OLTP_ST_MALFORMED);
        ck_assert_uint_eq(out.op, op);
        ck_assert_uint_eq(out.id, 77);
        ck_assert_uint_eq(out.session, 88);
    }

    /* The largest body is still only skipped. */
    header(frame, op, 0, OLTP_MAX_BODY, 5, 0);
    memset(frame + OLTP_HEADER_SIZE, 0, OLTP_MAX_BODY);
    ck_assert_int_eq(req_decode(frame, OLTP_MAX_FRAME, &out, &status), OLTP_MAX_FRAME);
    ck_assert_uint_eq(status, OLTP_ST_MALFORMED);
}
END_TEST

START_TEST(unknown_op_is_reported_and_skipped_whole)
{
    static const uint8_t ops[] = {11, 12, 99, 127};
    struct oltp_req out;
    uint16_t status;

    for (size_t i = 0; i < sizeof(ops); i++) {
        for (uint32_t body = 0; body <= 40; body += 20) {
            size_t n = header(frame, ops[i], 0, body, 1000 + i, 3) + body;

            memset(frame + OLTP_HEADER_SIZE, 0x11, body);
            ck_assert_int_eq(req_decode(frame, n - 1, &out, &status), -EAGAIN);
            ck_assert_int_eq(req_decode(frame, n, &out, &status), (ssize_t)n);
            ck_assert_uint_eq(status, OLTP_ST_UNKNOWN_OP);
            ck_assert_uint_eq(out.op, ops[i]);
            ck_assert_uint_eq(out.id, 1000 + i);
            ck_assert_uint_eq(out.session, 3);
            ck_assert_uint_eq(oltp_req_check(&out), OLTP_ST_UNKNOWN_OP);
        }
    }
}
END_TEST

START_TEST(frames_back_to_back_decode_in_order)
{
    struct oltp_req a = sample_req(OLTP_OP_TRANSFER);
    struct oltp_req b = sample_req(OLTP_OP_PING);
    struct oltp_req c = sample_req(OLTP_OP_HISTORY);
    struct oltp_req out;
    uint16_t status;
    size_t n = 0;
    size_t bad;
    const uint8_t *p;
    ssize_t m;

    n += oltp_req_encode(&a, frame + n, sizeof(frame) - n);
    /* A malformed frame in the middle is skipped; the stream goes on. */
    bad = header(frame + n, OLTP_OP_OPEN, 0, 3, 555, 0) + 3;
    memset(frame + n + OLTP_HEADER_SIZE, 0, 3);
    n += bad;
    n += oltp_req_encode(&b, frame + n, sizeof(frame) - n);
    n += oltp_req_encode(&c, frame + n, sizeof(frame) - n);

    p = cr_test_guard_put(frame, n);
    m = oltp_req_decode(p, n, &out, &status);
    ck_assert_int_eq(m, OLTP_HEADER_SIZE + 40);
    ck_assert_uint_eq(status, OLTP_ST_OK);
    assert_req_eq(&out, &a);
    p += m;
    n -= (size_t)m;
    m = oltp_req_decode(p, n, &out, &status);
    ck_assert_int_eq(m, (ssize_t)bad);
    ck_assert_uint_eq(status, OLTP_ST_MALFORMED);
    ck_assert_uint_eq(out.id, 555);
    p += m;
    n -= (size_t)m;
    m = oltp_req_decode(p, n, &out, &status);
    ck_assert_int_eq(m, OLTP_HEADER_SIZE);
    ck_assert_uint_eq(status, OLTP_ST_OK);
    assert_req_eq(&out, &b);
    p += m;
    n -= (size_t)m;
    m = oltp_req_decode(p, n, &out, &status);
    ck_assert_int_eq(m, (ssize_t)n);
    assert_req_eq(&out, &c);

    /* Replies likewise. */
    reply = (struct oltp_reply){.op = OLTP_OP_BALANCE, .id = 1, .balance = 10};
    n = oltp_reply_encode(&reply, frame, sizeof(frame));
    reply.op = OLTP_OP_COMMIT;
    reply.id = 2;
    reply.count = 3;
    n += oltp_reply_encode(&reply, frame + n, sizeof(frame) - n);
    p = cr_test_guard_put(frame, n);
    m = oltp_reply_decode(p, n, &reply2);
    ck_assert_int_eq(m, OLTP_HEADER_SIZE + 10);
    ck_assert_uint_eq(reply2.id, 1);
    ck_assert_int_eq(reply2.balance, 10);
    ck_assert_int_eq(oltp_reply_decode(p + m, n - (size_t)m, &reply2), OLTP_HEADER_SIZE + 6);
    ck_assert_uint_eq(reply2.id, 2);
    ck_assert_uint_eq(reply2.count, 3);
}
END_TEST

START_TEST(request_encoder_never_writes_past_cap)
{
    uint8_t op = (uint8_t)(_i + 1);
    struct oltp_req in = sample_req(op);
    size_t n = OLTP_HEADER_SIZE + req_sizes[op];

    for (size_t cap = 0; cap < n; cap++) {
        uint8_t *p = cr_test_guard_room(cap);
        size_t room;
        unsigned char *base = cr_test_guard_base(&room);

        memset(base, 0x5a, room);
        ck_assert_uint_eq(oltp_req_encode(&in, p, cap), 0);
        for (size_t i = 0; i < room; i++)
            ck_assert_uint_eq(base[i], 0x5a);
    }
    /* At exactly its size, against the guard page. */
    ck_assert_uint_eq(oltp_req_encode(&in, cr_test_guard_room(n), n), n);
}
END_TEST

START_TEST(request_encoder_refuses_an_unknown_op)
{
    struct oltp_req in = {.op = 0};

    ck_assert_uint_eq(oltp_req_encode(&in, frame, sizeof(frame)), 0);
    in.op = 11;
    ck_assert_uint_eq(oltp_req_encode(&in, frame, sizeof(frame)), 0);
    in.op = OLTP_REPLY | OLTP_OP_PING;
    ck_assert_uint_eq(oltp_req_encode(&in, frame, sizeof(frame)), 0);
}
END_TEST

/* ---------------------------------------------------------------- replies */

/* Every reply shape: each op with OK (HISTORY with 0, 1 and the most entries), with
 * QUEUED and with an error status. */
struct reply_case {
    uint8_t op;
    uint16_t status;
    uint32_t count;
    size_t body;
};

static const struct reply_case reply_cases[] = {
    {OLTP_OP_OPEN, OLTP_ST_OK, 0, 2},
    {OLTP_OP_DEPOSIT, OLTP_ST_OK, 0, 10},
    {OLTP_OP_WITHDRAW, OLTP_ST_OK, 0, 10},
    {OLTP_OP_TRANSFER, OLTP_ST_OK, 0, 10},
    {OLTP_OP_BALANCE, OLTP_ST_OK, 0, 10},
    {OLTP_OP_HISTORY, OLTP_ST_OK, 0, 6},
    {OLTP_OP_HISTORY, OLTP_ST_OK, 1, 30},
    {OLTP_OP_HISTORY, OLTP_ST_OK, OLTP_MAX_HISTORY, 6 + 24 * OLTP_MAX_HISTORY},
    {OLTP_OP_BEGIN, OLTP_ST_OK, 0, 2},
    {OLTP_OP_COMMIT, OLTP_ST_OK, 0xfffffffe, 6},
    {OLTP_OP_ABORT, OLTP_ST_OK, 0, 2},
    {OLTP_OP_PING, OLTP_ST_OK, 0, 2},
    {OLTP_OP_DEPOSIT, OLTP_ST_QUEUED, 0, 2},
    {OLTP_OP_TRANSFER, OLTP_ST_QUEUED, 0, 2},
    {OLTP_OP_WITHDRAW, OLTP_ST_INSUFFICIENT, 0, 2},
    {OLTP_OP_HISTORY, OLTP_ST_NO_ACCOUNT, 0, 2},
    {OLTP_OP_COMMIT, OLTP_ST_NO_SESSION, 0, 2},
    {OLTP_OP_OPEN, OLTP_ST_INTERNAL, 0, 2},
    {99, OLTP_ST_UNKNOWN_OP, 0, 2},
    {127, OLTP_ST_UNKNOWN_OP, 0, 2},
};

static struct oltp_reply sample_reply(const struct reply_case *c)
{
    struct oltp_reply r;

    memset(&r, 0, sizeof(r));
    r.op = c->op;
    r.status = c->status;
    r.id = 0x8000000000000001ULL;
    r.session = 0x7fffffffffffffffULL;
    if (c->status != OLTP_ST_OK)
        return r;
    switch (c->op) {
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_TRANSFER:
        r.balance = INT64_MAX;
        break;
    case OLTP_OP_WITHDRAW:
    case OLTP_OP_BALANCE:
        r.balance = 0x0123456789abcdefLL;
        break;
    case OLTP_OP_COMMIT:
        r.count = c->count;
        break;
    case OLTP_OP_HISTORY:
        r.count = c->count;
        for (uint32_t i = 0; i < c->count; i++) {
            r.hist[i].txn = 0xa000000000000000ULL + i;
            r.hist[i].delta = i % 2 ? -(int64_t)i - 1 : INT64_MIN + i;
            r.hist[i].other = i % 3 ? 0 : 0xffffffffffffffffULL - i;
        }
        break;
    default:
        break;
    }
    return r;
}

START_TEST(reply_of_every_shape_round_trips)
{
    const struct reply_case *c = &reply_cases[_i];
    struct oltp_reply in = sample_reply(c);
    size_t n = oltp_reply_encode(&in, frame, sizeof(frame));
    uint64_t id;
    uint8_t kind;

    ck_assert_uint_eq(n, OLTP_HEADER_SIZE + c->body);
    ck_assert_uint_eq(frame[2], OLTP_REPLY | c->op);
    ck_assert_uint_eq(frame[24], c->status >> 8);
    ck_assert_uint_eq(frame[25], c->status & 0xff);
    memset(&reply2, 0x55, sizeof(reply2));
    ck_assert_int_eq(reply_decode(frame, n, &reply2), (ssize_t)n);
    assert_reply_eq(&reply2, &in);

    ck_assert_int_eq(oltp_frame_peek(cr_test_guard_put(frame, n), n, true, &id, NULL, &kind),
                     (ssize_t)n);
    ck_assert_uint_eq(id, in.id);
    ck_assert_uint_eq(kind, OLTP_REPLY | c->op);
    ck_assert_int_eq(oltp_frame_peek(cr_test_guard_put(frame, n), n, false, NULL, NULL, NULL),
                     -EBADMSG);
    {
        struct oltp_req out;
        uint16_t status;

        ck_assert_int_eq(req_decode(frame, n, &out, &status), -EBADMSG);
    }

    /* Every prefix waits; encoding never writes past cap. */
    for (size_t k = 0; k < n; k++)
        ck_assert_int_eq(reply_decode(frame, k, &reply2), -EAGAIN);
    for (size_t cap = 0; cap < n; cap += cap < 64 ? 1 : 97) {
        uint8_t *p = cr_test_guard_room(cap);
        size_t room;
        unsigned char *base = cr_test_guard_base(&room);

        memset(base, 0x5a, room);
        ck_assert_uint_eq(oltp_reply_encode(&in, p, cap), 0);
        for (size_t i = 0; i < room; i++)
            ck_assert_uint_eq(base[i], 0x5a);
    }
    ck_assert_uint_eq(oltp_reply_encode(&in, cr_test_guard_room(n), n), n);
}
END_TEST

START_TEST(reply_bytes_follow_the_documented_layout)
{
    static const uint8_t want[] = {
        0xcb, 0x01, 0x86, 0x00, 0x00, 0x00, 0x00, 0x1e, /* HISTORY reply, len 30 */
        0,    0,    0,    0,    0,    0,    0,    9,    /* id */
        0,    0,    0,    0,    0,    0,    0,    0,    /* session */
        0x00, 0x00,                                     /* OK */
        0x00, 0x00, 0x00, 0x01,                         /* count */
        0,    0,    0,    0,    0,    0,    0x30, 0x39, /* txn 12345 */
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x9c, /* delta -100 */
        0,    0,    0,    0,    0,    0,    0,    3,    /* other */
    };

    ck_assert_int_eq(reply_decode(want, sizeof(want), &reply), (ssize_t)sizeof(want));
    ck_assert_uint_eq(reply.op, OLTP_OP_HISTORY);
    ck_assert_uint_eq(reply.id, 9);
    ck_assert_uint_eq(reply.status, OLTP_ST_OK);
    ck_assert_uint_eq(reply.count, 1);
    ck_assert_uint_eq(reply.hist[0].txn, 12345);
    ck_assert_int_eq(reply.hist[0].delta, -100);
    ck_assert_uint_eq(reply.hist[0].other, 3);
    ck_assert_uint_eq(oltp_reply_encode(&reply, frame, sizeof(frame)), sizeof(want));
    ck_assert_mem_eq(frame, want, sizeof(want));
}
END_TEST

/* Replies whose body does not match op and status: -EBADMSG. */
struct bad_reply {
    const char *name;
    uint8_t kind;
    uint32_t len;
    uint8_t body[40];
};

static const struct bad_reply bad_replies[] = {
    {"no status", OLTP_REPLY | OLTP_OP_PING, 0, {0}},
    {"half a status", OLTP_REPLY | OLTP_OP_PING, 1, {0}},
    {"ping with a payload", OLTP_REPLY | OLTP_OP_PING, 3, {0}},
    {"balance without its balance", OLTP_REPLY | OLTP_OP_BALANCE, 2, {0}},
    {"balance one byte short", OLTP_REPLY | OLTP_OP_BALANCE, 9, {0}},
    {"balance one byte long", OLTP_REPLY | OLTP_OP_BALANCE, 11, {0}},
    {"commit without its count", OLTP_REPLY | OLTP_OP_COMMIT, 2, {0}},
    {"error with a payload", OLTP_REPLY | OLTP_OP_BALANCE, 10, {0, OLTP_ST_NO_ACCOUNT}},
    {"queued with a payload", OLTP_REPLY | OLTP_OP_DEPOSIT, 10, {0, OLTP_ST_QUEUED}},
    {"unknown status", OLTP_REPLY | OLTP_OP_PING, 2, {0, OLTP_ST_COUNT}},
    {"status 0xff00", OLTP_REPLY | OLTP_OP_PING, 2, {0xff, 0}},
    {"ok for an unknown op", OLTP_REPLY | 11, 2, {0}},
    {"history without a count", OLTP_REPLY | OLTP_OP_HISTORY, 2, {0}},
    {"history with half a count", OLTP_REPLY | OLTP_OP_HISTORY, 4, {0}},
    {"history count over the max", OLTP_REPLY | OLTP_OP_HISTORY, 6, {0, 0, 0, 0, 0, 101}},
    {"history count 2^32-1", OLTP_REPLY | OLTP_OP_HISTORY, 6, {0, 0, 0xff, 0xff, 0xff, 0xff}},
    {"truncated history", OLTP_REPLY | OLTP_OP_HISTORY, 29, {0, 0, 0, 0, 0, 1}},
    {"history with one entry missing", OLTP_REPLY | OLTP_OP_HISTORY, 30, {0, 0, 0, 0, 0, 2}},
    {"history with a spare byte", OLTP_REPLY | OLTP_OP_HISTORY, 31, {0, 0, 0, 0, 0, 1}},
    {"empty history with a spare byte", OLTP_REPLY | OLTP_OP_HISTORY, 7, {0}},
};

START_TEST(reply_decoder_refuses_a_body_that_does_not_match)
{
    const struct bad_reply *c = &bad_replies[_i];
    size_t n = header(frame, c->kind, 0, c->len, 1, 0);

    memset(&reply, 0x77, sizeof(reply));
    memcpy(frame + n, c->body, c->len < sizeof(c->body) ? c->len : sizeof(c->body));
    n += c->len;
    for (size_t k = 0; k < n; k++)
        ck_assert_int_eq(reply_decode(frame, k, &reply), -EAGAIN);
    ck_assert_msg(reply_decode(frame, n, &reply) == -EBADMSG, "%s", c->name);
    /* *r untouched on failure. */
    ck_assert_uint_eq(reply.op, 0x77);
    /* The header alone is fine: a forwarder can still skip it. */
    ck_assert_int_eq(oltp_frame_peek(cr_test_guard_put(frame, n), n, true, NULL, NULL, NULL),
                     (ssize_t)n);
}
END_TEST

static const struct bad_header bad_reply_headers[] = {
    {"magic0", 0, 0x00, 1},
    {"magic1", 1, 0xcb, 2},
    {"request kind", 2, OLTP_OP_PING, 3},
    {"request kind of unknown op", 2, 0x7f, 3},
    {"kind 0x80", 2, OLTP_REPLY, 3},
    {"flags", 3, 0x40, 4},
    {"len over max", 6, 0x10, 8},
};

START_TEST(reply_decoder_refuses_a_bad_header)
{
    const struct bad_header *c = &bad_reply_headers[_i];
    struct oltp_reply in = {.op = OLTP_OP_PING, .id = 4};
    size_t n = oltp_reply_encode(&in, frame, sizeof(frame));

    ck_assert_uint_eq(n, OLTP_HEADER_SIZE + 2);
    frame[c->at] = c->val;
    if (c->val == 0x10)
        frame[7] = 0x01;
    for (size_t k = 0; k < c->fail; k++)
        ck_assert_int_eq(reply_decode(frame, k, &reply), -EAGAIN);
    for (size_t k = c->fail; k <= n; k++)
        ck_assert_msg(reply_decode(frame, k, &reply) == -EBADMSG, "%s at %zu", c->name, k);
}
END_TEST

START_TEST(reply_encoder_refuses_an_illegal_reply)
{
    struct oltp_reply r;

    memset(&r, 0, sizeof(r));
    r.op = 0;
    ck_assert_uint_eq(oltp_reply_encode(&r, frame, sizeof(frame)), 0);
    r.op = 128;
    r.status = OLTP_ST_INTERNAL;
    ck_assert_uint_eq(oltp_reply_encode(&r, frame, sizeof(frame)), 0);
    r.op = OLTP_OP_PING;
    r.status = OLTP_ST_COUNT;
    ck_assert_uint_eq(oltp_reply_encode(&r, frame, sizeof(frame)), 0);
    r.op = 11;
    r.status = OLTP_ST_OK;
    ck_assert_uint_eq(oltp_reply_encode(&r, frame, sizeof(frame)), 0);
    r.op = OLTP_OP_HISTORY;
    r.count = OLTP_MAX_HISTORY + 1;
    ck_assert_uint_eq(oltp_reply_encode(&r, frame, sizeof(frame)), 0);
    /* The largest reply fits OLTP_MAX_BODY. */
    r.count = OLTP_MAX_HISTORY;
    ck_assert_uint_le(oltp_reply_encode(&r, frame, sizeof(frame)), OLTP_MAX_FRAME);
    ck_assert_uint_gt(oltp_reply_encode(&r, frame, sizeof(frame)), 0);
}
END_TEST

/* ---------------------------------------------------------------- values */

struct check_case {
    const char *name;
    struct oltp_req r;
    uint16_t want;
};

#define KEY  .key = {1}
#define MAXA OLTP_MAX_ACCOUNT
#define MAXM OLTP_MAX_AMOUNT

static const struct check_case check_cases[] = {
    {"open", {.op = OLTP_OP_OPEN, .account = 1}, OLTP_ST_OK},
    {"open max", {.op = OLTP_OP_OPEN, .account = MAXA}, OLTP_ST_OK},
    {"open 0", {.op = OLTP_OP_OPEN, .account = 0}, OLTP_ST_BAD_ACCOUNT},
    {"open max+1", {.op = OLTP_OP_OPEN, .account = MAXA + 1}, OLTP_ST_BAD_ACCOUNT},
    {"balance 0", {.op = OLTP_OP_BALANCE}, OLTP_ST_BAD_ACCOUNT},
    {"balance", {.op = OLTP_OP_BALANCE, .account = 5}, OLTP_ST_OK},
    {"deposit", {.op = OLTP_OP_DEPOSIT, .account = 5, .amount = 1}, OLTP_ST_OK},
    {"deposit max", {.op = OLTP_OP_DEPOSIT, .account = 5, .amount = MAXM, KEY}, OLTP_ST_OK},
    {"deposit 0", {.op = OLTP_OP_DEPOSIT, .account = 5, .amount = 0}, OLTP_ST_BAD_AMOUNT},
    {"deposit -1", {.op = OLTP_OP_DEPOSIT, .account = 5, .amount = -1}, OLTP_ST_BAD_AMOUNT},
    {"deposit max+1",
     {.op = OLTP_OP_DEPOSIT, .account = 5, .amount = MAXM + 1},
     OLTP_ST_BAD_AMOUNT},
    {"deposit bad account first",
     {.op = OLTP_OP_DEPOSIT, .account = 0, .amount = 0},
     OLTP_ST_BAD_ACCOUNT},
    {"withdraw", {.op = OLTP_OP_WITHDRAW, .account = 5, .amount = 7}, OLTP_ST_OK},
    {"withdraw min",
     {.op = OLTP_OP_WITHDRAW, .account = 5, .amount = INT64_MIN},
     OLTP_ST_BAD_AMOUNT},
    {"withdraw account max+1",
     {.op = OLTP_OP_WITHDRAW, .account = MAXA + 1, .amount = 7},
     OLTP_ST_BAD_ACCOUNT},
    {"transfer", {.op = OLTP_OP_TRANSFER, .account = 1, .to = 2, .amount = 3, KEY}, OLTP_ST_OK},
    {"transfer key last byte",
     {.op = OLTP_OP_TRANSFER, .account = 1, .to = 2, .amount = 3, .key[15] = 1},
     OLTP_ST_OK},
    {"transfer without key",
     {.op = OLTP_OP_TRANSFER, .account = 1, .to = 2, .amount = 3},
     OLTP_ST_NEED_KEY},
    {"transfer to self",
     {.op = OLTP_OP_TRANSFER, .account = 2, .to = 2, .amount = 3, KEY},
     OLTP_ST_BAD_ACCOUNT},
    {"transfer from 0",
     {.op = OLTP_OP_TRANSFER, .account = 0, .to = 2, .amount = 3, KEY},
     OLTP_ST_BAD_ACCOUNT},
    {"transfer to 0",
     {.op = OLTP_OP_TRANSFER, .account = 1, .to = 0, .amount = 3, KEY},
     OLTP_ST_BAD_ACCOUNT},
    {"transfer to max+1",
     {.op = OLTP_OP_TRANSFER, .account = 1, .to = MAXA + 1, .amount = 3, KEY},
     OLTP_ST_BAD_ACCOUNT},
    {"transfer amount 0",
     {.op = OLTP_OP_TRANSFER, .account = 1, .to = 2, .amount = 0, KEY},
     OLTP_ST_BAD_AMOUNT},
    {"transfer amount before key",
     {.op = OLTP_OP_TRANSFER, .account = 1, .to = 2},
     OLTP_ST_BAD_AMOUNT},
    {"history", {.op = OLTP_OP_HISTORY, .account = 1, .limit = 1}, OLTP_ST_OK},
    {"history max", {.op = OLTP_OP_HISTORY, .account = 1, .limit = OLTP_MAX_HISTORY}, OLTP_ST_OK},
    {"history limit 0", {.op = OLTP_OP_HISTORY, .account = 1, .limit = 0}, OLTP_ST_MALFORMED},
    {"history limit max+1",
     {.op = OLTP_OP_HISTORY, .account = 1, .limit = OLTP_MAX_HISTORY + 1},
     OLTP_ST_MALFORMED},
    {"history account 0", {.op = OLTP_OP_HISTORY, .limit = 1}, OLTP_ST_BAD_ACCOUNT},
    {"begin", {.op = OLTP_OP_BEGIN}, OLTP_ST_OK},
    {"commit", {.op = OLTP_OP_COMMIT, .session = 9}, OLTP_ST_OK},
    {"abort", {.op = OLTP_OP_ABORT, .session = 9}, OLTP_ST_OK},
    {"ping", {.op = OLTP_OP_PING}, OLTP_ST_OK},
    {"op 0", {.op = 0}, OLTP_ST_UNKNOWN_OP},
    {"op 11", {.op = 11, .account = 1}, OLTP_ST_UNKNOWN_OP},
};

START_TEST(check_validates_values)
{
    const struct check_case *c = &check_cases[_i];

    ck_assert_msg(oltp_req_check(&c->r) == c->want, "%s: %u, want %u", c->name,
                  oltp_req_check(&c->r), c->want);
}
END_TEST

struct idem_case {
    const char *name;
    struct oltp_req r;
    bool want;
};

static const struct idem_case idem_cases[] = {
    {"balance", {.op = OLTP_OP_BALANCE, .account = 1}, true},
    {"history", {.op = OLTP_OP_HISTORY, .account = 1, .limit = 5}, true},
    {"ping", {.op = OLTP_OP_PING}, true},
    {"deposit with key", {.op = OLTP_OP_DEPOSIT, .account = 1, .amount = 1, KEY}, true},
    {"deposit without key", {.op = OLTP_OP_DEPOSIT, .account = 1, .amount = 1}, false},
    {"withdraw with key", {.op = OLTP_OP_WITHDRAW, .account = 1, .amount = 1, .key[15] = 9}, true},
    {"withdraw without key", {.op = OLTP_OP_WITHDRAW, .account = 1, .amount = 1}, false},
    {"transfer with key", {.op = OLTP_OP_TRANSFER, .account = 1, .to = 2, .amount = 1, KEY}, true},
    {"transfer without key", {.op = OLTP_OP_TRANSFER, .account = 1, .to = 2, .amount = 1}, false},
    {"open", {.op = OLTP_OP_OPEN, .account = 1}, false},
    {"begin", {.op = OLTP_OP_BEGIN}, false},
    {"commit", {.op = OLTP_OP_COMMIT, .session = 3}, false},
    {"abort", {.op = OLTP_OP_ABORT, .session = 3}, false},
    {"keyed deposit in a session",
     {.op = OLTP_OP_DEPOSIT, .session = 3, .account = 1, .amount = 1, KEY},
     false},
    {"keyed transfer in a session",
     {.op = OLTP_OP_TRANSFER, .session = 3, .account = 1, .to = 2, .amount = 1, KEY},
     false},
    {"balance in a session", {.op = OLTP_OP_BALANCE, .session = 3, .account = 1}, false},
    {"unknown op", {.op = 42}, false},
};

START_TEST(idempotent_requests_are_reads_ping_and_keyed_writes)
{
    const struct idem_case *c = &idem_cases[_i];

    ck_assert_msg(oltp_req_is_idempotent(&c->r) == c->want, "%s", c->name);
}
END_TEST

START_TEST(every_op_and_status_has_a_distinct_name)
{
    for (unsigned a = OLTP_OP_OPEN; a <= OLTP_OP_PING; a++) {
        ck_assert_ptr_nonnull(oltp_op_name(a));
        ck_assert_str_ne(oltp_op_name(a), "unknown");
        for (unsigned b = OLTP_OP_OPEN; b < a; b++)
            ck_assert_str_ne(oltp_op_name(a), oltp_op_name(b));
    }
    ck_assert_str_eq(oltp_op_name(OLTP_OP_TRANSFER), "transfer");
    ck_assert_str_eq(oltp_op_name(OLTP_OP_BALANCE), "balance");
    ck_assert_str_eq(oltp_op_name(0), "unknown");
    ck_assert_str_eq(oltp_op_name(OLTP_OP_PING + 1), "unknown");
    ck_assert_str_eq(oltp_op_name(OLTP_REPLY | OLTP_OP_PING), "unknown");
    ck_assert_str_eq(oltp_op_name(~0u), "unknown");

    for (unsigned a = 0; a < OLTP_ST_COUNT; a++) {
        ck_assert_ptr_nonnull(oltp_status_name(a));
        ck_assert_str_ne(oltp_status_name(a), "unknown status");
        for (unsigned b = 0; b < a; b++)
            ck_assert_str_ne(oltp_status_name(a), oltp_status_name(b));
    }
    ck_assert_str_eq(oltp_status_name(OLTP_ST_OK), "ok");
    ck_assert_str_eq(oltp_status_name(OLTP_ST_INSUFFICIENT), "insufficient funds");
    ck_assert_str_eq(oltp_status_name(OLTP_ST_COUNT), "unknown status");
    ck_assert_str_eq(oltp_status_name(~0u), "unknown status");
}
END_TEST

#define N(a) (int)(sizeof(a) / sizeof((a)[0]))

Suite *oltp_proto_suite(void);
Suite *oltp_proto_suite(void)
{
    Suite *s = suite_create("oltp_proto");
    TCase *req = tcase_create("request");
    TCase *rep = tcase_create("reply");
    TCase *val = tcase_create("values");

    tcase_add_checked_fixture(req, NULL, teardown);
    tcase_add_loop_test(req, request_of_every_op_round_trips, 0, OLTP_OP_PING);
    tcase_add_test(req, request_bytes_follow_the_documented_layout);
    tcase_add_loop_test(req, every_prefix_of_a_request_is_eagain, 0, OLTP_OP_PING);
    tcase_add_test(req, decoder_reads_nothing_at_length_zero);
    tcase_add_loop_test(req, request_decoder_refuses_a_bad_header, 0, N(bad_req_headers));
    tcase_add_test(req, oversize_len_is_refused_from_the_header_alone);
    tcase_add_loop_test(req, wrong_body_size_is_malformed_and_skipped_whole, 0, OLTP_OP_PING);
    tcase_add_test(req, unknown_op_is_reported_and_skipped_whole);
    tcase_add_test(req, frames_back_to_back_decode_in_order);
    tcase_add_loop_test(req, request_encoder_never_writes_past_cap, 0, OLTP_OP_PING);
    tcase_add_test(req, request_encoder_refuses_an_unknown_op);
    suite_add_tcase(s, req);

    tcase_add_checked_fixture(rep, NULL, teardown);
    tcase_add_loop_test(rep, reply_of_every_shape_round_trips, 0, N(reply_cases));
    tcase_add_test(rep, reply_bytes_follow_the_documented_layout);
    tcase_add_loop_test(rep, reply_decoder_refuses_a_body_that_does_not_match, 0, N(bad_replies));
    tcase_add_loop_test(rep, reply_decoder_refuses_a_bad_header, 0, N(bad_reply_headers));
    tcase_add_test(rep, reply_encoder_refuses_an_illegal_reply);
    suite_add_tcase(s, rep);

    tcase_add_loop_test(val, check_validates_values, 0, N(check_cases));
    tcase_add_loop_test(val, idempotent_requests_are_reads_ping_and_keyed_writes, 0, N(idem_cases));
    tcase_add_test(val, every_op_and_status_has_a_distinct_name);
    suite_add_tcase(s, val);
    return s;
}

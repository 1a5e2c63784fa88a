/*
 * proto.c - the transaction service's wire protocol (contract and strictness
 * decisions in proto.h). Called by the gateway, the ledger and the load
 * generator on whichever thread holds the bytes; owns nothing, allocates
 * nothing, keeps no state between calls.
 *
 * Every read goes through get_u16/32/64 at an offset already checked against
 * the frame's length, and the frame's length is checked against len before the
 * body is touched: the decoders never read past buf[len). The header is judged
 * byte by byte as it arrives (magic, kind, flags, then len), so a prefix of a
 * frame either fails as the whole frame fails or returns -EAGAIN, and a stream
 * that is not ours is refused at its first wrong byte, not after 24 of them.
 */
#include "proto.h"

#include <errno.h>
#include <string.h>

#define OFF_KIND    2
#define OFF_FLAGS   3
#define OFF_LEN     4
#define OFF_ID      8
#define OFF_SESSION 16

#define HIST_ENTRY_SIZE 24

/* Request body sizes by op (1..OLTP_OP_PING; is_req_op() guards the index). */
static const int req_body_size[] = {
    [OLTP_OP_OPEN] = 8,
    [OLTP_OP_DEPOSIT] = 8 + 8 + OLTP_KEY_SIZE,
    [OLTP_OP_WITHDRAW] = 8 + 8 + OLTP_KEY_SIZE,
    [OLTP_OP_TRANSFER] = 8 + 8 + 8 + OLTP_KEY_SIZE,
    [OLTP_OP_BALANCE] = 8,
    [OLTP_OP_HISTORY] = 8 + 4,
    [OLTP_OP_BEGIN] = 0,
    [OLTP_OP_COMMIT] = 0,
    [OLTP_OP_ABORT] = 0,
    [OLTP_OP_PING] = 0,
};

static const char *const op_names[] = {
    [OLTP_OP_OPEN] = "open",         [OLTP_OP_DEPOSIT] = "deposit", [OLTP_OP_WITHDRAW] = "withdraw",
    [OLTP_OP_TRANSFER] = "transfer", [OLTP_OP_BALANCE] = "balance", [OLTP_OP_HISTORY] = "history",
    [OLTP_OP_BEGIN] = "begin",       [OLTP_OP_COMMIT] = "commit",   [OLTP_OP_ABORT] = "abort",
    [OLTP_OP_PING] = "ping",
};

static const char *const status_names[OLTP_ST_COUNT] = {
    [OLTP_ST_OK] = "ok",
    [OLTP_ST_QUEUED] = "queued",
    [OLTP_ST_MALFORMED] = "malformed request",
    [OLTP_ST_UNKNOWN_OP] = "unknown operation",
    [OLTP_ST_BAD_ACCOUNT] = "bad account id",
    [OLTP_ST_BAD_AMOUNT] = "bad amount",
    [OLTP_ST_NO_ACCOUNT] = "no such account",
    [OLTP_ST_EXISTS] = "account exists",
    [OLTP_ST_INSUFFICIENT] = "insufficient funds",
    [OLTP_ST_NO_SESSION] = "no such session",
    [OLTP_ST_SESSION_BUSY] = "session busy",
    [OLTP_ST_NOT_IN_SESSION] = "not allowed in a session",
    [OLTP_ST_TOO_LARGE] = "too large",
    [OLTP_ST_KEY_REUSED] = "idempotency key reused",
    [OLTP_ST_NEED_KEY] = "idempotency key required",
    [OLTP_ST_UNAVAILABLE] = "unavailable, not applied",
    [OLTP_ST_IN_DOUBT] = "outcome in doubt",
    [OLTP_ST_INTERNAL] = "internal error, not applied",
    [OLTP_ST_TOO_MANY_SESSIONS] = "too many sessions",
};

static bool is_req_op(unsigned op)
{
    return op >= OLTP_OP_OPEN && op <= OLTP_OP_PING;
}

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    put_u32(p, (uint32_t)(v >> 32));
    put_u32(p + 4, (uint32_t)v);
}

/* Two's complement both ways, without the implementation-defined conversion of an
 * out-of-range unsigned value to a signed type. */
static int64_t get_i64(const uint8_t *p)
{
    uint64_t u = get_u64(p);

    return u <= INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

static void put_i64(uint8_t *p, int64_t v)
{
    put_u64(p, (uint64_t)v);
}

static bool is_kind_legal(uint8_t kind, bool want_reply)
{
    if (want_reply)
        return (kind & OLTP_REPLY) != 0 && (kind & ~OLTP_REPLY) != 0;
    return kind != 0 && (kind & OLTP_REPLY) == 0;
}

/* The header checks shared by both decoders and oltp_frame_peek: the frame's
 * size once it is whole in buf[0..len), -EAGAIN before, -EBADMSG at the first
 * header byte that cannot start a legal frame. */
static ssize_t frame_size(const uint8_t *p, size_t len, bool want_reply)
{
    uint32_t body;

    if (len >= 1 && p[0] != OLTP_MAGIC0)
        return -EBADMSG;
    if (len >= 2 && p[1] != OLTP_MAGIC1)
        return -EBADMSG;
    if (len > OFF_KIND && !is_kind_legal(p[OFF_KIND], want_reply))
        return -EBADMSG;
    if (len > OFF_FLAGS && p[OFF_FLAGS] != 0)
        return -EBADMSG;
    if (len < OFF_LEN + 4)
        return -EAGAIN;
    body = get_u32(p + OFF_LEN);
    if (body > OLTP_MAX_BODY)
        return -EBADMSG;
    if (len < OLTP_HEADER_SIZE + (size_t)body)
        return -EAGAIN;
    return OLTP_HEADER_SIZE + (ssize_t)body;
}

ssize_t oltp_frame_peek(const void *buf, size_t len, bool want_reply, uint64_t *id,
                        uint64_t *session, uint8_t *kind)
{
    const uint8_t *p = buf;
    ssize_t n = frame_size(p, len, want_reply);

    if (n < 0)
        return n;
    if (id != NULL)
        *id = get_u64(p + OFF_ID);
    if (session != NULL)
        *session = get_u64(p + OFF_SESSION);
    if (kind != NULL)
        *kind = p[OFF_KIND];
    return n;
}

ssize_t oltp_req_decode(const void *buf, size_t len, struct oltp_req *r, uint16_t *status)
{
    const uint8_t *p = buf;
    ssize_t n = frame_size(p, len, false);
    const uint8_t *b = p + OLTP_HEADER_SIZE;
    size_t body;

    if (n < 0)
        return n;
    body = (size_t)n - OLTP_HEADER_SIZE;
    memset(r, 0, sizeof(*r));
    r->op = p[OFF_KIND];
    r->id = get_u64(p + OFF_ID);
    r->session = get_u64(p + OFF_SESSION);
    if (!is_req_op(r->op)) {
        *status = OLTP_ST_UNKNOWN_OP;
        return n;
    }
    if (body != (size_t)req_body_size[r->op]) {
        *status = OLTP_ST_MALFORMED;
        return n;
    }
    switch (r->op) {
    case OLTP_OP_OPEN:
    case OLTP_OP_BALANCE:
        r->account = get_u64(b);
        break;
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
        r->account = get_u64(b);
        r->amount = get_i64(b + 8);
        memcpy(r->key, b + 16, OLTP_KEY_SIZE);
        break;
    case OLTP_OP_TRANSFER:
        r->account = get_u64(b);
        r->to = get_u64(b + 8);
        r->amount = get_i64(b + 16);
        memcpy(r->key, b + 24, OLTP_KEY_SIZE);
        break;
    case OLTP_OP_HISTORY:
        r->account = get_u64(b);
        r->limit = get_u32(b + 8);
        break;
    default:
        break;
    }
    *status = OLTP_ST_OK;
    return n;
}

static void put_header(uint8_t *p, uint8_t kind, size_t body, uint64_t id, uint64_t session)
{
    p[0] = OLTP_MAGIC0;
    p[1] = OLTP_MAGIC1;
    p[OFF_KIND] = kind;
    p[OFF_FLAGS] = 0;
    put_u32(p + OFF_LEN, (uint32_t)body);
    put_u64(p + OFF_ID, id);
    put_u64(p + OFF_SESSION, session);
}

size_t oltp_req_encode(const struct oltp_req *r, void *buf, size_t cap)
{
    uint8_t *p = buf;
    uint8_t *b = p + OLTP_HEADER_SIZE;
    size_t body;

    if (!is_req_op(r->op))
        return 0;
    body = (size_t)req_body_size[r->op];
    if (cap < OLTP_HEADER_SIZE + body)
        return 0;
    put_header(p, r->op, body, r->id, r->session);
    switch (r->op) {
    case OLTP_OP_OPEN:
    case OLTP_OP_BALANCE:
        put_u64(b, r->account);
        break;
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
        put_u64(b, r->account);
        put_i64(b + 8, r->amount);
        memcpy(b + 16, r->key, OLTP_KEY_SIZE);
        break;
    case OLTP_OP_TRANSFER:
        put_u64(b, r->account);
        put_u64(b + 8, r->to);
        put_i64(b + 16, r->amount);
        memcpy(b + 24, r->key, OLTP_KEY_SIZE);
        break;
    case OLTP_OP_HISTORY:
        put_u64(b, r->account);
        put_u32(b + 8, r->limit);
        break;
    default:
        break;
    }
    return OLTP_HEADER_SIZE + body;
}

/* The reply body's size for op and status (and count for a HISTORY OK), or 0 when
 * that combination has no body: an unknown status, or OK for an unknown op. */
static size_t reply_body_size(unsigned op, unsigned status, uint32_t count)
{
    if (status >= OLTP_ST_COUNT || !(op >= 1 && op < OLTP_REPLY))
        return 0;
    if (status != OLTP_ST_OK)
        return 2;
    switch (op) {
    case OLTP_OP_OPEN:
    case OLTP_OP_BEGIN:
    case OLTP_OP_ABORT:
    case OLTP_OP_PING:
        return 2;
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
    case OLTP_OP_TRANSFER:
    case OLTP_OP_BALANCE:
        return 2 + 8;
    case OLTP_OP_COMMIT:
        return 2 + 4;
    case OLTP_OP_HISTORY:
        if (count > OLTP_MAX_HISTORY)
            return 0;
        return 2 + 4 + (size_t)count * HIST_ENTRY_SIZE;
    default:
        return 0;
    }
}

ssize_t oltp_reply_decode(const void *buf, size_t len, struct oltp_reply *r)
{
    const uint8_t *p = buf;
    ssize_t n = frame_size(p, len, true);
    const uint8_t *b = p + OLTP_HEADER_SIZE;
    size_t body;
    uint8_t op;
    uint16_t status;
    uint32_t count = 0;

    if (n < 0)
        return n;
    body = (size_t)n - OLTP_HEADER_SIZE;
    op = p[OFF_KIND] & (uint8_t)~OLTP_REPLY;
    if (body < 2)
        return -EBADMSG;
    status = get_u16(b);
    /* The count is read only once the body is known to hold it. */
    if (op == OLTP_OP_HISTORY && status == OLTP_ST_OK) {
        if (body < 2 + 4)
            return -EBADMSG;
        count = get_u32(b + 2);
    }
    if (reply_body_size(op, status, count) != body)
        return -EBADMSG;
    r->op = op;
    r->id = get_u64(p + OFF_ID);
    r->session = get_u64(p + OFF_SESSION);
    r->status = status;
    r->balance = 0;
    r->count = 0;
    if (status != OLTP_ST_OK)
        return n;
    switch (op) {
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
    case OLTP_OP_TRANSFER:
    case OLTP_OP_BALANCE:
        r->balance = get_i64(b + 2);
        break;
    case OLTP_OP_COMMIT:
        r->count = get_u32(b + 2);
        break;
    case OLTP_OP_HISTORY:
        r->count = count;
        for (uint32_t i = 0; i < count; i++) {
            const uint8_t *e = b + 6 + (size_t)i * HIST_ENTRY_SIZE;

            r->hist[i].txn = get_u64(e);
            r->hist[i].delta = get_i64(e + 8);
            r->hist[i].other = get_u64(e + 16);
        }
        break;
    default:
        break;
    }
    return n;
}

size_t oltp_reply_encode(const struct oltp_reply *r, void *buf, size_t cap)
{
    uint8_t *p = buf;
    uint8_t *b = p + OLTP_HEADER_SIZE;
    size_t body = reply_body_size(r->op, r->status, r->count);

    if (body == 0 || cap < OLTP_HEADER_SIZE + body)
        return 0;
    put_header(p, (uint8_t)(OLTP_REPLY | r->op), body, r->id, r->session);
    put_u16(b, r->status);
    if (r->status != OLTP_ST_OK)
        return OLTP_HEADER_SIZE + body;
    switch (r->op) {
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
    case OLTP_OP_TRANSFER:
    case OLTP_OP_BALANCE:
        put_i64(b + 2, r->balance);
        break;
    case OLTP_OP_COMMIT:
        put_u32(b + 2, r->count);
        break;
    case OLTP_OP_HISTORY:
        put_u32(b + 2, r->count);
        for (uint32_t i = 0; i < r->count; i++) {
            uint8_t *e = b + 6 + (size_t)i * HIST_ENTRY_SIZE;

            put_u64(e, r->hist[i].txn);
            put_i64(e + 8, r->hist[i].delta);
            put_u64(e + 16, r->hist[i].other);
        }
        break;
    default:
        break;
    }
    return OLTP_HEADER_SIZE + body;
}

static bool is_account(uint64_t id)
{
    return id >= 1 && id <= OLTP_MAX_ACCOUNT;
}

static bool is_amount(int64_t amount)
{
    return amount >= 1 && amount <= OLTP_MAX_AMOUNT;
}

static bool has_key(const struct oltp_req *r)
{
    static const uint8_t none[OLTP_KEY_SIZE];

    return memcmp(r->key, none, OLTP_KEY_SIZE) != 0;
}

uint16_t oltp_req_check(const struct oltp_req *r)
{
    switch (r->op) {
    case OLTP_OP_OPEN:
    case OLTP_OP_BALANCE:
        return is_account(r->account) ? OLTP_ST_OK : OLTP_ST_BAD_ACCOUNT;
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
        if (!is_account(r->account))
            return OLTP_ST_BAD_ACCOUNT;
        return is_amount(r->amount) ? OLTP_ST_OK : OLTP_ST_BAD_AMOUNT;
    case OLTP_OP_TRANSFER:
        if (!is_account(r->account) || !is_account(r->to) || r->account == r->to)
            return OLTP_ST_BAD_ACCOUNT;
        if (!is_amount(r->amount))
            return OLTP_ST_BAD_AMOUNT;
        return has_key(r) ? OLTP_ST_OK : OLTP_ST_NEED_KEY;
    case OLTP_OP_HISTORY:
        if (!is_account(r->account))
            return OLTP_ST_BAD_ACCOUNT;
        return r->limit >= 1 && r->limit <= OLTP_MAX_HISTORY ? OLTP_ST_OK : OLTP_ST_MALFORMED;
    case OLTP_OP_BEGIN:
    case OLTP_OP_COMMIT:
    case OLTP_OP_ABORT:
    case OLTP_OP_PING:
        return OLTP_ST_OK;
    default:
        return OLTP_ST_UNKNOWN_OP;
    }
}

bool oltp_req_is_idempotent(const struct oltp_req *r)
{
    if (r->session != 0)
        return false;
    switch (r->op) {
    case OLTP_OP_BALANCE:
    case OLTP_OP_HISTORY:
    case OLTP_OP_PING:
        return true;
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
    case OLTP_OP_TRANSFER:
        return has_key(r);
    default:
        return false;
    }
}

const char *oltp_op_name(unsigned op)
{
    return is_req_op(op) ? op_names[op] : "unknown";
}

const char *oltp_status_name(unsigned status)
{
    return status < OLTP_ST_COUNT ? status_names[status] : "unknown status";
}

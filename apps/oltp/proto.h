/*
 * proto.h - the transaction service's wire protocol: framed,
 * binary, big-endian, a request id in every frame so that many requests
 * share one connection and replies come back in any order. Spoken by
 * clients to cabrank-gateway and cabrank-ledger, and by the gateway to the
 * ledgers. Pure functions: no I/O, no allocation, no state between calls
 * (the decoders have picohttpparser's shape).
 *
 * A frame is a 24-byte header and a body of `len` bytes:
 *
 *   offset size field
 *   0      2    magic      0xCB 0x01
 *   2      1    kind       a request op (1..127) or 0x80 | op for its reply
 *   3      1    flags      0 (others reserved: a frame with any set is malformed)
 *   4      4    len        body bytes, <= OLTP_MAX_BODY
 *   8      8    id         request id, chosen by the sender; a reply repeats it
 *   16     8    session    0, or the session the request belongs to
 *
 * Request bodies (u64/i64 big-endian; key = 16 bytes):
 *   OPEN      account u64
 *   DEPOSIT   account u64, amount i64, key
 *   WITHDRAW  account u64, amount i64, key
 *   TRANSFER  from u64, to u64, amount i64, key
 *   BALANCE   account u64
 *   HISTORY   account u64, limit u32
 *   BEGIN, COMMIT, ABORT, PING: empty
 * A key of 16 zero bytes is "none". A body of another size than its op's is
 * malformed (OLTP_ST_MALFORMED), the frame is still skipped whole.
 *
 * Reply bodies start with status u16, then, when the status is OLTP_ST_OK:
 *   OPEN: nothing; DEPOSIT, WITHDRAW, BALANCE: balance i64 (after);
 *   TRANSFER: balance i64 (of from, after); HISTORY: count u32 then count
 *   entries of {txn u64, delta i64, other u64 (0: none)}, newest first;
 *   BEGIN: nothing (the session id is the header's); COMMIT: ops u32
 *   applied; ABORT, PING: nothing. OLTP_ST_QUEUED (an op inside a session)
 *   carries nothing. An error status carries nothing.
 *
 * Strictness (decisions of proto.c):
 * - The header is judged byte by byte as it arrives: a wrong magic byte, kind
 *   or flags gives -EBADMSG as soon as that byte is in buf, and len over
 *   OLTP_MAX_BODY as soon as its 4 bytes are (before the body arrives). So a
 *   prefix of a frame gives -EAGAIN or the whole frame's -EBADMSG.
 * - Kinds 0 and 0x80 are no frame of either direction (-EBADMSG). A request
 *   kind 1..127 that is no enum oltp_op is OLTP_ST_UNKNOWN_OP, not -EBADMSG.
 * - A reply of an unknown status (>= OLTP_ST_COUNT) is -EBADMSG; an error
 *   status is legal for any op 1..127 (the reply to OLTP_ST_UNKNOWN_OP repeats
 *   the unknown op); OLTP_ST_OK for an op not in the enum is -EBADMSG.
 * - HISTORY's limit 0 or over OLTP_MAX_HISTORY is OLTP_ST_MALFORMED, from
 *   oltp_req_check (the frame itself is well formed).
 */
#ifndef CABRANK_OLTP_PROTO_H
#define CABRANK_OLTP_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define OLTP_HEADER_SIZE 24
#define OLTP_MAGIC0      0xCB
#define OLTP_MAGIC1      0x01
/* The largest body of any frame: a HISTORY reply of OLTP_MAX_HISTORY. */
#define OLTP_MAX_BODY    4096
#define OLTP_MAX_FRAME   (OLTP_HEADER_SIZE + OLTP_MAX_BODY)
#define OLTP_MAX_HISTORY 100
#define OLTP_KEY_SIZE    16
/* Amounts are positive integers (cents) up to this; balances fit in i64. */
#define OLTP_MAX_AMOUNT 1000000000000LL
/* Account ids are 1..OLTP_MAX_ACCOUNT. */
#define OLTP_MAX_ACCOUNT 1000000000000ULL
/* Ops queued in one session before it refuses more (OLTP_ST_TOO_LARGE). */
#define OLTP_MAX_SESSION_OPS 64

enum oltp_op {
    OLTP_OP_OPEN = 1,
    OLTP_OP_DEPOSIT = 2,
    OLTP_OP_WITHDRAW = 3,
    OLTP_OP_TRANSFER = 4,
    OLTP_OP_BALANCE = 5,
    OLTP_OP_HISTORY = 6,
    OLTP_OP_BEGIN = 7,
    OLTP_OP_COMMIT = 8,
    OLTP_OP_ABORT = 9,
    OLTP_OP_PING = 10,
};
#define OLTP_REPLY 0x80

enum oltp_status {
    OLTP_ST_OK = 0,
    OLTP_ST_QUEUED = 1,        /* accepted into the session; applied at COMMIT */
    OLTP_ST_MALFORMED = 2,     /* body size wrong for the op; HISTORY limit 0 or > max */
    OLTP_ST_UNKNOWN_OP = 3,    /* kind is no request op */
    OLTP_ST_BAD_ACCOUNT = 4,   /* id 0 or over OLTP_MAX_ACCOUNT, or from == to */
    OLTP_ST_BAD_AMOUNT = 5,    /* <= 0 or over OLTP_MAX_AMOUNT */
    OLTP_ST_NO_ACCOUNT = 6,    /* the account does not exist */
    OLTP_ST_EXISTS = 7,        /* OPEN of an account that exists */
    OLTP_ST_INSUFFICIENT = 8,  /* the balance would go negative */
    OLTP_ST_NO_SESSION = 9,    /* unknown, expired, committed or aborted session */
    OLTP_ST_SESSION_BUSY = 10, /* another request of the session is in progress */
    OLTP_ST_NOT_IN_SESSION =
        11,                  /* op not allowed inside a session (BALANCE, HISTORY, OPEN, BEGIN) */
    OLTP_ST_TOO_LARGE = 12,  /* session over OLTP_MAX_SESSION_OPS */
    OLTP_ST_KEY_REUSED = 13, /* idempotency key seen with other arguments */
    OLTP_ST_NEED_KEY = 14,   /* TRANSFER without a key */
    /* Not applied, safe to retry: the gateway has no live back end, or the
     * ledger's database failed and it refuses every request. */
    OLTP_ST_UNAVAILABLE = 15,
    /* The outcome is unknown (applied or not): the gateway's back end died
     * with it in flight and it was not idempotent, or the ledger's commit
     * failed in a way that may have left it durable (a failed sync, the
     * database connection lost at COMMIT). Resend only with its key. */
    OLTP_ST_IN_DOUBT = 16,
    OLTP_ST_INTERNAL = 17, /* database error; known not to be applied */
    /* BEGIN refused: the connection, or the server, holds as many open sessions as it may;
     * end one (COMMIT, ABORT) or retry later. */
    OLTP_ST_TOO_MANY_SESSIONS = 18,
};
#define OLTP_ST_COUNT 19

struct oltp_req {
    uint8_t op; /* enum oltp_op */
    uint64_t id;
    uint64_t session;
    uint64_t account; /* OPEN..HISTORY; TRANSFER: from */
    uint64_t to;      /* TRANSFER */
    int64_t amount;   /* DEPOSIT, WITHDRAW, TRANSFER */
    uint32_t limit;   /* HISTORY */
    uint8_t key[OLTP_KEY_SIZE];
};

struct oltp_hist {
    uint64_t txn;
    int64_t delta;
    uint64_t other;
};

struct oltp_reply {
    uint8_t op; /* the request's op */
    uint64_t id;
    uint64_t session;
    uint16_t status; /* enum oltp_status */
    int64_t balance; /* DEPOSIT, WITHDRAW, TRANSFER, BALANCE */
    uint32_t count;  /* HISTORY: entries in hist; COMMIT: ops applied */
    struct oltp_hist hist[OLTP_MAX_HISTORY];
};

/*
 * Decodes the request frame at buf[0..len). Returns the frame's size (> 0)
 * with *r filled and *status OLTP_ST_OK, or the frame's size with *status
 * an error (MALFORMED, UNKNOWN_OP: answer it with that status, the stream
 * goes on; r->op, id and session are set); -EAGAIN when the frame is not
 * whole yet; -EBADMSG when the stream is unusable (bad magic, flags, a
 * reply kind, len over OLTP_MAX_BODY): close the connection. Validates the
 * frame, not the values (oltp_req_check). Fields the op does not carry are
 * zeroed (so is the key of an op without one). Thread-safe.
 */
ssize_t oltp_req_decode(const void *buf, size_t len, struct oltp_req *r, uint16_t *status);

/* Encodes r into buf; returns its size, or 0 if cap is too small or r->op
 * is not a request op (nothing is written then). Thread-safe. */
size_t oltp_req_encode(const struct oltp_req *r, void *buf, size_t cap);

/*
 * Decodes the reply frame at buf[0..len): its size (> 0), -EAGAIN, or
 * -EBADMSG (bad header, a request kind, a body that does not match the op
 * and status, a HISTORY count over OLTP_MAX_HISTORY). On success balance and
 * count are zeroed when the reply does not carry them; hist[count..] is left
 * untouched. On failure *r is untouched. Thread-safe.
 */
ssize_t oltp_reply_decode(const void *buf, size_t len, struct oltp_reply *r);

/* Encodes r (status-dependent body) into buf; its size, or 0 if cap is too
 * small or r is no legal reply (op 0 or over 127, status >= OLTP_ST_COUNT,
 * OLTP_ST_OK for an unknown op, a HISTORY count over OLTP_MAX_HISTORY);
 * nothing is written then. Thread-safe. */
size_t oltp_reply_encode(const struct oltp_reply *r, void *buf, size_t cap);

/*
 * Reads only the header at buf[0..len): the frame's size and its id, for
 * code that forwards frames without decoding them (the gateway's bound
 * pool decoder). Same returns as oltp_reply_decode's header checks; want_reply
 * says which kind is legal. Like the decoders it returns -EAGAIN until the
 * whole frame (header and body) is in buf; id, session and kind (each may be
 * NULL) are set only when it returns a size. Thread-safe.
 */
ssize_t oltp_frame_peek(const void *buf, size_t len, bool want_reply, uint64_t *id,
                        uint64_t *session, uint8_t *kind);

/*
 * The value checks the gateway makes before forwarding and the ledger makes
 * again: account ids in range and from != to, amounts in range, a key on
 * TRANSFER. OLTP_ST_OK or the error status. The first failing check wins,
 * in this order: accounts (BAD_ACCOUNT), amount (BAD_AMOUNT), key
 * (NEED_KEY), HISTORY's limit (MALFORMED). BEGIN, COMMIT, ABORT and PING
 * carry no values: OK (their session is the session manager's business). An
 * op not in the enum: OLTP_ST_UNKNOWN_OP. Thread-safe.
 */
uint16_t oltp_req_check(const struct oltp_req *r);

/*
 * Whether a request may be sent again after its back end died with it in
 * flight, with no risk of applying it twice: reads, PING, and DEPOSIT,
 * WITHDRAW and TRANSFER carrying a key (the ledger applies a key once).
 * Session ops are not (the session lived in the dead back end). Thread-safe.
 */
bool oltp_req_is_idempotent(const struct oltp_req *r);

/* "transfer", "balance"... or "unknown". */
const char *oltp_op_name(unsigned op);
/* "ok", "insufficient funds"... or "unknown status". */
const char *oltp_status_name(unsigned status);

#endif /* CABRANK_OLTP_PROTO_H */

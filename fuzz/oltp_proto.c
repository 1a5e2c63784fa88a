/*
 * fuzz/oltp_proto.c - libFuzzer target for the transaction service's wire protocol
 * (apps/oltp/proto.c). The input is read twice as a stream of frames: once as requests,
 * once as replies. Each frame that decodes is encoded again and must give back exactly
 * its bytes (the encoding is canonical), and decoding those gives the same fields; the
 * frame less its last byte must be -EAGAIN; oltp_frame_peek must agree with the
 * decoders. Then the input's first bytes, taken as a struct oltp_req / oltp_reply, go
 * through the encoders into a buffer of a fuzzed capacity: nothing is written past it,
 * and whatever encodes decodes to the same fields. Any mismatch aborts. Build and run:
 * make fuzz FUZZ_SECONDS=60.
 *
 * Corpus fuzz/corpus/oltp_proto/ (our own): seed-req-* and seed-reply-* are frames
 * written once through the encoders: every request op and reply shape (HISTORY empty,
 * with 3 and with 100 entries, errors, QUEUED), streams of frames back to back (a
 * session, replies out of order, a malformed frame then a good one, a partial tail) and
 * malformed variants (magic, flags, kinds 0 and 0x80 and of the other direction, len over
 * the limit, short and long bodies, unknown ops and statuses, a HISTORY count over the
 * limit or truncated); found-* are small inputs the fuzzer found that added coverage;
 * crash-* would be reproducers. Dictionary fuzz/oltp_proto.dict (our own).
 */
#include "../apps/oltp/proto.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(bool ok)
{
    if (!ok)
        abort();
}

static bool is_req_op(unsigned op)
{
    return op >= OLTP_OP_OPEN && op <= OLTP_OP_PING;
}

static bool req_eq(const struct oltp_req *a, const struct oltp_req *b)
{
    return a->op == b->op && a->id == b->id && a->session == b->session &&
           a->account == b->account && a->to == b->to && a->amount == b->amount &&
           a->limit == b->limit && memcmp(a->key, b->key, OLTP_KEY_SIZE) == 0;
}

static bool reply_eq(const struct oltp_reply *a, const struct oltp_reply *b)
{
    if (a->op != b->op || a->id != b->id || a->session != b->session || a->status != b->status ||
        a->balance != b->balance || a->count != b->count)
        return false;
    if (a->op != OLTP_OP_HISTORY || a->status != OLTP_ST_OK)
        return true;
    for (uint32_t i = 0; i < a->count; i++) {
        if (a->hist[i].txn != b->hist[i].txn || a->hist[i].delta != b->hist[i].delta ||
            a->hist[i].other != b->hist[i].other)
            return false;
    }
    return true;
}

/* A copy of data[0..len) in a buffer of exactly len bytes, so that ASan sees a
 * read past it (the fuzzer's own input is one such buffer, a frame inside it is
 * not). */
static uint8_t *exact_copy(const uint8_t *data, size_t len)
{
    uint8_t *p = malloc(len ? len : 1);

    if (p != NULL && len > 0)
        memcpy(p, data, len);
    return p;
}

static void check_requests(const uint8_t *p, size_t rem)
{
    static struct oltp_req r;
    static struct oltp_req again;
    static uint8_t out[OLTP_MAX_FRAME];

    for (;;) {
        uint16_t status = 0xffff;
        ssize_t n = oltp_req_decode(p, rem, &r, &status);
        ssize_t peek = oltp_frame_peek(p, rem, false, NULL, NULL, NULL);
        uint8_t *copy;

        require(peek == n);
        if (n < 0) {
            require(n == -EAGAIN || n == -EBADMSG);
            require(status == 0xffff);
            return;
        }
        require(n >= OLTP_HEADER_SIZE && (size_t)n <= rem && n <= OLTP_MAX_FRAME);

        /* Stateless, no look-ahead: the frame less its last byte waits. */
        copy = exact_copy(p, (size_t)n - 1);
        if (copy != NULL) {
            uint16_t st = 0xffff;

            require(oltp_req_decode(copy, (size_t)n - 1, &again, &st) == -EAGAIN);
            free(copy);
        }

        require(r.op == p[2]);
        if (status == OLTP_ST_UNKNOWN_OP) {
            require(!is_req_op(r.op));
        } else if (status == OLTP_ST_MALFORMED) {
            require(is_req_op(r.op));
            /* A well-formed frame of that op has another size. */
            require(oltp_req_encode(&r, out, sizeof(out)) != (size_t)n);
        } else {
            uint16_t st = 0xffff;
            uint16_t check = oltp_req_check(&r);

            require(status == OLTP_ST_OK && is_req_op(r.op));
            require(oltp_req_encode(&r, out, sizeof(out)) == (size_t)n);
            require(memcmp(out, p, (size_t)n) == 0);
            require(oltp_req_decode(out, (size_t)n, &again, &st) == n && st == OLTP_ST_OK);
            require(req_eq(&r, &again));
            require(check < OLTP_ST_COUNT && check != OLTP_ST_UNKNOWN_OP);
            /* A keyless TRANSFER never passes the check. */
            require(!(check == OLTP_ST_OK && r.op == OLTP_OP_TRANSFER) ||
                    oltp_req_is_idempotent(&r) == (r.session == 0));
        }
        p += n;
        rem -= (size_t)n;
    }
}

static void check_replies(const uint8_t *p, size_t rem)
{
    static struct oltp_reply r;
    static struct oltp_reply again;
    static uint8_t out[OLTP_MAX_FRAME];

    for (;;) {
        ssize_t n = oltp_reply_decode(p, rem, &r);
        uint64_t id;
        uint8_t kind;
        ssize_t peek = oltp_frame_peek(p, rem, true, &id, NULL, &kind);
        uint8_t *copy;

        if (n < 0) {
            require(n == -EAGAIN || n == -EBADMSG);
            /* The body may be what is wrong: the header alone can still be fine. */
            require(peek == n || (n == -EBADMSG && peek > 0));
            return;
        }
        require(peek == n && id == r.id && kind == (OLTP_REPLY | r.op));
        require(n >= OLTP_HEADER_SIZE + 2 && (size_t)n <= rem && n <= OLTP_MAX_FRAME);
        require(r.status < OLTP_ST_COUNT);
        require(r.op == OLTP_OP_COMMIT || r.count <= OLTP_MAX_HISTORY);

        copy = exact_copy(p, (size_t)n - 1);
        if (copy != NULL) {
            require(oltp_reply_decode(copy, (size_t)n - 1, &again) == -EAGAIN);
            free(copy);
        }

        require(oltp_reply_encode(&r, out, sizeof(out)) == (size_t)n);
        require(memcmp(out, p, (size_t)n) == 0);
        require(oltp_reply_decode(out, (size_t)n, &again) == n);
        require(reply_eq(&r, &again));
        p += n;
        rem -= (size_t)n;
    }
}

/* Encodes a struct made of fuzz bytes into exactly cap bytes: nothing past cap,
 * and whatever encodes decodes to the same fields. */
static void check_encoders(const uint8_t *data, size_t size)
{
    static struct oltp_req r;
    static struct oltp_req back;
    static struct oltp_reply rep;
    static struct oltp_reply rep_back;
    size_t cap;
    uint8_t *buf;
    size_t n;
    uint16_t status;

    if (size < 2)
        return;
    cap = (size_t)data[0] << 8 | data[1];
    cap %= OLTP_MAX_FRAME + 1;
    data += 2;
    size -= 2;
    buf = malloc(cap ? cap : 1);
    if (buf == NULL)
        return;

    /* The struct's bytes from the input, as many as there are; zeros after. */
    memset(&r, 0, sizeof(r));
    memcpy(&r, data, size < sizeof(r) ? size : sizeof(r));
    n = oltp_req_encode(&r, buf, cap);
    require(n <= cap);
    if (n > 0) {
        require(oltp_req_decode(buf, n, &back, &status) == (ssize_t)n && status == OLTP_ST_OK);
        require(back.op == r.op && back.id == r.id && back.session == r.session);
        /* What the op carries survives; the rest decodes as zero. */
        require(oltp_req_encode(&back, buf, cap) == n);
        require(back.account == 0 || back.account == r.account);
        require(back.amount == 0 || back.amount == r.amount);
    }

    memset(&rep, 0, sizeof(rep));
    memcpy(&rep, data, size < sizeof(rep) ? size : sizeof(rep));
    n = oltp_reply_encode(&rep, buf, cap);
    require(n <= cap);
    if (n > 0) {
        require(oltp_reply_decode(buf, n, &rep_back) == (ssize_t)n);
        require(rep_back.op == rep.op && rep_back.status == rep.status);
        require(rep_back.id == rep.id && rep_back.session == rep.session);
        require(oltp_reply_encode(&rep_back, buf, cap) == n);
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_requests(data, size);
    check_replies(data, size);
    check_encoders(data, size);
    return 0;
}

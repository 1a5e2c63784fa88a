/*
 * test_conn_output.c - the output-segment queue of a connection
 * (src/net/conn_output.c) against its contract in service.h and
 * conn_internal.h: writes, references and file ranges go out in the order
 * queued; consecutive copies merge; reserve/commit queues what was used;
 * cr__conn_next_output describes the head of the queue within its limits;
 * partial sends resume inside a segment; every release callback runs once,
 * sent or dropped; a nested driver call on the same thread leaves the outer
 * connection's staged output intact; a closing connection's output is
 * dropped. Most tests drive the connection as a proactor does
 * (cr__conn_feed, cr__conn_next_output, cr__conn_sent), which shows the
 * queue without sending it; one sends it over a socketpair.
 */
#include "net/conn_internal.h"

#include <cabrank/handle_set.h>

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* What the service does on input (per test); c is the connection fed. */
static void (*script)(struct cr_conn *c);
static ssize_t script_result; /* what input returns; 0: all it was given */
static int released[4];       /* release callbacks run, by arg */
static size_t pending_seen;   /* cr_conn_pending at the end of the script */

/* Each test starts from a clean script, even when Check does not fork. */
static void reset(void)
{
    script = NULL;
    script_result = 0;
    memset(released, 0, sizeof(released));
    pending_seen = 0;
}

static void count_release(void *arg)
{
    released[(intptr_t)arg]++;
}

static ssize_t script_input(void *ctx, void *state, struct cr_conn *c, const char *data, size_t len)
{
    (void)ctx;
    (void)state;
    (void)data;
    script(c);
    pending_seen = cr_conn_pending(c);
    return script_result != 0 ? script_result : (ssize_t)len;
}

static const struct cr_service script_svc = {.name = "script", .input = script_input};

/* A connection over one end of a socketpair; *peer is the other end. */
static struct cr_conn *open_conn_cfg(const struct cr__conn_config *cfg, int *peer)
{
    struct cr_conn *c = NULL;
    int sv[2];

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    ck_assert_int_eq(cr__conn_create(&c, sv[0], cfg), 0);
    *peer = sv[1];
    return c;
}

static struct cr_conn *open_conn(int *peer)
{
    struct cr__conn_config cfg = {.svc = &script_svc};

    return open_conn_cfg(&cfg, peer);
}

/* Feeds one byte of input, so that the script runs. */
static enum cr__conn_next run_script(struct cr_conn *c, void (*fn)(struct cr_conn *c))
{
    script = fn;
    return cr__conn_feed(c, "x", 1, 0);
}

/* Everything queued, in order, as the completion path sends it: appends it
 * to buf (cap bytes at most) and marks it sent. Returns its length. */
static size_t take_all(struct cr_conn *c, char *buf, size_t cap)
{
    size_t got = 0;
    struct cr__conn_out out;

    while (cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, SIZE_MAX) == 0) {
        ck_assert_int_eq(out.file_fd, -1);
        ck_assert_int_gt(out.iovcnt, 0);
        for (int i = 0; i < out.iovcnt; i++) {
            ck_assert_uint_le(got + out.iov[i].iov_len, cap);
            memcpy(buf + got, out.iov[i].iov_base, out.iov[i].iov_len);
            got += out.iov[i].iov_len;
        }
        cr__conn_sent(c, out.len, 0);
    }
    return got;
}

/* The whole of out's memory, as one NUL-terminated string in buf. */
static const char *iov_string(const struct cr__conn_out *out, char *buf, size_t cap)
{
    size_t n = 0;

    for (int i = 0; i < out->iovcnt; i++) {
        ck_assert_uint_lt(n + out->iov[i].iov_len, cap);
        memcpy(buf + n, out->iov[i].iov_base, out->iov[i].iov_len);
        n += out->iov[i].iov_len;
    }
    buf[n] = '\0';
    return buf;
}

static void write_str(struct cr_conn *c, const char *s)
{
    ck_assert_int_eq(cr_conn_write(c, s, strlen(s)), 0);
}

/* ------------------------------------------------------------------ memory */

static void hello_world(struct cr_conn *c)
{
    write_str(c, "hello");
    write_str(c, " world");
}

START_TEST(consecutive_writes_merge_into_one_segment)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    struct cr__conn_out out;
    char buf[64];

    ck_assert_int_eq(run_script(c, hello_world), CR__CONN_WRITE);
    ck_assert_uint_eq(pending_seen, 11);
    ck_assert_uint_eq(cr_conn_pending(c), 11);
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, SIZE_MAX), 0);
    ck_assert_int_eq(out.iovcnt, 1);
    ck_assert_uint_eq(out.len, 11);
    ck_assert_int_eq(out.file_fd, -1);
    ck_assert(!out.more);
    ck_assert_str_eq(iov_string(&out, buf, sizeof(buf)), "hello world");
    ck_assert_int_eq(cr__conn_sent(c, 11, 0), CR__CONN_READ);
    ck_assert_uint_eq(cr_conn_pending(c), 0);
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, SIZE_MAX), -ENODATA);
    ck_assert_uint_eq(cr__conn_bytes_out(c), 11);
    cr__conn_destroy(c);
    close(peer);
}
END_TEST

static const char ref_data[] = "BB";

static void copy_ref_copy(struct cr_conn *c)
{
    write_str(c, "a");
    ck_assert_int_eq(cr_conn_write_ref(c, ref_data, 2, count_release, (void *)1), 0);
    write_str(c, "c");
}

START_TEST(a_reference_keeps_its_place_and_is_not_copied)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    struct cr__conn_out out;
    char buf[64];

    ck_assert_int_eq(run_script(c, copy_ref_copy), CR__CONN_WRITE);
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, SIZE_MAX), 0);
    ck_assert_int_eq(out.iovcnt, 3);
    ck_assert_uint_eq(out.len, 4);
    ck_assert_ptr_eq(out.iov[1].iov_base, ref_data);
    ck_assert_str_eq(iov_string(&out, buf, sizeof(buf)), "aBBc");
    /* Released once sent, not before. */
    ck_assert_int_eq(cr__conn_sent(c, 2, 0), CR__CONN_WRITE);
    ck_assert_int_eq(released[1], 0);
    ck_assert_int_eq(cr__conn_sent(c, 1, 0), CR__CONN_WRITE);
    ck_assert_int_eq(released[1], 1);
    ck_assert_int_eq(cr__conn_sent(c, 1, 0), CR__CONN_READ);
    cr__conn_destroy(c);
    ck_assert_int_eq(released[1], 1);
    close(peer);
}
END_TEST

static void reserve_some(struct cr_conn *c)
{
    char *p = cr_conn_reserve(c, 100);

    ck_assert_ptr_nonnull(p);
    memcpy(p, "abcdef", 6);
    cr_conn_commit(c, 3);
}

static void reserve_none(struct cr_conn *c)
{
    ck_assert_ptr_nonnull(cr_conn_reserve(c, 100));
    cr_conn_commit(c, 0);
}

START_TEST(commit_queues_only_what_was_used)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    struct cr__conn_out out;
    char buf[64];

    ck_assert_int_eq(run_script(c, reserve_some), CR__CONN_WRITE);
    ck_assert_uint_eq(pending_seen, 3);
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, SIZE_MAX), 0);
    ck_assert_str_eq(iov_string(&out, buf, sizeof(buf)), "abc");
    ck_assert_int_eq(cr__conn_sent(c, 3, 0), CR__CONN_READ);
    /* Nothing used: nothing queued, nothing to send. */
    ck_assert_int_eq(run_script(c, reserve_none), CR__CONN_READ);
    ck_assert_uint_eq(pending_seen, 0);
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, SIZE_MAX), -ENODATA);
    ck_assert(cr__conn_is_idle(c));
    cr__conn_destroy(c);
    close(peer);
}
END_TEST

#define BIG (100 * 1024) /* more than the staging buffer */

static char pattern(size_t i)
{
    return (char)(i * 13 + i / 255);
}

static void reserve_big(struct cr_conn *c)
{
    char *p = cr_conn_reserve(c, BIG);

    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < BIG; i++)
        p[i] = pattern(i);
    cr_conn_commit(c, BIG);
}

START_TEST(a_reserve_larger_than_the_staging_buffer_is_queued_whole)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    static char buf[BIG];

    ck_assert_int_eq(run_script(c, reserve_big), CR__CONN_WRITE);
    ck_assert_uint_eq(pending_seen, BIG);
    ck_assert_uint_eq(take_all(c, buf, sizeof(buf)), BIG);
    for (size_t i = 0; i < BIG; i++)
        ck_assert_int_eq(buf[i], pattern(i));
    cr__conn_destroy(c);
    close(peer);
}
END_TEST

#define HALF (40 * 1024) /* two of them overflow the staging buffer */

static void two_halves(struct cr_conn *c)
{
    static char a[HALF];
    static char b[HALF];

    memset(a, 'a', sizeof(a));
    memset(b, 'b', sizeof(b));
    ck_assert_int_eq(cr_conn_write(c, a, sizeof(a)), 0);
    ck_assert_int_eq(cr_conn_write(c, b, sizeof(b)), 0);
    write_str(c, "end");
}

START_TEST(writes_that_overflow_the_staging_buffer_keep_their_order)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    static char buf[2 * HALF + 3];

    ck_assert_int_eq(run_script(c, two_halves), CR__CONN_WRITE);
    ck_assert_uint_eq(pending_seen, 2 * HALF + 3);
    ck_assert_uint_eq(take_all(c, buf, sizeof(buf)), sizeof(buf));
    for (size_t i = 0; i < HALF; i++) {
        ck_assert_int_eq(buf[i], 'a');
        ck_assert_int_eq(buf[HALF + i], 'b');
    }
    ck_assert(memcmp(buf + 2 * HALF, "end", 3) == 0);
    cr__conn_destroy(c);
    close(peer);
}
END_TEST

#define MANY 70 /* more than CR__CONN_OUT_IOV, and than the inline segments */

static char many_data[MANY];

static void many_refs(struct cr_conn *c)
{
    for (int i = 0; i < MANY; i++) {
        many_data[i] = (char)('0' + i % 64);
        ck_assert_int_eq(cr_conn_write_ref(c, &many_data[i], 1, count_release, (void *)2), 0);
    }
}

START_TEST(next_output_returns_at_most_its_iovec_limit_in_order)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    struct cr__conn_out out;
    char buf[MANY];

    ck_assert_int_eq(run_script(c, many_refs), CR__CONN_WRITE);
    ck_assert_uint_eq(pending_seen, MANY);
    ck_assert_int_eq(cr__conn_next_output(c, &out, 1000, SIZE_MAX), 0);
    ck_assert_int_eq(out.iovcnt, CR__CONN_OUT_IOV);
    ck_assert_uint_eq(out.len, CR__CONN_OUT_IOV);
    for (int i = 0; i < out.iovcnt; i++)
        ck_assert_ptr_eq(out.iov[i].iov_base, &many_data[i]);
    ck_assert_uint_eq(take_all(c, buf, sizeof(buf)), MANY);
    ck_assert(memcmp(buf, many_data, MANY) == 0);
    ck_assert_int_eq(released[2], MANY);
    cr__conn_destroy(c);
    close(peer);
}
END_TEST

static void three_refs(struct cr_conn *c)
{
    ck_assert_int_eq(cr_conn_write_ref(c, "aaa", 3, NULL, NULL), 0);
    ck_assert_int_eq(cr_conn_write_ref(c, "bbb", 3, NULL, NULL), 0);
    ck_assert_int_eq(cr_conn_write_ref(c, "ccc", 3, NULL, NULL), 0);
}

START_TEST(next_output_respects_max_iov_and_max_len_without_changing_the_queue)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    struct cr__conn_out out;
    char buf[64];

    ck_assert_int_eq(run_script(c, three_refs), CR__CONN_WRITE);
    ck_assert_int_eq(cr__conn_next_output(c, &out, 2, SIZE_MAX), 0);
    ck_assert_int_eq(out.iovcnt, 2);
    ck_assert_str_eq(iov_string(&out, buf, sizeof(buf)), "aaabbb");
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, 4), 0);
    ck_assert_int_eq(out.iovcnt, 2);
    ck_assert_uint_eq(out.len, 4);
    ck_assert_str_eq(iov_string(&out, buf, sizeof(buf)), "aaab");
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, 0), -ENODATA);
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, SIZE_MAX), 0);
    ck_assert_uint_eq(out.len, 9);
    ck_assert_uint_eq(cr_conn_pending(c), 9);
    cr__conn_destroy(c);
    close(peer);
}
END_TEST

static void abcdef(struct cr_conn *c)
{
    write_str(c, "abcdef");
}

START_TEST(a_partial_send_resumes_inside_the_segment)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    struct cr__conn_out out;
    char buf[64];

    ck_assert_int_eq(run_script(c, abcdef), CR__CONN_WRITE);
    ck_assert_int_eq(cr__conn_sent(c, 2, 0), CR__CONN_WRITE);
    ck_assert_uint_eq(cr_conn_pending(c), 4);
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, SIZE_MAX), 0);
    ck_assert_str_eq(iov_string(&out, buf, sizeof(buf)), "cdef");
    ck_assert_int_eq(cr__conn_sent(c, 4, 0), CR__CONN_READ);
    ck_assert_uint_eq(cr__conn_bytes_out(c), 6);
    cr__conn_destroy(c);
    close(peer);
}
END_TEST

/* ------------------------------------------------------------------ files */

static int file_fd = -1;

static void head_file_tail(struct cr_conn *c)
{
    write_str(c, "HEAD");
    ck_assert_int_eq(cr_conn_write_file(c, file_fd, 10, 20, count_release, (void *)3), 0);
    write_str(c, "TAIL");
}

START_TEST(a_file_range_follows_the_memory_before_it)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    struct cr__conn_out out;
    char buf[64];

    file_fd = 42; /* never read: the queue only describes it */
    ck_assert_int_eq(run_script(c, head_file_tail), CR__CONN_WRITE);
    ck_assert_uint_eq(pending_seen, 28);
    /* Memory first, marked as followed by a file (MSG_MORE). */
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, SIZE_MAX), 0);
    ck_assert_int_eq(out.iovcnt, 1);
    ck_assert(out.more);
    ck_assert_int_eq(out.file_fd, -1);
    ck_assert_str_eq(iov_string(&out, buf, sizeof(buf)), "HEAD");
    ck_assert_int_eq(cr__conn_sent(c, 4, 0), CR__CONN_WRITE);
    /* Then the range, alone, within max_len. */
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, 8), 0);
    ck_assert_int_eq(out.file_fd, 42);
    ck_assert_int_eq(out.iovcnt, 0);
    ck_assert_int_eq((int)out.file_off, 10);
    ck_assert_uint_eq(out.len, 8);
    ck_assert_int_eq(cr__conn_sent(c, 5, 0), CR__CONN_WRITE);
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, SIZE_MAX), 0);
    ck_assert_int_eq((int)out.file_off, 15);
    ck_assert_uint_eq(out.len, 15);
    ck_assert_int_eq(released[3], 0);
    ck_assert_int_eq(cr__conn_sent(c, 15, 0), CR__CONN_WRITE);
    ck_assert_int_eq(released[3], 1);
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, SIZE_MAX), 0);
    ck_assert(!out.more);
    ck_assert_str_eq(iov_string(&out, buf, sizeof(buf)), "TAIL");
    ck_assert_int_eq(cr__conn_sent(c, 4, 0), CR__CONN_READ);
    cr__conn_destroy(c);
    ck_assert_int_eq(released[3], 1);
    close(peer);
}
END_TEST

/* Over a socketpair, as the readiness driver sends it: memory by send,
 * the range by sendfile, in order. */
START_TEST(memory_and_file_reach_the_peer_in_order)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    FILE *f = tmpfile();
    char buf[64];
    ssize_t n;

    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs("0123456789abcdefghijklmnopqrstuvwxyz", f), 0);
    ck_assert_int_eq(fflush(f), 0);
    file_fd = fileno(f);
    script = head_file_tail;
    ck_assert_int_eq(write(peer, "x", 1), 1);
    ck_assert_int_eq(cr__conn_handle(c, CR_EV_READ, 0), CR__CONN_READ);
    ck_assert_int_eq(released[3], 1);
    n = read(peer, buf, sizeof(buf) - 1);
    ck_assert_int_eq(n, 28);
    buf[n] = '\0';
    ck_assert_str_eq(buf, "HEADabcdefghijklmnopqrstTAIL");
    cr__conn_destroy(c);
    fclose(f);
    close(peer);
}
END_TEST

/* ------------------------------------------------------------------ edge cases */

static void empty_writes(struct cr_conn *c)
{
    ck_assert_int_eq(cr_conn_write(c, "", 0), 0);
    ck_assert_int_eq(cr_conn_write_ref(c, "", 0, count_release, (void *)1), 0);
    ck_assert_int_eq(released[1], 1);
    ck_assert_int_eq(cr_conn_write_file(c, 0, 0, 0, count_release, (void *)2), 0);
    ck_assert_int_eq(released[2], 1);
}

START_TEST(empty_writes_queue_nothing_and_release_at_once)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);

    ck_assert_int_eq(run_script(c, empty_writes), CR__CONN_READ);
    ck_assert_uint_eq(pending_seen, 0);
    ck_assert(cr__conn_is_idle(c));
    cr__conn_destroy(c);
    ck_assert_int_eq(released[1], 1);
    ck_assert_int_eq(released[2], 1);
    close(peer);
}
END_TEST

static void bad_files(struct cr_conn *c)
{
    ck_assert_int_eq(cr_conn_write_file(c, -1, 0, 10, count_release, (void *)1), -EINVAL);
    ck_assert_int_eq(released[1], 1);
    ck_assert_int_eq(cr_conn_write_file(c, 0, -1, 10, count_release, (void *)2), -EINVAL);
    ck_assert_int_eq(released[2], 1);
}

START_TEST(a_bad_file_range_is_refused_and_released)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);

    ck_assert_int_eq(run_script(c, bad_files), CR__CONN_READ);
    ck_assert_uint_eq(pending_seen, 0);
    cr__conn_destroy(c);
    ck_assert_int_eq(released[1], 1);
    ck_assert_int_eq(released[2], 1);
    close(peer);
}
END_TEST

static void ref_and_file(struct cr_conn *c)
{
    write_str(c, "copy");
    ck_assert_int_eq(cr_conn_write_ref(c, "ref", 3, count_release, (void *)1), 0);
    ck_assert_int_eq(cr_conn_write_file(c, 0, 0, 100, count_release, (void *)2), 0);
}

START_TEST(destroy_releases_what_was_not_sent_once)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);

    ck_assert_int_eq(run_script(c, ref_and_file), CR__CONN_WRITE);
    ck_assert_uint_eq(pending_seen, 107);
    ck_assert_int_eq(released[1], 0);
    ck_assert_int_eq(released[2], 0);
    cr__conn_destroy(c);
    ck_assert_int_eq(released[1], 1);
    ck_assert_int_eq(released[2], 1);
    close(peer);
}
END_TEST

static void write_then_fail(struct cr_conn *c)
{
    write_str(c, "partial");
    ck_assert_int_eq(cr_conn_write_ref(c, "ref", 3, count_release, (void *)1), 0);
    script_result = -EBADMSG;
}

START_TEST(a_failing_service_closes_and_its_output_is_dropped)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    char buf[16];

    ck_assert_int_eq(run_script(c, write_then_fail), CR__CONN_CLOSE);
    ck_assert_int_eq(released[1], 0);
    cr__conn_destroy(c);
    ck_assert_int_eq(released[1], 1);
    /* Nothing was sent. */
    ck_assert_int_eq(read(peer, buf, sizeof(buf)), 0);
    close(peer);
}
END_TEST

static void bye(struct cr_conn *c)
{
    write_str(c, "bye");
    cr_conn_close_after_flush(c);
}

START_TEST(close_after_flush_closes_once_the_output_is_sent)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    struct cr__conn_out out;
    char buf[16];

    ck_assert_int_eq(run_script(c, bye), CR__CONN_WRITE);
    ck_assert_int_eq(cr__conn_next_output(c, &out, CR__CONN_OUT_IOV, SIZE_MAX), 0);
    ck_assert_str_eq(iov_string(&out, buf, sizeof(buf)), "bye");
    ck_assert_int_eq(cr__conn_sent(c, 1, 0), CR__CONN_WRITE);
    ck_assert_int_eq(cr__conn_sent(c, 2, 0), CR__CONN_CLOSE);
    cr__conn_destroy(c);
    close(peer);
}
END_TEST

START_TEST(a_write_outside_a_driver_call_is_queued)
{
    int peer;
    struct cr_conn *c = open_conn(&peer);
    char buf[16];

    write_str(c, "late");
    write_str(c, "r");
    ck_assert_uint_eq(cr_conn_pending(c), 5);
    ck_assert_uint_eq(take_all(c, buf, sizeof(buf)), 5);
    ck_assert(memcmp(buf, "later", 5) == 0);
    cr__conn_destroy(c);
    close(peer);
}
END_TEST

/* ------------------------------------------------------------------ nesting */

static struct cr_conn *inner_conn;
static enum cr__conn_next inner_next;

static void inner(struct cr_conn *c)
{
    ck_assert_ptr_eq(c, inner_conn);
    write_str(c, "inner");
}

static void inner_fails(struct cr_conn *c)
{
    write_str(c, "doomed");
    script_result = -EBADMSG;
}

static void (*inner_script)(struct cr_conn *c);

/* The outer connection's script: stages, serves inner_conn on this thread
 * (the hybrid client/server's nested call), stages more. */
static void outer(struct cr_conn *c)
{
    write_str(c, "outer1");
    script = inner_script;
    inner_next = cr__conn_feed(inner_conn, "y", 1, 0);
    script = outer;
    script_result = 0;
    write_str(c, "+outer2");
}

START_TEST(a_nested_call_keeps_the_outer_connections_staged_output)
{
    int peer_a;
    int peer_b;
    struct cr_conn *a = open_conn(&peer_a);
    char buf[64];

    inner_conn = open_conn(&peer_b);
    inner_script = inner;
    ck_assert_int_eq(run_script(a, outer), CR__CONN_WRITE);
    ck_assert_uint_eq(pending_seen, 13);
    ck_assert_int_eq(inner_next, CR__CONN_WRITE);
    ck_assert_uint_eq(take_all(a, buf, sizeof(buf)), 13);
    ck_assert(memcmp(buf, "outer1+outer2", 13) == 0);
    ck_assert_uint_eq(take_all(inner_conn, buf, sizeof(buf)), 5);
    ck_assert(memcmp(buf, "inner", 5) == 0);
    cr__conn_destroy(inner_conn);
    cr__conn_destroy(a);
    close(peer_a);
    close(peer_b);
}
END_TEST

START_TEST(an_inner_connection_closing_leaves_the_outer_output_intact)
{
    int peer_a;
    int peer_b;
    struct cr_conn *a = open_conn(&peer_a);
    char buf[64];

    inner_conn = open_conn(&peer_b);
    inner_script = inner_fails;
    ck_assert_int_eq(run_script(a, outer), CR__CONN_WRITE);
    ck_assert_int_eq(inner_next, CR__CONN_CLOSE);
    cr__conn_destroy(inner_conn);
    ck_assert_uint_eq(take_all(a, buf, sizeof(buf)), 13);
    ck_assert(memcmp(buf, "outer1+outer2", 13) == 0);
    cr__conn_destroy(a);
    close(peer_a);
    close(peer_b);
}
END_TEST

/* ------------------------------------------------------------------ high water */

static int inputs;

/* Consumes one byte per call and answers it with 10. */
static ssize_t one_by_one(void *ctx, void *state, struct cr_conn *c, const char *data, size_t len)
{
    (void)ctx;
    (void)state;
    (void)len;
    inputs++;
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(cr_conn_write(c, data, 1), 0);
    return 1;
}

static const struct cr_service pipelined_svc = {.name = "pipelined", .input = one_by_one};

START_TEST(pipelined_input_waits_while_output_is_over_the_high_water_mark)
{
    struct cr__conn_config cfg = {.svc = &pipelined_svc, .output_high_water = 15};
    int peer;
    struct cr_conn *c = open_conn_cfg(&cfg, &peer);
    char buf[64];

    /* Two answers reach the mark: the third request waits. */
    ck_assert_int_eq(cr__conn_feed(c, "abc", 3, 0), CR__CONN_WRITE);
    ck_assert_int_eq(inputs, 2);
    ck_assert_uint_eq(cr_conn_pending(c), 20);
    ck_assert(!cr__conn_is_idle(c));
    ck_assert_uint_eq(take_all(c, buf, sizeof(buf)), 30);
    ck_assert_int_eq(inputs, 3);
    ck_assert(memcmp(buf, "aaaaaaaaaabbbbbbbbbbcccccccccc", 30) == 0);
    ck_assert(cr__conn_is_idle(c));
    cr__conn_destroy(c);
    close(peer);
}
END_TEST

Suite *conn_output_suite(void);
Suite *conn_output_suite(void)
{
    Suite *s = suite_create("conn_output");
    TCase *mem = tcase_create("memory");
    TCase *file = tcase_create("file");
    TCase *edge = tcase_create("edge");
    TCase *nest = tcase_create("nesting");

    tcase_add_test(mem, consecutive_writes_merge_into_one_segment);
    tcase_add_test(mem, a_reference_keeps_its_place_and_is_not_copied);
    tcase_add_test(mem, commit_queues_only_what_was_used);
    tcase_add_test(mem, a_reserve_larger_than_the_staging_buffer_is_queued_whole);
    tcase_add_test(mem, writes_that_overflow_the_staging_buffer_keep_their_order);
    tcase_add_test(mem, next_output_returns_at_most_its_iovec_limit_in_order);
    tcase_add_test(mem, next_output_respects_max_iov_and_max_len_without_changing_the_queue);
    tcase_add_test(mem, a_partial_send_resumes_inside_the_segment);
    tcase_add_checked_fixture(mem, reset, NULL);
    suite_add_tcase(s, mem);
    tcase_add_test(file, a_file_range_follows_the_memory_before_it);
    tcase_add_test(file, memory_and_file_reach_the_peer_in_order);
    tcase_add_checked_fixture(file, reset, NULL);
    suite_add_tcase(s, file);
    tcase_add_test(edge, empty_writes_queue_nothing_and_release_at_once);
    tcase_add_test(edge, a_bad_file_range_is_refused_and_released);
    tcase_add_test(edge, destroy_releases_what_was_not_sent_once);
    tcase_add_test(edge, a_failing_service_closes_and_its_output_is_dropped);
    tcase_add_test(edge, close_after_flush_closes_once_the_output_is_sent);
    tcase_add_test(edge, a_write_outside_a_driver_call_is_queued);
    tcase_add_test(edge, pipelined_input_waits_while_output_is_over_the_high_water_mark);
    tcase_add_checked_fixture(edge, reset, NULL);
    suite_add_tcase(s, edge);
    tcase_add_test(nest, a_nested_call_keeps_the_outer_connections_staged_output);
    tcase_add_test(nest, an_inner_connection_closing_leaves_the_outer_output_intact);
    tcase_add_checked_fixture(nest, reset, NULL);
    suite_add_tcase(s, nest);
    return s;
}

/*
 * conn_state_internal.h - the fields of struct cr_conn and the output
 * queue's calls, shared by the connection driver's two files: conn.c (input,
 * the readiness and completion drivers, lifecycle) and conn_output.c (the
 * output-segment queue, its thread-local staging buffer, cr_conn_write* and
 * the sends). Models see only conn_internal.h. Library-internal.
 *
 * A connection is used by one thread at a time (conn_internal.h), so no
 * field below has a lock.
 */
#ifndef CABRANK_CONN_STATE_INTERNAL_H
#define CABRANK_CONN_STATE_INTERNAL_H

#include "net/conn_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Segments a connection holds without allocating. */
#define CR__CONN_INLINE_SEGS 4

enum cr__conn_seg_kind {
    CR__SEG_STAGED = 1, /* tl_stage[pos..pos+len) of the staging connection */
    CR__SEG_HEAP,       /* p[0..len); block, if set, is freed once it is done */
    CR__SEG_REF,        /* p[0..len), borrowed until release(arg) */
    CR__SEG_FILE,       /* len bytes of fd from off, borrowed until release(arg) */
};

struct cr__conn_seg {
    enum cr__conn_seg_kind kind;
    size_t len; /* left to send */
    size_t pos;
    const char *p;
    void *block;
    int fd;
    off_t off;
    cr_release_fn *release;
    void *arg;
};

struct cr_conn {
    /* Immutable after create. */
    int fd;
    const struct cr_service *svc;
    struct cr_server *server;
    uint64_t idle_timeout_ns; /* 0: none */
    uint64_t default_send_timeout_ns;
    size_t high_water;
    uint64_t *srv_bytes_in;
    uint64_t *srv_bytes_out;
    uint64_t *srv_requests;
    void (*on_request)(void *arg);
    void *on_request_arg;

    /* Everything below: the serving thread only (one at a time). */
    void *state;
    unsigned worker;

    /* Input the service left unconsumed; NULL when there is none. */
    char *in;
    size_t in_len;
    size_t in_cap;
    /* in[] may be consumable now: data was added, output drained, or
     * feeding stopped at the high-water mark. */
    bool feed_again;

    /* Output (conn_output.c's; the driver reads seg_count, pending and
     * reserved): segs[seg_head .. seg_head + seg_count), oldest first. */
    struct cr__conn_seg *segs;
    unsigned seg_head;
    unsigned seg_count;
    unsigned seg_cap;
    size_t pending;
    char *reserved;     /* a cr_conn_reserve() too big for tl_stage */
    size_t send_budget; /* bytes sent per readiness call at most */

    bool close_after_flush;
    bool failed;   /* close at once, dropping output */
    bool peer_eof; /* read returned 0 */
    /* The current readiness call read less than it asked for: the socket
     * had nothing more then (see drive). */
    bool drained;
    /* The current call was told of a hang-up: read on to the end of input,
     * which a short read does not show. */
    bool hup;
    /* The last readiness call stopped where the socket would block for what
     * it waits for next, not at a budget (edge-triggered re-arming). */
    bool would_block;

    /* Deadlines: of the wait the last handle call returned. */
    enum cr__conn_next waiting; /* 0 before the first call */
    bool svc_input_deadline;    /* the service set input_deadline */
    bool send_timeout_changed;
    uint64_t input_deadline;
    uint64_t send_timeout_ns;
    uint64_t send_deadline;

    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t reported_in; /* already added to the server's counters */
    uint64_t reported_out;

    bool has_info;
    struct cr_conn_info info;

    struct cr__conn_seg inline_segs[CR__CONN_INLINE_SEGS];
};

/* Sets up the empty output queue of a new connection. */
void cr__conn_output_init(struct cr_conn *c);

/* Releases every queued segment (release callbacks run) and frees the queue.
 * c must not own the staging buffer. */
void cr__conn_output_fini(struct cr_conn *c);

/*
 * A driver call on c begins: c becomes the owner of the thread's staging
 * buffer, into which cr_conn_write and cr_conn_reserve format. A connection
 * that owned it (an outer call on this thread: nesting) first moves its
 * staged output to the heap. Returns that previous owner, for
 * cr__conn_stage_leave.
 */
struct cr_conn *cr__conn_stage_enter(struct cr_conn *c);

/*
 * The driver call on c ends: gives the staging buffer back to outer, keeping
 * c's staged output in the heap (keep; on -ENOMEM the output is lost and
 * c->failed set) or making it unsendable (c closes). Afterwards c's queue
 * refers to no thread-local memory.
 */
void cr__conn_stage_leave(struct cr_conn *c, struct cr_conn *outer, bool keep);

/* n bytes of the queue went out (n <= pending): advances it, releasing the
 * segments finished, and counts them in bytes_out. */
void cr__conn_consume_output(struct cr_conn *c, size_t n);

/*
 * Sends queued output on c->fd, at most *budget bytes, taking what it sends
 * off *budget: 0 once all is sent, -EAGAIN when the socket is full, -EBUSY
 * when the budget runs out first, or -errno.
 */
int cr__conn_flush(struct cr_conn *c, size_t *budget);

/* Releases every queued segment without sending it. */
void cr__conn_drop_output(struct cr_conn *c);

#endif /* CABRANK_CONN_STATE_INTERNAL_H */

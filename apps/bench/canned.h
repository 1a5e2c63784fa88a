/*
 * canned.h - the canned responders, cabrank-bench's two built-in peers (canned-epoll,
 * canned-uring): the machine's floor of server CPU per request. Not web servers: for every
 * "\r\n\r\n" a connection sends they owe one fixed 13-byte answer, so a request costs the
 * kernel's work for one recv and one send and almost nothing else. They run in the
 * cabrank-bench binary itself, re-executed by the lab as
 *     cabrank-bench --canned epoll|uring --listen 127.0.0.1:0
 * which prints "listening on 127.0.0.1:<port>" when it accepts, and exits 0 on TERM or INT.
 * canned.c holds the mode's entry, the listener, the request scanner and the answer bytes;
 * canned_epoll.c and canned_uring.c are the two backends. Each responder is one process of
 * one thread.
 */
#ifndef CABRANK_BENCH_CANNED_H
#define CABRANK_BENCH_CANNED_H

#include <cabrank/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ for the lab (main.c, peers.c) */

/* The peer names, as --peers takes them: "canned-epoll", "canned-uring". NULL-terminated. */
extern const char *const bench_canned_names[];

/* Whether name is one of bench_canned_names. */
bool bench_is_canned(const char *name);

/*
 * Whether the canned peer name can run on this machine: canned-uring needs liburing at build
 * time and an io_uring with IORING_SETUP_DEFER_TASKRUN and provided-buffer rings at run time
 * (Linux 6.1; a container's seccomp or kernel.io_uring_disabled refuses it). Otherwise fills
 * why (cap bytes) with the reason. Owner thread only (it may set up and tear down a ring).
 */
bool bench_canned_available(const char *name, char *why, size_t cap);

/*
 * The hidden mode: argv is "<prog> --canned MODE --listen 127.0.0.1:PORT". Serves until TERM
 * or INT. Returns the process's exit status: 0 after a signal, 2 for bad arguments, 3 when
 * the mode is not available here ("not available: <why>" on stderr), 1 on another error.
 */
int bench_canned_main(int argc, char **argv);

/* ------------------------------------------------------------ between the responder files */

/* What a connection's request bytes have shown so far; zeroed at accept. */
struct bench_canned_scan {
    uint8_t term;  /* bytes of "\r\n\r\n" matched at the end of what was scanned */
    uint8_t name;  /* bytes of "\nconnection:" matched; its length once inside the value */
    uint8_t value; /* bytes of "close" matched in the Connection value */
    bool close;    /* the head being scanned asked for Connection: close */
};

/*
 * Scans buf[0..len) of a connection for request heads. Returns how many ended in it, up to
 * and including the first that asked for Connection: close (case-insensitive, anywhere in the
 * header's value); *close is then set, and what follows it is not looked at: the connection
 * ends after that answer. Does not allocate; any thread.
 */
unsigned bench__canned_scan(struct bench_canned_scan *s, const char *buf, size_t len, bool *close);

/* The answers a connection owes: keep-alive answers, then perhaps one Connection: close. */
struct bench_canned_out {
    uint64_t owed;     /* bytes of keep-alive answers not yet sent */
    size_t pos;        /* offset in the keep-alive answer of the next of those bytes */
    size_t close_left; /* bytes of the Connection: close answer not yet sent (after owed) */
};

/* Adds answers keep-alive answers, the last of them a Connection: close answer if close. */
void bench__canned_owe(struct bench_canned_out *o, unsigned answers, bool close);

/*
 * The next bytes to send: *buf and the count, at most 64 answers, all from one kind of
 * answer; 0 when nothing is owed. The bytes are static; the count stays valid until
 * bench__canned_sent(), whatever bench__canned_owe() adds meanwhile.
 */
size_t bench__canned_next(const struct bench_canned_out *o, const void **buf);

/* Records that n bytes of what bench__canned_next() gave were sent (n at most its count). */
void bench__canned_sent(struct bench_canned_out *o, size_t n);

/* A backend: one per file, picked by name (epoll, uring). */
struct bench_canned_ops {
    const char *name;
    /* 0 when the backend can run here, else -errno with why filled (cap bytes). */
    int (*probe)(char *why, size_t cap);
    /*
     * Serves the listening socket lfd (non-blocking, TCP_NODELAY and TCP_DEFER_ACCEPT set)
     * until the signalfd sfd is readable. Returns 0 then, or -errno when it cannot go on.
     * Borrows both descriptors.
     */
    int (*serve)(int lfd, int sfd);
};

extern const struct bench_canned_ops bench__canned_epoll_ops;
#ifdef CR_HAVE_LIBURING
extern const struct bench_canned_ops bench__canned_uring_ops;
#endif /* CR_HAVE_LIBURING */

/* The per-connection state arrays' length: the descriptor limit, at most 65536 (a descriptor
 * at or above it is closed at accept). */
size_t bench__canned_max_fds(void);

#endif /* CABRANK_BENCH_CANNED_H */

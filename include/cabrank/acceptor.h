/*
 * acceptor.h - the Acceptor: accepts connections on a listening socket
 * registered with a cr_reactor and hands each new fd to a callback. The
 * listener is one-shot: the thread that handles its event accepts a batch
 * and then reactivates it, so it works under a single-threaded reactor and
 * under Leader/Followers alike. When accept fails with
 * EMFILE/ENFILE/ENOBUFS/ENOMEM the listener is paused and retried after a
 * back-off (doubling up to a cap) instead of spinning; it resumes by itself
 * once descriptors are free. Listening sockets themselves: listener.h.
 */
#ifndef CABRANK_ACCEPTOR_H
#define CABRANK_ACCEPTOR_H

#include <cabrank/common.h>

struct cr_reactor;
struct cr_acceptor;

/* Called with each accepted fd, which it takes. */
typedef void cr_acceptor_fn(struct cr_acceptor *a, int fd, void *arg);

struct cr_acceptor_config {
    int listen_fd;           /* borrowed; must outlive the acceptor */
    int batch;               /* accepts per event; 0 = 64 */
    unsigned backoff_min_ms; /* first pause after EMFILE; 0 = 10 */
    unsigned backoff_max_ms; /* cap of the doubling; 0 = 1000 */
};

/*
 * Registers cfg->listen_fd with r (borrowed) and calls fn(a, fd, arg) per
 * accepted connection, on whichever thread handles the listener's event.
 * -errno of cr_reactor_add. Thread-safe.
 */
CR_MUST_CHECK int cr_acceptor_create(struct cr_acceptor **out, struct cr_reactor *r,
                                     const struct cr_acceptor_config *cfg, cr_acceptor_fn *fn,
                                     void *arg);

/* Unregisters the listener (which stays open) and frees the acceptor;
 * NULL-safe. Stop every thread that handles the reactor's events first: an
 * event or back-off timer already taken by another thread would otherwise
 * still reach the freed acceptor. */
void cr_acceptor_destroy(struct cr_acceptor *a);

/* Stops accepting (e.g. at a connection limit) until cr_acceptor_resume().
 * Thread-safe. */
void cr_acceptor_pause(struct cr_acceptor *a);

/* Accepts again after cr_acceptor_pause(). Thread-safe. */
void cr_acceptor_resume(struct cr_acceptor *a);

/* Connections accepted so far. Thread-safe. */
uint64_t cr_acceptor_accepted(const struct cr_acceptor *a);

/* Times accept ran out of descriptors or memory and backed off. Thread-safe. */
uint64_t cr_acceptor_backoffs(const struct cr_acceptor *a);

#endif /* CABRANK_ACCEPTOR_H */

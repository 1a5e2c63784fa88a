/*
 * proactor_internal.h - what the proactor's common part (proactor.c: config
 * and lifecycle; proactor_token.c: tokens; proactor_dispatch*.c: completion
 * dispatchers) and its engines (proactor_uring.c, proactor_emulated.c: the
 * asynchronous operation processors) share. Library-internal.
 *
 * An engine instance is a ring. Its ops are called from any thread except
 * wait(), which only the ring's completion owner calls (the single thread,
 * the lf leader, or the ring's own thread under ring-per-thread), so an
 * engine consumes its completions single-threaded: resuming a partial send,
 * re-arming an accept or noting a splice's first half needs no lock there.
 *
 * Token state (struct cr_aop.state, atomic): CR__AOP_BUSY from a successful
 * start until the final completion is taken for dispatch; CR__AOP_CANCEL when
 * a cancel was asked since the start. An engine reads the token's fields after
 * an acquire load of state (cr__aop_state), which pairs with the release
 * cr__aop_publish of the thread that filled them: the kernel's completion
 * order orders them too, but TSan cannot see that.
 */
#ifndef CABRANK_PROACTOR_INTERNAL_H
#define CABRANK_PROACTOR_INTERNAL_H

#include <cabrank/proactor.h>

#define CR__AOP_BUSY   1
#define CR__AOP_CANCEL 2

/* Flags of struct cr_aop.flags. */
#define CR__AOPF_MULTISHOT 1u

enum cr__aop_kind {
    CR__AOP_ACCEPT = 1,
    CR__AOP_RECV,
    CR__AOP_SEND,
    CR__AOP_SENDV,
    CR__AOP_SENDFILE,
    CR__AOP_CONNECT,
    CR__AOP_TIMER,
    CR__AOP_POST,
};

/* One completion taken from a ring, ready for its handler. */
struct cr__completion {
    struct cr_aop *op;
    ssize_t res;
    unsigned flags; /* CR_AOP_MORE */
};

/* A ring: one engine instance. */
struct cr__ring {
    struct cr_proactor *p;
    unsigned index;
    void *engine; /* the engine's own state */
};

struct cr__engine_ops {
    const char *name;
    /*
     * Opens r->engine. -ENOSYS (with *why set to a static reason) when this
     * engine cannot run here. Before start only.
     */
    int (*open)(struct cr__ring *r, const struct cr_proactor_config *cfg, const char **why);
    /* Frees r->engine; operations still inside are dropped. Owner thread. */
    void (*close)(struct cr__ring *r);
    /*
     * Starts op (its fields set, published). Returns 0 or -errno (nothing
     * started). If op carries CR__AOP_CANCEL or the proactor stops, the
     * engine completes it with -ECANCELED instead, deciding under the same
     * lock cancel() takes, so no cancel is lost. The caller must not touch op
     * after a 0: it may have completed and been freed. Thread-safe.
     */
    int (*start)(struct cr__ring *r, struct cr_aop *op);
    /* Asks for op's cancellation (CR__AOP_CANCEL is already set). Thread-safe. */
    void (*cancel)(struct cr__ring *r, struct cr_aop *op);
    /* Cancels everything in flight (the proactor is stopping). Thread-safe. */
    void (*cancel_all)(struct cr__ring *r);
    /*
     * Waits for the next completion to hand to a handler: 1 and *c, or 0 when
     * woken by wake(). Ring's completion owner only.
     */
    int (*wait)(struct cr__ring *r, struct cr__completion *c);
    /* Makes one wait() return 0, now or at its next call. Thread-safe. */
    void (*wake)(struct cr__ring *r);
};

extern const struct cr__engine_ops cr__proactor_emulated_ops;
#ifdef CR_HAVE_LIBURING
extern const struct cr__engine_ops cr__proactor_uring_ops;
#endif

/* n more bytes of op's send, sendv or sendfile went out: advances done, and
 * a sendv's iovecs past them. True once all len bytes are sent. The thread
 * running op's current step only. */
bool cr__aop_advance(struct cr_aop *op, size_t n);

/* True once cr_proactor_stop was called. Thread-safe. */
bool cr__proactor_is_stopping(const struct cr_proactor *p);

/* The token's state word, acquire (pairs with cr__aop_publish). */
static inline int cr__aop_state(const struct cr_aop *op)
{
    return __atomic_load_n(&op->state, __ATOMIC_ACQUIRE);
}

/* Publishes the fields written so far to the thread that will take the
 * completion: a release RMW, so it never drops a concurrent CR__AOP_CANCEL. */
static inline void cr__aop_publish(struct cr_aop *op)
{
    (void)__atomic_fetch_or(&op->state, 0, __ATOMIC_RELEASE);
}

/* True when a cancel was asked for the running operation, or the proactor is
 * stopping. */
static inline bool cr__aop_is_cancelled(const struct cr_aop *op)
{
    return (cr__aop_state(op) & CR__AOP_CANCEL) != 0 || cr__proactor_is_stopping(op->p);
}

#endif /* CABRANK_PROACTOR_INTERNAL_H */

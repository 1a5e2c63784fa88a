/*
 * test_session.c - the Session Context Manager (src/pool/session.c): the
 * create/acquire/release/remove round trip and its errors (-ENOENT, -EBUSY,
 * -EAGAIN at max_sessions, -EMFILE at max_per_owner, the context left to the
 * caller; an owner's slots back on remove and expiry), expiry by
 * cr_session_expire and by the amortised sweep of create/acquire alone, with
 * checked-out sessions immune and free_ctx run once, outside the locks;
 * destroy freeing what is left; distinct ids; and two thread tests for TSan:
 * 8 threads creating (for one of three owners, or none), acquiring each
 * other's sessions, removing, against an expiring thread, with exact counts
 * (owners back to none at the end), and 4 workers continuing 64 sessions in
 * order.
 *
 * Expiry waits poll with a deadline scaled by CK_TIMEOUT_MULTIPLIER; the
 * short pauses in the poll loops only pace them.
 */
#include <cabrank/clock.h>
#include <cabrank/session.h>

#include "../support/support.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TIMEOUT_MS 50
#define MS         CR_NSEC_PER_MSEC
/* Why a check guarded by the time it took did not run (cr_test_skip). */
#define STALLED "this thread was stalled past the 50 ms timeout"

/* ms scaled for slow (sanitizer) builds, for waits that expect an event. */
static int tmo(int ms)
{
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    int k = m != NULL ? atoi(m) : 1;

    return ms * (k > 1 ? (k < 10 ? k : 10) : 1);
}

/* Paces a poll loop; never relied on for ordering. */
static void pause_us(long us)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000};

    nanosleep(&ts, NULL);
}

static uint64_t deadline_after_ms(int ms)
{
    return cr_clock_now_ns() + (uint64_t)tmo(ms) * MS;
}

/* Counts the contexts the manager frees (single-threaded tests). */
struct freed {
    unsigned calls;
};

static void count_free(void *ctx, void *arg)
{
    struct freed *f = arg;

    f->calls++;
    free(ctx);
}

/* A manager; contexts freed and counted in f (none freed when f is NULL). */
static struct cr_session_mgr *new_owned_mgr(uint64_t timeout_ms, unsigned max, unsigned per_owner,
                                            unsigned shards, struct freed *f)
{
    struct cr_session_config cfg = {
        .idle_timeout_ms = timeout_ms,
        .max_sessions = max,
        .max_per_owner = per_owner,
        .shards = shards,
        .free_ctx = f != NULL ? count_free : NULL,
        .free_arg = f,
    };
    struct cr_session_mgr *m = NULL;

    ck_assert_int_eq(cr_session_mgr_create(&m, &cfg), 0);
    ck_assert_ptr_nonnull(m);
    return m;
}

static struct cr_session_mgr *new_mgr(uint64_t timeout_ms, unsigned max, unsigned shards,
                                      struct freed *f)
{
    return new_owned_mgr(timeout_ms, max, 0, shards, f);
}

static struct cr_session_stats stats_of(struct cr_session_mgr *m)
{
    struct cr_session_stats st;

    cr_session_stats(m, &st);
    return st;
}

START_TEST(create_rejects_bad_config_and_takes_zero_as_defaults)
{
    struct cr_session_config cfg = {.shards = 65537};
    struct cr_session_mgr *m = (void *)1;

    ck_assert_int_eq(cr_session_mgr_create(&m, &cfg), -EINVAL);
    ck_assert_ptr_null(m);
    cfg = (struct cr_session_config){.idle_timeout_ms = UINT64_MAX / 1000};
    ck_assert_int_eq(cr_session_mgr_create(&m, &cfg), -EINVAL);
    ck_assert_ptr_null(m);
    /* Zero everywhere: defaults; 3 shards round up to 4. */
    cfg = (struct cr_session_config){0};
    ck_assert_int_eq(cr_session_mgr_create(&m, &cfg), 0);
    cr_session_mgr_destroy(m);
    cfg = (struct cr_session_config){.shards = 3};
    ck_assert_int_eq(cr_session_mgr_create(&m, &cfg), 0);
    cr_session_mgr_destroy(m);
    cr_session_mgr_destroy(NULL);
}
END_TEST

START_TEST(round_trip_keeps_the_context_across_checkouts)
{
    struct cr_session_mgr *m = new_mgr(0, 0, 0, NULL);
    int *ctx = malloc(sizeof(*ctx));
    void *got = NULL;
    uint64_t id = 0;
    struct cr_session_stats st;

    *ctx = 1;
    ck_assert_int_eq(cr_session_create(m, ctx, &id), 0);
    ck_assert_uint_ne(id, 0);
    st = stats_of(m);
    ck_assert_uint_eq(st.live, 1);
    ck_assert_uint_eq(st.acquired, 0);
    ck_assert_uint_eq(st.created, 1);

    ck_assert_int_eq(cr_session_acquire(m, id, &got), 0);
    ck_assert_ptr_eq(got, ctx);
    ck_assert_uint_eq(stats_of(m).acquired, 1);
    *(int *)got = 2;
    cr_session_release(m, id);
    ck_assert_uint_eq(stats_of(m).acquired, 0);

    got = NULL;
    ck_assert_int_eq(cr_session_acquire(m, id, &got), 0);
    ck_assert_ptr_eq(got, ctx);
    ck_assert_int_eq(*(int *)got, 2);
    got = NULL;
    ck_assert_int_eq(cr_session_remove(m, id, &got), 0);
    ck_assert_ptr_eq(got, ctx);
    st = stats_of(m);
    ck_assert_uint_eq(st.live, 0);
    ck_assert_uint_eq(st.acquired, 0);
    ck_assert_uint_eq(st.removed, 1);
    ck_assert_uint_eq(st.expired, 0);

    ck_assert_int_eq(cr_session_acquire(m, id, &got), -ENOENT);
    ck_assert_int_eq(cr_session_remove(m, id, &got), -ENOENT);
    free(ctx);
    cr_session_mgr_destroy(m);
}
END_TEST

START_TEST(acquire_of_an_unknown_id_fails_with_enoent)
{
    struct cr_session_mgr *m = new_mgr(0, 0, 4, NULL);
    void *got = (void *)1;
    uint64_t id;

    ck_assert_int_eq(cr_session_acquire(m, 0, &got), -ENOENT);
    ck_assert_int_eq(cr_session_acquire(m, 12345, &got), -ENOENT);
    ck_assert_int_eq(cr_session_create(m, NULL, &id), 0);
    ck_assert_int_eq(cr_session_acquire(m, id ^ 1, &got), -ENOENT);
    ck_assert_ptr_eq(got, (void *)1);
    cr_session_mgr_destroy(m);
}
END_TEST

START_TEST(release_of_an_id_not_held_and_remove_of_one_checked_in)
{
    struct cr_session_mgr *m = new_mgr(0, 0, 2, NULL);
    int ctx = 0;
    void *got = NULL;
    uint64_t id;

    ck_assert_int_eq(cr_session_create(m, &ctx, &id), 0);
    /* Ignored: unknown, then known but checked in. */
    cr_session_release(m, id ^ 1);
    cr_session_release(m, id);
    ck_assert_uint_eq(stats_of(m).acquired, 0);
    ck_assert_int_eq(cr_session_acquire(m, id, &got), 0);
    ck_assert_uint_eq(stats_of(m).acquired, 1);
    cr_session_release(m, id);
    /* Nobody holds it, so removing it without a checkout is safe. */
    got = NULL;
    ck_assert_int_eq(cr_session_remove(m, id, &got), 0);
    ck_assert_ptr_eq(got, &ctx);
    ck_assert_uint_eq(stats_of(m).live, 0);
    ck_assert_uint_eq(stats_of(m).acquired, 0);
    ck_assert_int_eq(cr_session_acquire(m, id, &got), -ENOENT);
    cr_session_mgr_destroy(m);
}
END_TEST

START_TEST(second_acquire_is_busy_while_checked_out_and_counted)
{
    struct cr_session_mgr *m = new_mgr(0, 0, 0, NULL);
    int ctx = 0;
    void *got = NULL;
    uint64_t id;

    ck_assert_int_eq(cr_session_create(m, &ctx, &id), 0);
    ck_assert_int_eq(cr_session_acquire(m, id, &got), 0);
    ck_assert_int_eq(cr_session_acquire(m, id, &got), -EBUSY);
    ck_assert_int_eq(cr_session_acquire(m, id, &got), -EBUSY);
    ck_assert_uint_eq(stats_of(m).busy, 2);
    ck_assert_uint_eq(stats_of(m).acquired, 1);
    cr_session_release(m, id);
    ck_assert_int_eq(cr_session_acquire(m, id, &got), 0);
    ck_assert_ptr_eq(got, &ctx);
    ck_assert_uint_eq(stats_of(m).busy, 2);
    cr_session_release(m, id);
    cr_session_mgr_destroy(m);
}
END_TEST

START_TEST(max_sessions_refuses_with_eagain_and_leaves_ctx_to_the_caller)
{
    struct freed f = {0};
    struct cr_session_mgr *m = new_mgr(0, 3, 2, &f);
    uint64_t ids[3];
    uint64_t extra = 0;
    void *got;
    char *spare = malloc(16);

    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(cr_session_create(m, malloc(8), &ids[i]), 0);
    ck_assert_int_eq(cr_session_create(m, spare, &extra), -EAGAIN);
    ck_assert_uint_eq(extra, 0);
    ck_assert_uint_eq(stats_of(m).live, 3);
    ck_assert_uint_eq(stats_of(m).created, 3);
    /* Still ours: LSan fails the test if this free is wrong or missing. */
    strcpy(spare, "still mine");
    /* A removal frees a slot. */
    ck_assert_int_eq(cr_session_acquire(m, ids[1], &got), 0);
    ck_assert_int_eq(cr_session_remove(m, ids[1], &got), 0);
    free(got);
    ck_assert_int_eq(cr_session_create(m, spare, &extra), 0);
    ck_assert_uint_ne(extra, 0);
    ck_assert_int_eq(cr_session_create(m, NULL, &ids[1]), -EAGAIN);
    cr_session_mgr_destroy(m);
    ck_assert_uint_eq(f.calls, 3);
}
END_TEST

START_TEST(max_per_owner_refuses_with_emfile_and_leaves_ctx_to_the_caller)
{
    struct freed f = {0};
    struct cr_session_mgr *m = new_owned_mgr(0, 100, 2, 0, &f);
    uint64_t a[2];
    uint64_t b[2];
    uint64_t extra = 0;
    uint64_t id;
    void *got;
    char *spare = malloc(16);

    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(cr_session_create_owned(m, malloc(8), 7, &a[i]), 0);
        ck_assert_int_eq(cr_session_create_owned(m, malloc(8), 8, &b[i]), 0);
    }
    ck_assert_int_eq(cr_session_create_owned(m, spare, 7, &extra), -EMFILE);
    ck_assert_uint_eq(extra, 0);
    ck_assert_int_eq(cr_session_create_owned(m, spare, 8, &extra), -EMFILE);
    /* Still ours: LSan fails the test if this free is wrong or missing. */
    strcpy(spare, "still mine");
    ck_assert_uint_eq(stats_of(m).owner_full, 2);
    ck_assert_uint_eq(stats_of(m).full, 0);
    ck_assert_uint_eq(stats_of(m).owners, 2);
    ck_assert_uint_eq(stats_of(m).live, 4);
    /* No owner, no per-owner cap: only max_sessions. */
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(cr_session_create(m, malloc(8), &id), 0);
    ck_assert_uint_eq(stats_of(m).owners, 2);
    /* Any connection may end a session; its slot goes back to its owner. */
    ck_assert_int_eq(cr_session_acquire(m, a[1], &got), 0);
    ck_assert_int_eq(cr_session_remove(m, a[1], &got), 0);
    free(got);
    ck_assert_int_eq(cr_session_create_owned(m, spare, 7, &a[1]), 0);
    ck_assert_int_eq(cr_session_create_owned(m, NULL, 7, &id), -EMFILE);
    /* An owner is forgotten with its last session. */
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(cr_session_remove(m, b[i], &got), 0);
        free(got);
    }
    ck_assert_uint_eq(stats_of(m).owners, 1);
    ck_assert_int_eq(cr_session_create_owned(m, malloc(8), 8, &b[0]), 0);
    ck_assert_uint_eq(stats_of(m).owners, 2);
    cr_session_mgr_destroy(m);
    ck_assert_uint_eq(f.calls, 2 + 5 + 1);
}
END_TEST

START_TEST(max_sessions_bounds_all_owners_together)
{
    struct freed f = {0};
    struct cr_session_mgr *m = new_owned_mgr(0, 3, 2, 0, &f);
    uint64_t id;

    ck_assert_int_eq(cr_session_create_owned(m, malloc(8), 1, &id), 0);
    ck_assert_int_eq(cr_session_create_owned(m, malloc(8), 1, &id), 0);
    ck_assert_int_eq(cr_session_create_owned(m, malloc(8), 2, &id), 0);
    /* Owner 2 has room of its own, the manager none: -EAGAIN, nothing reserved. */
    ck_assert_int_eq(cr_session_create_owned(m, NULL, 2, &id), -EAGAIN);
    ck_assert_int_eq(cr_session_create_owned(m, NULL, 3, &id), -EAGAIN);
    ck_assert_uint_eq(stats_of(m).full, 2);
    ck_assert_uint_eq(stats_of(m).owner_full, 0);
    ck_assert_uint_eq(stats_of(m).owners, 2);
    ck_assert_uint_eq(stats_of(m).live, 3);
    cr_session_mgr_destroy(m);
}
END_TEST

START_TEST(max_per_owner_defaults_to_1024)
{
    struct freed f = {0};
    struct cr_session_mgr *m = new_owned_mgr(0, 0, 0, 0, &f);
    uint64_t id;

    for (int i = 0; i < 1024; i++)
        ck_assert_int_eq(cr_session_create_owned(m, malloc(8), 42, &id), 0);
    ck_assert_int_eq(cr_session_create_owned(m, NULL, 42, &id), -EMFILE);
    ck_assert_int_eq(cr_session_create_owned(m, malloc(8), 43, &id), 0);
    cr_session_mgr_destroy(m);
}
END_TEST

START_TEST(expiry_gives_an_owner_its_slots_back)
{
    struct freed f = {0};
    struct cr_session_mgr *m = new_owned_mgr(TIMEOUT_MS, 0, 1, 0, &f);
    uint64_t deadline = deadline_after_ms(5000);
    uint64_t id;

    ck_assert_int_eq(cr_session_create_owned(m, malloc(8), 9, &id), 0);
    ck_assert_int_eq(cr_session_create_owned(m, NULL, 9, &id), -EMFILE);
    while (cr_session_expire(m) == 0) {
        ck_assert_msg(cr_clock_now_ns() < deadline, "never expired");
        pause_us(5000);
    }
    ck_assert_uint_eq(stats_of(m).owners, 0);
    ck_assert_int_eq(cr_session_create_owned(m, malloc(8), 9, &id), 0);
    cr_session_mgr_destroy(m);
    ck_assert_uint_eq(f.calls, 2);
}
END_TEST

START_TEST(expire_collects_an_idle_session_once_after_the_timeout)
{
    struct freed f = {0};
    struct cr_session_mgr *m = new_mgr(TIMEOUT_MS, 0, 4, &f);
    uint64_t deadline = deadline_after_ms(5000);
    unsigned total = 0;
    unsigned n;
    uint64_t t0;
    uint64_t id;
    void *got;

    ck_assert_int_eq(cr_session_create(m, malloc(8), &id), 0);
    ck_assert_int_eq(cr_session_acquire(m, id, &got), 0);
    t0 = cr_clock_now_ns();
    cr_session_release(m, id);
    n = cr_session_expire(m);
    if (cr_clock_now_ns() - t0 <= TIMEOUT_MS * MS)
        ck_assert_uint_eq(n, 0);
    else
        cr_test_skip("session: nothing expires before its timeout", STALLED);
    total += n;
    while (f.calls == 0 && cr_clock_now_ns() < deadline) {
        pause_us(1000);
        total += cr_session_expire(m);
    }
    ck_assert_uint_eq(f.calls, 1);
    ck_assert_uint_eq(total, 1);
    /* Not before its time: idle is counted from the release. */
    ck_assert_uint_gt(cr_clock_now_ns() - t0, TIMEOUT_MS * MS);
    ck_assert_int_eq(cr_session_acquire(m, id, &got), -ENOENT);
    ck_assert_uint_eq(cr_session_expire(m), 0);
    ck_assert_uint_eq(f.calls, 1);
    ck_assert_uint_eq(stats_of(m).expired, 1);
    ck_assert_uint_eq(stats_of(m).live, 0);
    cr_session_mgr_destroy(m);
    ck_assert_uint_eq(f.calls, 1);
}
END_TEST

START_TEST(checked_out_session_never_expires)
{
    struct freed f = {0};
    struct cr_session_mgr *m = new_mgr(TIMEOUT_MS, 0, 1, &f);
    uint64_t t0;
    uint64_t t1;
    uint64_t id;
    void *got;
    void *ctx = malloc(8);

    ck_assert_int_eq(cr_session_create(m, ctx, &id), 0);
    ck_assert_int_eq(cr_session_acquire(m, id, &got), 0);
    t0 = cr_clock_now_ns();
    /* Three timeouts of sweeps, through both paths. */
    while (cr_clock_now_ns() - t0 < 3 * TIMEOUT_MS * MS) {
        ck_assert_uint_eq(cr_session_expire(m), 0);
        ck_assert_int_eq(cr_session_acquire(m, 0, &got), -ENOENT);
        pause_us(2000);
    }
    ck_assert_uint_eq(f.calls, 0);
    ck_assert_uint_eq(stats_of(m).live, 1);
    /* The idle clock starts again from the release, not from the create. */
    cr_session_release(m, id);
    t1 = cr_clock_now_ns();
    ck_assert_uint_eq(cr_session_expire(m), 0);
    if (cr_clock_now_ns() - t1 < TIMEOUT_MS * MS) {
        int err = cr_session_acquire(m, id, &got);

        if (cr_clock_now_ns() - t1 < TIMEOUT_MS * MS) {
            ck_assert_int_eq(err, 0);
            ck_assert_ptr_eq(got, ctx);
            cr_session_release(m, id);
        } else {
            cr_test_skip("session: the idle clock restarts at the release", STALLED);
        }
    } else {
        cr_test_skip("session: the idle clock restarts at the release", STALLED);
    }
    cr_session_mgr_destroy(m);
    ck_assert_uint_eq(f.calls, 1);
}
END_TEST

START_TEST(create_and_acquire_alone_sweep_expired_sessions)
{
    enum { N = 8 };
    struct freed f = {0};
    struct cr_session_mgr *m = new_mgr(TIMEOUT_MS, 0, 4, &f);
    uint64_t deadline = deadline_after_ms(5000);
    uint64_t t0 = cr_clock_now_ns();
    uint64_t id;
    void *got;
    int early = 0; /* rounds checked before the timeout */

    for (int i = 0; i < N; i++)
        ck_assert_int_eq(cr_session_create(m, malloc(8), &id), 0);
    /* Only unknown ids and fresh sessions from here on, so nothing but the
     * amortised sweep can reach the N (acquire collects what it finds
     * expired itself). */
    while (f.calls < N && cr_clock_now_ns() < deadline) {
        ck_assert_int_eq(cr_session_acquire(m, 0, &got), -ENOENT);
        ck_assert_int_eq(cr_session_create(m, NULL, &id), 0);
        ck_assert_int_eq(cr_session_acquire(m, id, &got), 0);
        ck_assert_int_eq(cr_session_remove(m, id, &got), 0);
        /* Every session was created after t0, so none can expire before
         * t0 + the timeout. */
        if (cr_clock_now_ns() - t0 <= TIMEOUT_MS * MS) {
            ck_assert_uint_eq(f.calls, 0);
            early++;
        }
        pause_us(1000);
    }
    if (early == 0)
        cr_test_skip("session: nothing swept before its timeout", STALLED);
    ck_assert_uint_eq(f.calls, N);
    ck_assert_uint_eq(stats_of(m).expired, N);
    ck_assert_uint_eq(stats_of(m).live, 0);
    cr_session_mgr_destroy(m);
    ck_assert_uint_eq(f.calls, N);
}
END_TEST

START_TEST(acquire_past_the_timeout_finds_nothing_before_any_sweep)
{
    struct freed f = {0};
    /* Many shards: the amortised sweep is unlikely to have reached it. */
    struct cr_session_mgr *m = new_mgr(TIMEOUT_MS, 0, 1024, &f);
    uint64_t t0;
    uint64_t id;
    void *got;

    ck_assert_int_eq(cr_session_create(m, malloc(8), &id), 0);
    t0 = cr_clock_now_ns();
    while (cr_clock_now_ns() - t0 <= (TIMEOUT_MS + 5) * MS)
        pause_us(5000);
    ck_assert_int_eq(cr_session_acquire(m, id, &got), -ENOENT);
    ck_assert_uint_eq(f.calls, 1);
    ck_assert_uint_eq(stats_of(m).expired, 1);
    ck_assert_uint_eq(stats_of(m).live, 0);
    cr_session_mgr_destroy(m);
    ck_assert_uint_eq(f.calls, 1);
}
END_TEST

/* free_ctx calls back into the manager, on the same (only) shard: it would
 * deadlock if the manager held the shard lock around it. */
struct reentrant {
    struct cr_session_mgr *m;
    uint64_t other;
    unsigned calls;
    int acquire_err;
};

static void free_and_reenter(void *ctx, void *arg)
{
    struct reentrant *r = arg;
    struct cr_session_stats st;
    void *got;

    r->calls++;
    /* m is NULL during destroy, when no call may run. */
    if (r->m != NULL && ctx != NULL) {
        cr_session_stats(r->m, &st);
        r->acquire_err = cr_session_acquire(r->m, r->other, &got);
        if (r->acquire_err == 0)
            cr_session_release(r->m, r->other);
    }
    free(ctx);
}

START_TEST(free_ctx_may_call_back_into_the_manager)
{
    struct reentrant r = {.acquire_err = 1};
    struct cr_session_config cfg = {
        .idle_timeout_ms = TIMEOUT_MS,
        .shards = 1,
        .free_ctx = free_and_reenter,
        .free_arg = &r,
    };
    uint64_t deadline = deadline_after_ms(5000);
    uint64_t id;
    void *got;

    ck_assert_int_eq(cr_session_mgr_create(&r.m, &cfg), 0);
    ck_assert_int_eq(cr_session_create(r.m, malloc(8), &id), 0);
    /* The other session stays checked out until the first expired, then
     * idles in its turn: its NULL context needs no acquire. */
    ck_assert_int_eq(cr_session_create(r.m, NULL, &r.other), 0);
    ck_assert_int_eq(cr_session_acquire(r.m, r.other, &got), 0);
    cr_session_release(r.m, r.other);
    ck_assert_int_eq(cr_session_acquire(r.m, r.other, &got), 0);
    while (r.calls == 0 && cr_clock_now_ns() < deadline) {
        pause_us(1000);
        (void)cr_session_expire(r.m);
    }
    ck_assert_uint_eq(r.calls, 1);
    /* Checked out by us, so the callback's acquire is refused, not hung. */
    ck_assert_int_eq(r.acquire_err, -EBUSY);
    cr_session_release(r.m, r.other);
    struct cr_session_mgr *m = r.m;

    r.m = NULL;
    cr_session_mgr_destroy(m);
    ck_assert_uint_eq(r.calls, 2);
}
END_TEST

START_TEST(destroy_frees_every_remaining_context)
{
    struct freed f = {0};
    struct cr_session_mgr *m = new_mgr(0, 0, 4, &f);
    uint64_t id;
    void *got;

    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(cr_session_create(m, malloc(8), &id), 0);
        /* Some checked out: destroy frees those too. */
        if (i % 3 == 0)
            ck_assert_int_eq(cr_session_acquire(m, id, &got), 0);
    }
    ck_assert_uint_eq(stats_of(m).acquired, 4);
    cr_session_mgr_destroy(m);
    ck_assert_uint_eq(f.calls, 10);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

START_TEST(ids_are_distinct_over_100k_creates)
{
    enum { N = 100000 };
    struct cr_session_mgr *m = new_mgr(0, N, 0, NULL);
    uint64_t *ids = malloc(N * sizeof(*ids));
    void *got;

    /* Half are removed at once: distinctness must not rest on the live
     * table alone. */
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(cr_session_create(m, NULL, &ids[i]), 0);
        ck_assert_uint_ne(ids[i], 0);
        if (i % 2 == 1) {
            ck_assert_int_eq(cr_session_acquire(m, ids[i], &got), 0);
            ck_assert_int_eq(cr_session_remove(m, ids[i], &got), 0);
        }
    }
    ck_assert_uint_eq(stats_of(m).live, N / 2);
    qsort(ids, N, sizeof(*ids), cmp_u64);
    for (int i = 1; i < N; i++)
        ck_assert_msg(ids[i] != ids[i - 1], "id %llx drawn twice", (unsigned long long)ids[i]);
    free(ids);
    cr_session_mgr_destroy(m);
}
END_TEST

/*
 * The stress test. Threads share a table of slots holding ids (0 = empty);
 * each counts what it did, and the contexts count their own checkouts with
 * plain (non-atomic) fields: two holders at once would be a TSan race and an
 * in_use violation, and a lost update would break the final sum.
 */
#define STRESS_THREADS 8
#define STRESS_OPS     8000
#define STRESS_SLOTS   512
#define STRESS_MAX     256
/* Creates name one of STRESS_OWNERS owners, or none, each capped at a quarter of the whole. */
#define STRESS_OWNERS    3
#define STRESS_PER_OWNER (STRESS_MAX / 4)

struct sctx {
    unsigned long acquires;
    int in_use;
};

struct stress {
    struct cr_session_mgr *m;
    uint64_t slots[STRESS_SLOTS];
    int stop;
    /* Totals, relaxed atomics: read after the threads are joined. */
    uint64_t created;
    uint64_t eagain;
    uint64_t emfile;
    uint64_t acquired;
    uint64_t busy;
    uint64_t removed;
    uint64_t counted; /* acquires found in contexts as they were freed */
    uint64_t freed;   /* free_ctx calls */
    uint64_t expire_calls;
    int bad;
};

static void stress_free(void *ctx, void *arg)
{
    struct stress *st = arg;
    struct sctx *c = ctx;

    if (c->in_use)
        __atomic_fetch_add(&st->bad, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&st->counted, c->acquires, __ATOMIC_RELAXED);
    __atomic_fetch_add(&st->freed, 1, __ATOMIC_RELAXED);
    free(c);
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

struct held {
    uint64_t id;
    uint64_t *slot;
    struct sctx *c;
};

/* Ends a checkout: release, or one time in four remove and free. */
static void stress_finish(struct stress *st, struct held *h, uint64_t r)
{
    void *got = NULL;

    h->c->in_use = 0;
    if (r % 4 == 0) {
        uint64_t id = h->id;

        if (cr_session_remove(st->m, h->id, &got) != 0 || got != h->c)
            __atomic_fetch_add(&st->bad, 1, __ATOMIC_RELAXED);
        __atomic_compare_exchange_n(h->slot, &id, 0, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        __atomic_fetch_add(&st->removed, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&st->counted, h->c->acquires, __ATOMIC_RELAXED);
        free(h->c);
    } else {
        cr_session_release(st->m, h->id);
    }
    h->c = NULL;
}

static void *stress_worker(void *arg)
{
    struct stress *st = arg;
    uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
    struct held h = {0};

    for (int op = 0; op < STRESS_OPS; op++) {
        uint64_t r = xorshift(&seed);
        uint64_t *slot = &st->slots[(r >> 8) % STRESS_SLOTS];

        /* A session held across other operations: others must get -EBUSY
         * for it, and it must not expire meanwhile (stress_free would see
         * in_use). */
        if (h.c != NULL && r % 8 == 0)
            stress_finish(st, &h, r >> 20);
        if (r % 100 < 20) {
            struct sctx *c = calloc(1, sizeof(*c));
            uint64_t id = 0;
            uint64_t empty = 0;
            int err = cr_session_create_owned(st->m, c, (r >> 32) % (STRESS_OWNERS + 1), &id);

            if (err == -EAGAIN || err == -EMFILE) {
                __atomic_fetch_add(err == -EAGAIN ? &st->eagain : &st->emfile, 1, __ATOMIC_RELAXED);
                free(c);
                continue;
            }
            if (err != 0) {
                __atomic_fetch_add(&st->bad, 1, __ATOMIC_RELAXED);
                free(c);
                continue;
            }
            __atomic_fetch_add(&st->created, 1, __ATOMIC_RELAXED);
            /* A full slot leaves the session unreferenced: it expires, or
             * destroy frees it. */
            __atomic_compare_exchange_n(slot, &empty, id, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED);
        } else {
            uint64_t id = __atomic_load_n(slot, __ATOMIC_RELAXED);
            void *got = NULL;
            int err;

            if (id == 0)
                continue;
            err = cr_session_acquire(st->m, id, &got);
            if (err == 0) {
                struct sctx *c = got;
                struct held now = {.id = id, .slot = slot, .c = c};

                __atomic_fetch_add(&st->acquired, 1, __ATOMIC_RELAXED);
                if (c->in_use)
                    __atomic_fetch_add(&st->bad, 1, __ATOMIC_RELAXED);
                c->in_use = 1;
                c->acquires++;
                if (h.c == NULL && r % 4 == 0)
                    h = now;
                else
                    stress_finish(st, &now, r >> 20);
            } else if (err == -EBUSY) {
                __atomic_fetch_add(&st->busy, 1, __ATOMIC_RELAXED);
            } else if (err == -ENOENT) {
                __atomic_compare_exchange_n(slot, &id, 0, false, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED);
            } else {
                __atomic_fetch_add(&st->bad, 1, __ATOMIC_RELAXED);
            }
        }
    }
    if (h.c != NULL)
        stress_finish(st, &h, 1);
    return NULL;
}

static void *stress_expirer(void *arg)
{
    struct stress *st = arg;

    /* Bounded by count as well as by the workers' end. */
    for (int i = 0; i < 200000 && !__atomic_load_n(&st->stop, __ATOMIC_RELAXED); i++) {
        (void)cr_session_expire(st->m);
        __atomic_fetch_add(&st->expire_calls, 1, __ATOMIC_RELAXED);
        pause_us(100);
    }
    return NULL;
}

START_TEST(threads_share_sessions_with_exclusive_checkout_and_exact_counts)
{
    struct stress *st = calloc(1, sizeof(*st));
    struct cr_session_config cfg = {
        .idle_timeout_ms = 2,
        .max_sessions = STRESS_MAX,
        .max_per_owner = STRESS_PER_OWNER,
        .shards = 8,
        .free_ctx = stress_free,
        .free_arg = st,
    };
    pthread_t workers[STRESS_THREADS];
    pthread_t expirer;
    uint64_t deadline;
    struct cr_session_stats s;

    ck_assert_int_eq(cr_session_mgr_create(&st->m, &cfg), 0);
    ck_assert_int_eq(pthread_create(&expirer, NULL, stress_expirer, st), 0);
    for (int i = 0; i < STRESS_THREADS; i++)
        ck_assert_int_eq(pthread_create(&workers[i], NULL, stress_worker, st), 0);
    for (int i = 0; i < STRESS_THREADS; i++)
        ck_assert_int_eq(pthread_join(workers[i], NULL), 0);
    __atomic_store_n(&st->stop, 1, __ATOMIC_RELAXED);
    ck_assert_int_eq(pthread_join(expirer, NULL), 0);

    ck_assert_int_eq(st->bad, 0);
    s = stats_of(st->m);
    ck_assert_uint_eq(s.created, st->created);
    ck_assert_uint_eq(s.removed, st->removed);
    ck_assert_uint_eq(s.busy, st->busy);
    ck_assert_uint_eq(s.acquired, 0);
    ck_assert_uint_eq(s.expired, st->freed);
    ck_assert_uint_eq(s.live, s.created - s.removed - s.expired);
    ck_assert_uint_le(s.live, STRESS_MAX);
    ck_assert_uint_eq(s.full, st->eagain);
    ck_assert_uint_eq(s.owner_full, st->emfile);
    ck_assert_uint_le(s.owners, STRESS_OWNERS);
    ck_assert_uint_gt(st->created, 0);
    ck_assert_uint_gt(st->acquired, 0);

    /* All checked in now: everything left expires. */
    deadline = deadline_after_ms(5000);
    while (stats_of(st->m).live > 0 && cr_clock_now_ns() < deadline) {
        pause_us(1000);
        (void)cr_session_expire(st->m);
    }
    s = stats_of(st->m);
    ck_assert_uint_eq(s.live, 0);
    ck_assert_uint_gt(s.expired, 0);
    ck_assert_uint_eq(s.expired, st->freed);
    ck_assert_uint_eq(s.created, s.removed + s.expired);
    /* Each owner's count went back to 0 with its last session, by remove or expiry. */
    ck_assert_uint_eq(s.owners, 0);
    /* Every successful acquire landed in exactly one context. */
    ck_assert_uint_eq(st->counted, st->acquired);
    cr_session_mgr_destroy(st->m);
    ck_assert_uint_eq(st->freed, s.expired);
    ck_assert_int_eq(st->bad, 0);
    free(st);
}
END_TEST

START_TEST(destroy_after_threads_frees_what_they_left)
{
    struct stress *st = calloc(1, sizeof(*st));
    struct cr_session_config cfg = {
        .max_sessions = STRESS_MAX,
        .shards = 4,
        .free_ctx = stress_free,
        .free_arg = st,
    };
    pthread_t workers[4];
    struct cr_session_stats s;

    ck_assert_int_eq(cr_session_mgr_create(&st->m, &cfg), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&workers[i], NULL, stress_worker, st), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_join(workers[i], NULL), 0);
    s = stats_of(st->m);
    ck_assert_int_eq(st->bad, 0);
    ck_assert_uint_eq(s.expired, 0);
    ck_assert_uint_gt(s.live, 0);
    ck_assert_uint_eq(s.live, st->created - st->removed);
    cr_session_mgr_destroy(st->m);
    ck_assert_uint_eq(st->freed, s.live);
    ck_assert_uint_eq(st->counted, st->acquired);
    free(st);
}
END_TEST

/*
 * Fewer workers than sessions: 64 sessions, each a client that sends its
 * next request only after the reply to the last, served by 4 workers. Request
 * r of session i goes to worker (i + r) % 4, so every session is continued by
 * every worker, each worker interleaves 16 sessions at a time, and each
 * session's requests must arrive in order on the context.
 */
#define IL_WORKERS  4
#define IL_SESSIONS 64
#define IL_OPS      40

struct il_req {
    unsigned session;
    unsigned op;
    uint64_t id;
};

struct il_queue {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    /* Protected by lock; a session is in at most one queue at a time. */
    struct il_req q[IL_SESSIONS];
    unsigned head;
    unsigned len;
};

struct il_ctx {
    unsigned next_op;
    uint64_t digest;
    unsigned workers_seen; /* bit per worker */
};

struct il {
    struct cr_session_mgr *m;
    struct il_queue queues[IL_WORKERS];
    unsigned remaining; /* sessions not finished; see il_session_done */
    int bad;
};

struct il_worker_arg {
    struct il *il;
    unsigned w;
};

static uint64_t il_step(uint64_t digest, unsigned session, unsigned op)
{
    return digest * 1000003u + session * 131u + op;
}

static void il_push(struct il *il, unsigned w, struct il_req req)
{
    struct il_queue *q = &il->queues[w];

    pthread_mutex_lock(&q->lock);
    q->q[(q->head + q->len) % IL_SESSIONS] = req;
    q->len++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->lock);
}

static bool il_pop(struct il *il, unsigned w, struct il_req *req)
{
    struct il_queue *q = &il->queues[w];
    bool got = false;

    pthread_mutex_lock(&q->lock);
    while (q->len == 0 && __atomic_load_n(&il->remaining, __ATOMIC_ACQUIRE) > 0)
        pthread_cond_wait(&q->cv, &q->lock);
    if (q->len > 0) {
        *req = q->q[q->head];
        q->head = (q->head + 1) % IL_SESSIONS;
        q->len--;
        got = true;
    }
    pthread_mutex_unlock(&q->lock);
    return got;
}

static void il_bad(struct il *il)
{
    __atomic_fetch_add(&il->bad, 1, __ATOMIC_RELAXED);
}

static void il_session_done(struct il *il)
{
    /* Release pairs with the acquire load in il_pop; the lock around each
     * broadcast keeps a worker from missing it between check and wait. */
    if (__atomic_sub_fetch(&il->remaining, 1, __ATOMIC_RELEASE) > 0)
        return;
    for (unsigned w = 0; w < IL_WORKERS; w++) {
        pthread_mutex_lock(&il->queues[w].lock);
        pthread_cond_broadcast(&il->queues[w].cv);
        pthread_mutex_unlock(&il->queues[w].lock);
    }
}

static void *il_worker(void *arg)
{
    struct il_worker_arg *a = arg;
    struct il *il = a->il;
    struct il_req req;

    while (il_pop(il, a->w, &req)) {
        void *got = NULL;
        struct il_ctx *c;

        /* Nobody else holds it: the session's next request waits for us. */
        if (cr_session_acquire(il->m, req.id, &got) != 0) {
            il_bad(il);
            il_session_done(il);
            continue;
        }
        c = got;
        if (c->next_op != req.op)
            il_bad(il);
        c->digest = il_step(c->digest, req.session, req.op);
        c->next_op++;
        c->workers_seen |= 1u << a->w;
        if (req.op + 1 < IL_OPS) {
            cr_session_release(il->m, req.id);
            req.op++;
            il_push(il, (req.session + req.op) % IL_WORKERS, req);
            continue;
        }
        /* The last request ends the session. */
        uint64_t want = 0;

        for (unsigned op = 0; op < IL_OPS; op++)
            want = il_step(want, req.session, op);
        if (cr_session_remove(il->m, req.id, &got) != 0 || got != c || c->digest != want ||
            c->next_op != IL_OPS || c->workers_seen != (1u << IL_WORKERS) - 1)
            il_bad(il);
        free(c);
        il_session_done(il);
    }
    return NULL;
}

START_TEST(few_workers_continue_many_sessions_in_order)
{
    struct il *il = calloc(1, sizeof(*il));
    struct cr_session_config cfg = {.shards = 8};
    struct il_worker_arg args[IL_WORKERS];
    pthread_t workers[IL_WORKERS];
    struct cr_session_stats s;

    ck_assert_int_eq(cr_session_mgr_create(&il->m, &cfg), 0);
    il->remaining = IL_SESSIONS;
    for (unsigned w = 0; w < IL_WORKERS; w++) {
        ck_assert_int_eq(pthread_mutex_init(&il->queues[w].lock, NULL), 0);
        ck_assert_int_eq(pthread_cond_init(&il->queues[w].cv, NULL), 0);
    }
    for (unsigned i = 0; i < IL_SESSIONS; i++) {
        struct il_req req = {.session = i, .op = 0};

        ck_assert_int_eq(cr_session_create(il->m, calloc(1, sizeof(struct il_ctx)), &req.id), 0);
        il_push(il, i % IL_WORKERS, req);
    }
    for (unsigned w = 0; w < IL_WORKERS; w++) {
        args[w] = (struct il_worker_arg){.il = il, .w = w};
        ck_assert_int_eq(pthread_create(&workers[w], NULL, il_worker, &args[w]), 0);
    }
    for (unsigned w = 0; w < IL_WORKERS; w++)
        ck_assert_int_eq(pthread_join(workers[w], NULL), 0);
    ck_assert_int_eq(il->bad, 0);
    s = stats_of(il->m);
    ck_assert_uint_eq(s.created, IL_SESSIONS);
    ck_assert_uint_eq(s.removed, IL_SESSIONS);
    ck_assert_uint_eq(s.live, 0);
    ck_assert_uint_eq(s.busy, 0);
    cr_session_mgr_destroy(il->m);
    for (unsigned w = 0; w < IL_WORKERS; w++) {
        pthread_mutex_destroy(&il->queues[w].lock);
        pthread_cond_destroy(&il->queues[w].cv);
    }
    free(il);
}
END_TEST

Suite *session_suite(void);
Suite *session_suite(void)
{
    Suite *s = suite_create("session");
    TCase *tc = tcase_create("core");
    TCase *threads = tcase_create("threads");

    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, create_rejects_bad_config_and_takes_zero_as_defaults);
    tcase_add_test(tc, round_trip_keeps_the_context_across_checkouts);
    tcase_add_test(tc, acquire_of_an_unknown_id_fails_with_enoent);
    tcase_add_test(tc, release_of_an_id_not_held_and_remove_of_one_checked_in);
    tcase_add_test(tc, second_acquire_is_busy_while_checked_out_and_counted);
    tcase_add_test(tc, max_sessions_refuses_with_eagain_and_leaves_ctx_to_the_caller);
    tcase_add_test(tc, max_per_owner_refuses_with_emfile_and_leaves_ctx_to_the_caller);
    tcase_add_test(tc, max_sessions_bounds_all_owners_together);
    tcase_add_test(tc, max_per_owner_defaults_to_1024);
    tcase_add_test(tc, expiry_gives_an_owner_its_slots_back);
    tcase_add_test(tc, expire_collects_an_idle_session_once_after_the_timeout);
    tcase_add_test(tc, checked_out_session_never_expires);
    tcase_add_test(tc, create_and_acquire_alone_sweep_expired_sessions);
    tcase_add_test(tc, acquire_past_the_timeout_finds_nothing_before_any_sweep);
    tcase_add_test(tc, free_ctx_may_call_back_into_the_manager);
    tcase_add_test(tc, destroy_frees_every_remaining_context);
    tcase_add_test(tc, ids_are_distinct_over_100k_creates);
    suite_add_tcase(s, tc);

    tcase_set_timeout(threads, 30);
    tcase_add_test(threads, threads_share_sessions_with_exclusive_checkout_and_exact_counts);
    tcase_add_test(threads, destroy_after_threads_frees_what_they_left);
    tcase_add_test(threads, few_workers_continue_many_sessions_in_order);
    suite_add_tcase(s, threads);
    return s;
}

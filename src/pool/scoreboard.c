/*
 * scoreboard.c - the process models' scoreboard (scoreboard_internal.h): a
 * header (with the server-wide totals) and an array of cache-line slots in
 * one anonymous shared mapping, made by the master before its first fork so
 * every worker shares it. The manager (one thread of the master) claims,
 * evicts and releases slots; each worker writes its own slot's state and
 * counters; anyone reads. Also the states' names (cr_worker_state_name,
 * scoreboard.h).
 *
 * No lock: a lock in shared memory held by a worker that is killed -9 would
 * be held forever. Each field has one writer at a time (the manager between
 * claim and fork and after reaping, the worker in between), and every access
 * is a relaxed atomic, so nothing tears; a reader may see a slot halfway
 * through an update, which a status page tolerates. The one ordering that
 * matters: claim writes the fields, then the state with release; copy reads
 * the state with acquire before the fields, so a slot that shows up as in
 * use shows its new generation and zeroed counters, not the previous
 * worker's.
 */
#include "pool/scoreboard_internal.h"

#include <cabrank/clock.h>

#include <assert.h>
#include <stdio.h>
#include <sys/mman.h>

static const char *const worker_state_names[CR_WORKER_STATE_COUNT] = {
    [CR_WORKER_FREE] = "free", [CR_WORKER_STARTING] = "starting",
    [CR_WORKER_IDLE] = "idle", [CR_WORKER_LISTENING] = "listening",
    [CR_WORKER_BUSY] = "busy", [CR_WORKER_STOPPING] = "stopping",
    [CR_WORKER_DEAD] = "dead",
};

const char *cr_worker_state_name(enum cr_worker_state state)
{
    if ((unsigned)state >= CR_WORKER_STATE_COUNT)
        return "unknown";
    return worker_state_names[state];
}

struct cr__scoreboard {
    /* Immutable after create. */
    unsigned nslots;
    size_t map_len;
    /* Manager only: the last tag handed out. */
    uint32_t last_tag;
    struct cr__scoreboard_totals totals;
    struct cr__slot slots[];
};

#define LOAD(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

int cr__scoreboard_create(struct cr__scoreboard **out, unsigned nslots)
{
    struct cr__scoreboard *sb;
    size_t len;

    *out = NULL;
    if (nslots == 0 || nslots > (1u << 20))
        return -EINVAL;
    len = sizeof(*sb) + (size_t)nslots * sizeof(struct cr__slot);
    /* Zero-filled: every slot starts FREE (0) with tag 0. */
    sb = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sb == MAP_FAILED)
        return -errno;
    sb->nslots = nslots;
    sb->map_len = len;
    *out = sb;
    return 0;
}

void cr__scoreboard_destroy(struct cr__scoreboard *sb)
{
    if (sb != NULL)
        munmap(sb, sb->map_len);
}

unsigned cr__scoreboard_size(const struct cr__scoreboard *sb)
{
    return sb->nslots;
}

struct cr__slot *cr__scoreboard_slot(struct cr__scoreboard *sb, unsigned i)
{
    assert(i < sb->nslots);
    return &sb->slots[i];
}

int cr__scoreboard_claim(struct cr__scoreboard *sb, unsigned gen)
{
    for (unsigned i = 0; i < sb->nslots; i++) {
        struct cr__slot *s = &sb->slots[i];

        if (LOAD(&s->state) != CR_WORKER_FREE)
            continue;
        /* Never 0, so a zeroed claim record never owns a slot. */
        if (++sb->last_tag == 0)
            sb->last_tag = 1;
        STORE(&s->pid, 0);
        STORE(&s->generation, gen);
        STORE(&s->tag, sb->last_tag);
        STORE(&s->stop, 0);
        STORE(&s->busy_threads, 0u);
        STORE(&s->parked, 0u);
        STORE(&s->connections, (uint64_t)0);
        STORE(&s->requests, (uint64_t)0);
        STORE(&s->bytes, (uint64_t)0);
        STORE(&s->last_request_ns, (uint64_t)0);
        STORE(&s->busy_since_ns, (uint64_t)0);
        /* Release: pairs with the acquire load in cr__scoreboard_copy. */
        __atomic_store_n(&s->state, (int)CR_WORKER_STARTING, __ATOMIC_RELEASE);
        return (int)i;
    }
    return -ENOSPC;
}

void cr__scoreboard_release(struct cr__scoreboard *sb, unsigned i)
{
    struct cr__slot *s = cr__scoreboard_slot(sb, i);

    STORE(&s->pid, 0);
    STORE(&s->busy_threads, 0u);
    STORE(&s->parked, 0u);
    __atomic_store_n(&s->state, (int)CR_WORKER_FREE, __ATOMIC_RELEASE);
}

int cr__scoreboard_evict(struct cr__scoreboard *sb)
{
    int victim = -ENOSPC;
    unsigned oldest = 0;

    for (unsigned i = 0; i < sb->nslots; i++) {
        struct cr__slot *s = &sb->slots[i];
        unsigned gen = LOAD(&s->generation);

        if (LOAD(&s->state) != CR_WORKER_STOPPING)
            continue;
        /* Generations only grow: the smallest is the oldest. */
        if (victim < 0 || gen < oldest) {
            victim = (int)i;
            oldest = gen;
        }
    }
    if (victim < 0)
        return victim;
    /* A new tag first: the evicted worker's cr__scoreboard_owns fails from
     * now on, before the next claim hands the slot out. */
    if (++sb->last_tag == 0)
        sb->last_tag = 1;
    STORE(&sb->slots[victim].tag, sb->last_tag);
    cr__scoreboard_release(sb, (unsigned)victim);
    return victim;
}

bool cr__scoreboard_owns(struct cr__scoreboard *sb, unsigned i, uint32_t tag)
{
    return i < sb->nslots && LOAD(&sb->slots[i].tag) == tag;
}

unsigned cr__scoreboard_copy(struct cr__scoreboard *sb, struct cr_scoreboard_entry *e, unsigned max)
{
    uint64_t now = cr_clock_now_ns();
    unsigned n = 0;

    for (unsigned i = 0; i < sb->nslots; i++) {
        struct cr__slot *s = &sb->slots[i];
        /* Acquire: pairs with the release store in claim. */
        int state = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);

        if (state == CR_WORKER_FREE)
            continue;
        if (n < max) {
            struct cr_scoreboard_entry *o = &e[n];
            uint64_t since = LOAD(&s->busy_since_ns);

            o->pid = LOAD(&s->pid);
            o->generation = LOAD(&s->generation);
            o->state = (enum cr_worker_state)state;
            o->busy_threads = LOAD(&s->busy_threads);
            o->connections = LOAD(&s->connections);
            o->requests = LOAD(&s->requests);
            o->bytes = LOAD(&s->bytes);
            o->last_request_ns = LOAD(&s->last_request_ns);
            o->busy_ns = state == CR_WORKER_BUSY && since != 0 && now > since ? now - since : 0;
        }
        n++;
    }
    return n;
}

enum cr_role cr__scoreboard_role(int state)
{
    switch (state) {
    case CR_WORKER_IDLE:
        return CR_ROLE_FOLLOWER;
    case CR_WORKER_LISTENING:
        return CR_ROLE_LEADER;
    case CR_WORKER_BUSY:
        return CR_ROLE_PROCESSING;
    case CR_WORKER_STOPPING:
    case CR_WORKER_DEAD:
        return CR_ROLE_STOPPED;
    default:
        return CR_ROLE_IDLE;
    }
}

int cr__scoreboard_timeline(struct cr__scoreboard *sb, struct cr_timeline_view *v,
                            uint64_t since_ns)
{
    for (unsigned i = 0; i < sb->nslots; i++) {
        struct cr__slot *s = &sb->slots[i];
        char name[32];
        int pid;
        int err;

        /* Acquire: pairs with the release store in claim. */
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == CR_WORKER_FREE)
            continue;
        pid = LOAD(&s->pid);
        if (pid <= 0)
            continue; /* not yet running: no lane */
        snprintf(name, sizeof(name), "pid %d", pid);
        err = cr__timeline_view_lane(v, name, CR_TIMELINE_PROCESS, &s->tl_head, s->tl_ev,
                                     CR__SLOT_EVENTS - 1, since_ns);
        if (err < 0)
            return err;
    }
    return 0;
}

struct cr__scoreboard_totals *cr__scoreboard_totals(struct cr__scoreboard *sb)
{
    return &sb->totals;
}

void cr__scoreboard_stats(struct cr__scoreboard *sb, struct cr_server_stats *st)
{
    const struct cr__scoreboard_totals *t = &sb->totals;
    uint64_t open = 0;

    for (unsigned i = 0; i < sb->nslots; i++) {
        struct cr__slot *s = &sb->slots[i];

        if (LOAD(&s->state) != CR_WORKER_FREE)
            open += LOAD(&s->busy_threads) + LOAD(&s->parked);
    }
    st->accepted = LOAD(&t->accepted);
    st->open_connections = open;
    st->bytes_in = LOAD(&t->bytes_in);
    st->bytes_out = LOAD(&t->bytes_out);
    st->requests = LOAD(&t->requests);
    st->processes = LOAD(&t->processes);
    st->generation = LOAD(&t->generation);
    st->restarts = LOAD(&t->restarts);
    st->crashes = LOAD(&t->crashes);
}

unsigned cr__scoreboard_count(struct cr__scoreboard *sb, unsigned gen, enum cr_worker_state st)
{
    unsigned n = 0;

    for (unsigned i = 0; i < sb->nslots; i++) {
        struct cr__slot *s = &sb->slots[i];

        if (LOAD(&s->state) == (int)st && LOAD(&s->generation) == gen)
            n++;
    }
    return n;
}

/*
 * advise_rules.c - the selection guideline `cabrank-bench advise` follows (docs/models.md,
 * "Choosing a model"): from a service's measured characteristics to a model, its flags, the
 * reasons in the papers' terms, and the runners-up the verification runs against it; and the
 * verdict of that verification. Pure functions of their arguments; any thread. Called by
 * advise.c and the unit tests.
 */
#include "advise.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static struct advise_choice choice(const char *model, int threads, bool per_core, bool eager,
                                   int workers)
{
    struct advise_choice c = {
        .threads = threads, .per_core = per_core, .eager = eager, .workers = workers};

    snprintf(c.model, sizeof(c.model), "%s", model);
    return c;
}

static void say(struct advise_rec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct advise_rec *r, const char *fmt, ...)
{
    size_t used = strlen(r->reasons);
    va_list ap;

    if (used + 1 >= sizeof(r->reasons))
        return;
    va_start(ap, fmt);
    vsnprintf(r->reasons + used, sizeof(r->reasons) - used, fmt, ap);
    va_end(ap);
}

static void runners(struct advise_rec *r, struct advise_choice a, struct advise_choice b,
                    struct advise_choice c)
{
    r->runners[0] = a;
    r->runners[1] = b;
    r->runners[2] = c;
    r->nrunners = 3;
}

/* The pool for blocking handlers: Little's law over the connections in flight, the share of
 * their service time spent blocked (all of it when unknown), plus one per core for the
 * requests that run. */
static int pool_size(const struct advise_traits *t, unsigned cores, bool unknown)
{
    double frac = 1.0;
    double n;

    if (!unknown) {
        double blocked = t->block_share * t->block_us;
        double running = (1 - t->block_share) * (isnan(t->service_us) ? 0 : t->service_us);

        frac = blocked / (blocked + running);
    }
    n = ceil((double)t->active * frac) + cores;
    if (n < 2.0 * cores)
        n = 2.0 * cores;
    if (unknown && n < 4.0 * cores)
        n = 4.0 * cores;
    return n > ADVISE_THREADS_MAX ? ADVISE_THREADS_MAX : (int)n;
}

static void blocking(const struct advise_traits *t, unsigned cores, bool unknown,
                     struct advise_rec *r)
{
    int n = pool_size(t, cores, unknown);

    r->rule = unknown ? "blocking-unknown" : "blocking";
    r->pick = choice("lf", n, false, true, 0);
    runners(r, choice("hshr", n, false, false, 0), choice("lf", 0, true, false, 0),
            choice("reactor", 0, false, false, 0));
    if (unknown)
        say(r, "whether handlers block is unknown (too few requests timed): assumed they may. A "
               "pool sized for blocking costs a few idle threads if they do not; a Reactor, or a "
               "pool of one thread per core, stalls its connections if they do.\n");
    else
        say(r,
            "handlers block: %.0f%% of requests took %.1f ms at one client, against a median of "
            "%.0f us for the others.\n",
            t->block_share * 100, t->block_us / 1000, t->service_us);
    say(r,
        "A blocked handler holds its thread, so the Worker Pool is sized for the requests blocked "
        "at once, not for the cores: %d threads, the %u connections in flight times the share of "
        "service time spent blocked (Little's law), plus one per core.\n",
        n, t->active);
    say(r, "Leader/Followers in one handle set with eager promotion (--promotion-delay 0): the "
           "leader promotes a follower before it runs the handler, so a handler that blocks "
           "never holds the listening role (deferred promotion is a bet on short handlers, lost "
           "here).\n");
    say(r, "A Job Queue (Half-Sync/Half-Reactive, the pattern paper's Type 3) serves as many "
           "requests but pays a hand-off, a queue push and a wake-up, per request: between "
           "threads changing roles is no harder than transferring the job, so the paper's "
           "question picks Leader/Followers.\n");
}

void bench_advise_decide(const struct advise_traits *t, struct advise_rec *r)
{
    unsigned cores = t->cores > 0 ? t->cores : 1;
    unsigned open = t->active + t->idle;
    bool unknown = isnan(t->block_share);
    struct advise_choice reactor = choice("reactor", 0, false, false, 0);
    struct advise_choice lf = choice("lf", 0, true, false, 0);
    bool few;

    memset(r, 0, sizeof(*r));
    if (unknown ||
        (t->block_share >= ADVISE_BLOCK_SHARE_MIN && t->block_us >= ADVISE_BLOCK_MIN_US)) {
        blocking(t, cores, unknown, r);
        return;
    }
    say(r,
        "handlers are short and do not block: median %.0f us at one client, %.1f us of server CPU "
        "per request, %.1f%% of requests blocked.\n",
        t->service_us, t->cpu_us, t->block_share * 100);
    if (cores == 1) {
        r->rule = "one-core";
        r->pick = reactor;
        runners(r, lf, choice("hshr", 0, false, false, 0), choice("prefork", 0, false, false, 1));
        say(r, "One core: one Reactor thread demultiplexes and serves every connection; a pool "
               "of tasks could only take turns on the core, each turn a context switch.\n");
        return;
    }
    if (t->req_per_conn <= ADVISE_SHORT_CONN_REQS && open <= ADVISE_TASK_CONNS_MAX) {
        r->rule = "short-connections";
        r->pick = choice("prefork", 0, false, false, (int)cores);
        runners(r, choice("hshr", 0, false, false, 0), choice("forking", 0, false, false, 0),
                reactor);
        say(r,
            "Short, non-blocking handlers and many connections per second (%.0f/s, %.1f "
            "requests each): Leader/Followers with processes (prefork; the pattern paper's Type "
            "5, Apache's preforking MPM): the leader accepts and serves the connection itself, no "
            "hand-off, while the next follower takes the accept.\n",
            t->conn_rate, t->req_per_conn);
        say(r,
            "A connection is over after one exchange, so a task per open connection (%u open) "
            "costs little, and %u worker processes (one per core; the manager adds more when none "
            "is idle) share no heap or lock. A Job Queue (hshr) would hand each connection over; a "
            "Forking Server would create a task per connection, saving memory while idle at the "
            "cost of response time.\n",
            open, cores);
        return;
    }
    if (open > ADVISE_TASK_CONNS_MAX)
        say(r,
            "%u connections open (%u of them idle): more than a task each can hold (%d), so the "
            "connection's state stays in the handle set, %.1f KiB per idle connection, and a "
            "thread "
            "serves it only while it has a request (the pattern paper's session context kept "
            "apart from the task).\n",
            open, t->idle, ADVISE_TASK_CONNS_MAX, t->mem_per_conn_kb);
    else
        say(r,
            "Connections live long (%.0f requests each): a task bound to each would wait idle "
            "between its requests, so the connection's state stays in the handle set (%.1f KiB per "
            "idle connection) and a thread serves it only while it has a request.\n",
            t->req_per_conn, t->mem_per_conn_kb);
    few = cores <= ADVISE_REACTOR_CORES;
    r->rule = few ? "many-connections-few-cores" : "many-connections";
    r->pick = few ? reactor : lf;
    runners(r, few ? lf : reactor, choice("hshr", 0, false, false, 0),
            choice("prefork", 0, false, false, (int)cores));
    if (few)
        say(r,
            "On %u cores, with short handlers one Reactor thread keeps up and pays neither "
            "Leader/Followers' promotions nor a job queue's hand-offs; a second thread would share "
            "the cores with the clients.\n",
            cores);
    else
        say(r,
            "On %u cores: Leader/Followers with a handle set per core (POSA2's multiple handle "
            "sets): the thread that sees an event serves it without a hand-off, and each core's "
            "set keeps its own leader, so the cores do not contend for one.\n",
            cores);
}

double bench_advise_spread(const struct advise_result *r)
{
    return r->err == 0 && r->rps > 0 && r->worst_rps <= r->rps ? 1 - r->worst_rps / r->rps : 0;
}

enum advise_verdict bench_advise_judge(const struct advise_result *res, int n, int *best)
{
    *best = -1;
    for (int i = 1; i < n; i++) {
        if (res[i].err == 0 && (*best < 0 || res[i].rps > res[*best].rps))
            *best = i;
    }
    if (res[0].err < 0 || res[0].errors > 0)
        return ADVISE_LOST;
    if (*best < 0 || res[0].rps >= res[*best].rps)
        return ADVISE_WON;
    if (res[0].rps >= ADVISE_CPU_TIE * res[*best].rps && res[0].cpu_us < res[*best].cpu_us)
        return ADVISE_WON;
    return res[0].rps >= res[*best].worst_rps ? ADVISE_TIE : ADVISE_LOST;
}

void bench_advise_flags(const struct advise_choice *c, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "--model %s", c->model);

    if (n < 0 || (size_t)n >= cap)
        return;
    if (c->threads > 0)
        n += snprintf(buf + n, cap - (size_t)n, " --threads %d", c->threads);
    if (strcmp(c->model, "lf") == 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " --groups %s", c->per_core ? "auto" : "1");
    if (c->eager && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " --promotion-delay 0");
    if (c->workers > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " --workers %d", c->workers);
}

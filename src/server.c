/*
 * server.c - cr_server: normalises the configuration, opens the listeners,
 * picks the concurrency model by name and forwards the lifecycle to it
 * (model_internal.h); cr_server_run adds the signal handling of a daemon.
 * Called by applications on their main thread; stop and stats from any
 * thread. Owns the listeners it opened, a copy of the configuration, the
 * model and the server-wide counters the model updates.
 *
 * Under lf or hshr with groups > 1 and no inherited socket, each address is opened
 * once per group with SO_REUSEPORT, the copies on the port the first one
 * got (so port 0 works), and the model gets them grouped (listen_groups in
 * model_internal.h); the first copy of each is the one cr_server_listeners
 * and cr_server_address report.
 */
#include <cabrank/clock.h>
#include <cabrank/cpu.h>
#include <cabrank/handle_set.h>
#include <cabrank/lf_pool.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/server.h>

#include "model/model_internal.h"
#include "os/proc_internal.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_LISTEN              "127.0.0.1:8080"
#define DEFAULT_MODEL               "lf"
#define DEFAULT_BACKLOG             511
#define DEFAULT_PROMOTION           "lifo"
#define DEFAULT_QUEUE_SIZE          1024
#define DEFAULT_MAX_CONNECTIONS     10000
#define DEFAULT_TIMEOUT_MS          60000
#define DEFAULT_HIGH_WATER          (256 * 1024)
#define DEFAULT_LOOPBACK_CONGESTION "cubic"
#define TPC_MAX_THREADS             1024
#define DEFAULT_MAX_WORKERS         256
#define DEFAULT_BUSY_WARN_MS        60000
/* The proactor's default dispatcher: Leader/Followers over one ring below
 * this many usable CPUs, a ring per thread from it (one ring's completion
 * queue is a serial point: docs/design/server_api.md). */
#define RINGS_FROM_CPUS 3
/* cr_server_run looks for a stop made by another thread this often. */
#define RUN_POLL_MS 200

static const struct cr_model_ops *const models[] = {
    &cr__model_reactor_ops, &cr__model_lf_ops,      &cr__model_hshr_ops,     &cr__model_tpc_ops,
    &cr__model_forking_ops, &cr__model_prefork_ops, &cr__model_proactor_ops,
};
#define NMODELS (sizeof(models) / sizeof(models[0]))

static const char *const model_names[NMODELS + 1] = {
    "reactor", "lf", "hshr", "tpc", "forking", "prefork", "proactor", NULL,
};

static const char *const accept_locks[] = {"pthread", "fcntl", "none", "reuseport", NULL};
static const char *const dispatchers[] = {"lf", "single", "ring-per-thread", NULL};
static const char *const async_engines[] = {"uring", "emulated", NULL};

enum server_state {
    STATE_CREATED = 0,
    STATE_STARTED,
    STATE_WAITED,
};

struct cr_server {
    /* Immutable after create. */
    struct cr_server_config cfg; /* normalised; strings owned or static */
    char *backend;
    char *promotion;
    const struct cr_service *svc;
    const struct cr_model_ops *ops;
    struct cr_model *model;
    int listen_fds[CR_SERVER_MAX_LISTEN];
    bool owns_fd[CR_SERVER_MAX_LISTEN];
    unsigned nlisten;
    /* Grouped listeners: listen_groups copies of each address,
     * group-major, group 0 being listen_fds (model_internal.h); owned.
     * NULL and 1 when every group shares listen_fds. */
    int *group_fds;
    unsigned listen_groups;
    /* What connections accepted on a wildcard listener get when they come
     * from this host (cr__conn_config.loopback_congestion); NULL: none. */
    const char *conn_loopback_congestion;
    struct cr_timeline *timeline; /* owned; NULL: off */
    struct cr_model_env env;

    /* Owner thread only. */
    enum server_state state;

    /* Atomic: uptime origin, written by start (release), read by stats. */
    uint64_t start_ns;
    /* Atomic: a stop was requested (cr_server_run polls it). */
    int stop_requested;
    /* Counters the model updates; relaxed atomics. */
    uint64_t accepted;
    uint64_t open_connections;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t requests;
};

const char *const *cr_server_models(void)
{
    return model_names;
}

static const struct cr_model_ops *find_model(const char *name)
{
    for (size_t i = 0; i < NMODELS; i++) {
        if (strcmp(models[i]->name, name) == 0)
            return models[i];
    }
    return NULL;
}

/* The entry of list equal to name (a static string), or NULL. */
static const char *pick(const char *const *list, const char *name)
{
    for (size_t i = 0; list[i] != NULL; i++) {
        if (strcmp(list[i], name) == 0)
            return list[i];
    }
    return NULL;
}

/* The process models' fields. -EINVAL for impossible values. */
static int normalise_processes(struct cr_server_config *c, int cpus)
{
    if (c->workers < 0 || c->min_spare < 0 || c->max_spare < 0 || c->max_workers < 0)
        return -EINVAL;
    if (strcmp(c->model, "prefork") == 0 && c->threads == 0)
        c->threads = 1; /* classic prefork: a process per connection at a time */
    if (c->max_workers == 0)
        c->max_workers = DEFAULT_MAX_WORKERS;
    if (c->workers == 0)
        c->workers = cpus < c->max_workers ? cpus : c->max_workers;
    if (c->workers > c->max_workers)
        return -EINVAL;
    if (c->min_spare == 0)
        c->min_spare = 1;
    if (c->max_spare == 0)
        c->max_spare = c->workers + c->min_spare;
    if (c->max_spare < c->min_spare)
        return -EINVAL;
    if (c->busy_warn_ms == 0)
        c->busy_warn_ms = DEFAULT_BUSY_WARN_MS;
    c->accept_lock = pick(accept_locks, c->accept_lock != NULL ? c->accept_lock : "pthread");
    if (c->accept_lock == NULL)
        return -EINVAL;
    c->dispatch = pick(dispatchers, c->dispatch != NULL       ? c->dispatch
                                    : cpus >= RINGS_FROM_CPUS ? "ring-per-thread"
                                                              : "lf");
    if (c->dispatch == NULL)
        return -EINVAL;
    if (c->async_engine != NULL) {
        c->async_engine = pick(async_engines, c->async_engine);
        if (c->async_engine == NULL)
            return -EINVAL;
    }
    return 0;
}

/*
 * lf's handle sets and threads (server_options.h). groups 0 is one set per
 * usable CPU, or with threads given, as many sets as give each
 * THREADS_PER_GROUP of them (at least one), so that a handler that blocks
 * leaves a follower to lead its set. threads 0 is THREADS_PER_GROUP per set.
 * Other models have one set or none: groups stays as given, 1 for 0.
 */
static void normalise_groups(struct cr_server_config *c, bool is_lf)
{
    if (c->groups == 0 && is_lf)
        c->groups = (int)cr_lf_pool_default_sets((unsigned)c->threads, CR_SERVER_MAX_GROUPS);
    if (c->groups == 0)
        c->groups = 1;
    if (c->threads == 0 && is_lf)
        c->threads = c->groups * CR_LF_POOL_THREADS_PER_SET;
}

/* Fills in the defaults server.h documents. -EINVAL for impossible values. */
static int normalise(struct cr_server *s, const struct cr_server_config *in)
{
    struct cr_server_config *c = &s->cfg;
    int cpus = cr_cpu_usable();
    bool is_tpc;

    *c = *in;
    if (c->backlog < 0 || c->threads < 0 || c->groups < 0 || c->queue_size < 0 ||
        c->max_connections < 0 ||
        (c->notsent_lowat > INT_MAX && c->notsent_lowat != CR_SERVER_NOTSENT_SYSTEM))
        return -EINVAL;
    s->ops = find_model(c->model != NULL ? c->model : DEFAULT_MODEL);
    if (s->ops == NULL)
        return -EINVAL;
    c->model = s->ops->name;
    is_tpc = strcmp(c->model, "tpc") == 0;
    if (c->notsent_lowat == 0)
        c->notsent_lowat =
            s->ops->notsent_lowat != 0 ? s->ops->notsent_lowat : CR_SERVER_NOTSENT_LOWAT;
    if (normalise_processes(c, cpus) < 0)
        return -EINVAL;
    if (c->backlog == 0)
        c->backlog = DEFAULT_BACKLOG;
    normalise_groups(c, strcmp(c->model, "lf") == 0);
    if (c->threads == 0)
        c->threads = is_tpc ? TPC_MAX_THREADS : cpus;
    if (is_tpc && c->threads > TPC_MAX_THREADS)
        c->threads = TPC_MAX_THREADS;
    if (c->queue_size == 0)
        c->queue_size = DEFAULT_QUEUE_SIZE;
    if (c->max_connections == 0)
        c->max_connections = DEFAULT_MAX_CONNECTIONS;
    if (c->idle_timeout_ms == 0)
        c->idle_timeout_ms = DEFAULT_TIMEOUT_MS;
    if (c->send_timeout_ms == 0)
        c->send_timeout_ms = DEFAULT_TIMEOUT_MS;
    if (c->output_high_water == 0)
        c->output_high_water = DEFAULT_HIGH_WATER;
    /* Copies: the caller's strings need not outlive create. */
    s->backend = strdup(c->backend != NULL ? c->backend : cr_handle_set_backends()[0]);
    if (s->backend == NULL)
        return -ENOMEM;
    c->backend = s->backend;
    if (strcmp(c->model, "lf") == 0) {
        s->promotion = strdup(c->promotion != NULL ? c->promotion : DEFAULT_PROMOTION);
        if (s->promotion == NULL)
            return -ENOMEM;
    }
    c->promotion = s->promotion;
    memset(c->listen, 0, sizeof(c->listen));
    return 0;
}

/* lf with groups > 1 over sockets the server opens itself: one
 * SO_REUSEPORT copy of each address per group. */
/*
 * How many copies of each listener the model takes (model_internal.h): lf
 * or hshr with groups > 1, one per handle set, over the server's own sockets (the
 * caller's are shared by every group); prefork with accept_lock reuseport,
 * the master's and one per worker index (its own accept queue, which a
 * successor takes over), inherited sockets too. 1: no copies.
 */
static unsigned listen_groups_for(const struct cr_server *s, const struct cr_server_config *in)
{
    if (strcmp(s->cfg.model, "prefork") == 0 && strcmp(s->cfg.accept_lock, "reuseport") == 0)
        return (unsigned)s->cfg.workers + 1;
    if ((strcmp(s->cfg.model, "lf") != 0 && strcmp(s->cfg.model, "hshr") != 0) ||
        s->cfg.groups <= 1)
        return 1;
    if (s->cfg.groups > s->cfg.threads)
        return 1; /* the model refuses it: open nothing more */
    for (unsigned i = 0; i < CR_SERVER_MAX_LISTEN; i++) {
        if (in->listen_fds[i] > 0)
            return 1;
    }
    return (unsigned)s->cfg.groups;
}

/* TCP_NOTSENT_LOWAT for s's listeners (normalised), 0 for the system's. */
static unsigned notsent_lowat(const struct cr_server *s)
{
    return s->cfg.notsent_lowat == CR_SERVER_NOTSENT_SYSTEM ? 0 : s->cfg.notsent_lowat;
}

/* The listener settings of s's configuration, for address. */
static struct cr_listener_config listener_config(const struct cr_server *s, const char *address,
                                                 bool reuseport)
{
    return (struct cr_listener_config){
        .address = address,
        .backlog = s->cfg.backlog,
        .reuseport = reuseport,
        .defer_accept_s = s->cfg.defer_accept_s,
        .notsent_lowat = notsent_lowat(s),
    };
}

/*
 * Opens groups - 1 more copies of each listener (opened with SO_REUSEPORT),
 * bound to its actual address, so a port 0 copies the port the kernel
 * picked. Lays them out group-major in s->group_fds.
 */
static int open_group_copies(struct cr_server *s, unsigned groups)
{
    size_t n = (size_t)groups * s->nlisten;
    int *fds = malloc(n * sizeof(*fds));
    int err = 0;

    if (fds == NULL)
        return -ENOMEM;
    for (size_t k = 0; k < n; k++)
        fds[k] = k < s->nlisten ? s->listen_fds[k] : -1;
    s->group_fds = fds; /* close_listeners closes what was opened */
    s->listen_groups = groups;
    for (unsigned i = 0; i < s->nlisten; i++) {
        char addr[128];
        struct cr_listener_config lc = listener_config(s, addr, true);

        err = cr_listener_address(s->listen_fds[i], addr, sizeof(addr));
        if (err < 0)
            break;
        for (unsigned g = 1; g < groups && err == 0; g++)
            err = cr_listener_open(&fds[(size_t)g * s->nlisten + i], &lc);
        if (err < 0) {
            /* An inherited socket without SO_REUSEPORT ends here, EADDRINUSE. */
            CR_LOG(CR_LOG_ERROR, "listening on %s again (SO_REUSEPORT): %s", addr, strerror(-err));
            break;
        }
    }
    return err;
}

/* Takes inherited listening socket fd with the options the configured ones
 * get after bind (listener_config). */
static int adopt_listener(struct cr_server *s, int fd)
{
    int err = 0;

    if (s->cfg.defer_accept_s != 0) {
        err = cr_listener_defer_accept(fd, s->cfg.defer_accept_s);
        if (err < 0)
            CR_LOG(CR_LOG_ERROR, "inherited listener %d: TCP_DEFER_ACCEPT: %s", fd, strerror(-err));
    }
    if (err == 0 && notsent_lowat(s) != 0) {
        err = cr_listener_notsent_lowat(fd, notsent_lowat(s));
        if (err < 0)
            CR_LOG(CR_LOG_ERROR, "inherited listener %d: TCP_NOTSENT_LOWAT: %s", fd,
                   strerror(-err));
    }
    if (err == 0)
        s->listen_fds[s->nlisten++] = fd;
    return err;
}

/* Opens a listener on address as the next of s's own. */
static int open_listener(struct cr_server *s, const char *address, bool reuseport)
{
    struct cr_listener_config lc = listener_config(s, address, reuseport);
    int err = cr_listener_open(&s->listen_fds[s->nlisten], &lc);

    if (err < 0) {
        CR_LOG(CR_LOG_ERROR, "listening on %s: %s", address, strerror(-err));
        return err;
    }
    s->owns_fd[s->nlisten++] = true;
    return 0;
}

/* The loopback choice (cr_server_config.loopback_congestion), or NULL
 * where loopback gets what the other listeners get; *chosen: the caller
 * named it (so it must work). */
static const char *loopback_choice(const struct cr_server *s, bool *chosen)
{
    const char *lo = s->cfg.loopback_congestion;

    *chosen = lo != NULL;
    if (lo != NULL)
        return strcmp(lo, CR_SERVER_CONGESTION_SAME) != 0 ? lo : NULL;
    return s->cfg.tcp_congestion == NULL ? DEFAULT_LOOPBACK_CONGESTION : NULL;
}

/* Whether listener fd's congestion control (which its connections
 * inherit) is name already. */
static bool inherits(int fd, const char *name)
{
    char cur[32];
    socklen_t len = sizeof(cur);

    return getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cur, &len) == 0 &&
           strncmp(cur, name, sizeof(cur)) == 0;
}

/* Sets name on socket fd: 0, or 1 where a default (not chosen) is not
 * allowed and the system's stays; a name the caller chose must work
 * (-errno). */
static int apply_congestion(int fd, const char *name, bool chosen)
{
    int err = cr_listener_congestion(fd, name);

    if (err < 0 && chosen) {
        CR_LOG(CR_LOG_ERROR, "TCP_CONGESTION %s: %s", name, strerror(-err));
        return err;
    }
    if (err < 0)
        CR_LOG(CR_LOG_DEBUG, "TCP_CONGESTION %s: %s; the system's stays", name, strerror(-err));
    return err < 0 ? 1 : 0;
}

/* apply_congestion on a socket of our own: whether the connections may be
 * given name after accept. */
static int try_congestion(const char *name, bool chosen)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int err;

    if (fd < 0)
        return -errno;
    err = apply_congestion(fd, name, chosen);
    close(fd);
    return err;
}

/*
 * Sets listener fd's congestion control, which the connections it accepts
 * inherit: the loopback choice on a loopback listener, else tcp_congestion's
 * (cr_server_config). A wildcard listener also takes connections from this
 * host: those get the loopback choice after accept instead
 * (conn_loopback_congestion, set here), unless they inherit it anyway. say:
 * log a loopback choice (not again for each group's copy).
 */
static int set_congestion(struct cr_server *s, int fd, bool say)
{
    const char *tc = s->cfg.tcp_congestion;
    bool chosen;
    const char *lo = loopback_choice(s, &chosen);
    char addr[128];
    int err;

    /* Only a loopback choice of its own can differ from tcp_congestion's. */
    if (lo != NULL && tc != NULL && strcmp(lo, tc) == 0)
        lo = NULL;
    err = lo != NULL ? cr_listener_is_loopback(fd) : 0;
    if (err < 0)
        return err;
    if (err == 1) {
        err = apply_congestion(fd, lo, chosen);
        /* An administrator who chose BBR for the host should see where it
         * is not used. */
        if (err == 0 && say && cr_listener_address(fd, addr, sizeof(addr)) == 0)
            CR_LOG(CR_LOG_INFO, "%s: loopback, congestion control %s", addr, lo);
        return err < 0 ? err : 0;
    }
    err = tc != NULL ? apply_congestion(fd, tc, true) : 0;
    if (err < 0 || lo == NULL)
        return err;
    err = cr_listener_is_wildcard(fd);
    if (err <= 0 || inherits(fd, lo))
        return err;
    if (s->conn_loopback_congestion == NULL) {
        err = try_congestion(lo, chosen);
        if (err != 0)
            return err < 0 ? err : 0;
        s->conn_loopback_congestion = lo;
    }
    if (say && cr_listener_address(fd, addr, sizeof(addr)) == 0)
        CR_LOG(CR_LOG_INFO, "%s: connections from this host, congestion control %s", addr, lo);
    return 0;
}

/* Opens the configured listeners, or adopts the inherited ones, and the
 * copies the model takes (listen_groups_for); copies need SO_REUSEPORT on
 * the first socket too (it goes on before bind). */
static int open_listeners(struct cr_server *s, const struct cr_server_config *in)
{
    unsigned groups = listen_groups_for(s, in);
    bool reuseport = groups > 1;
    int err = 0;

    for (unsigned i = 0; i < CR_SERVER_MAX_LISTEN && err == 0; i++) {
        if (in->listen_fds[i] > 0)
            err = adopt_listener(s, in->listen_fds[i]);
        else if (in->listen[i] != NULL)
            err = open_listener(s, in->listen[i], reuseport);
    }
    if (err == 0 && s->nlisten == 0)
        err = open_listener(s, DEFAULT_LISTEN, reuseport);
    if (err == 0 && groups > 1)
        err = open_group_copies(s, groups);
    for (size_t k = 0; err == 0 && k < (size_t)s->listen_groups * s->nlisten; k++)
        err = set_congestion(s, s->group_fds != NULL ? s->group_fds[k] : s->listen_fds[k],
                             k < s->nlisten);
    return err;
}

static void close_listeners(struct cr_server *s)
{
    if (s->group_fds != NULL) {
        /* Group 0 is listen_fds, closed below. */
        for (size_t k = s->nlisten; k < (size_t)s->listen_groups * s->nlisten; k++) {
            if (s->group_fds[k] >= 0)
                close(s->group_fds[k]);
        }
        free(s->group_fds);
        s->group_fds = NULL;
    }
    s->listen_groups = 1;
    for (unsigned i = 0; i < s->nlisten; i++) {
        if (s->owns_fd[i])
            close(s->listen_fds[i]);
    }
    s->nlisten = 0;
}

int cr_server_create(struct cr_server **out, const struct cr_server_config *cfg,
                     const struct cr_service *svc)
{
    struct cr_server *s;
    int err;

    *out = NULL;
    if (cfg == NULL || svc == NULL || svc->input == NULL)
        return -EINVAL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->svc = svc;
    s->listen_groups = 1;
    err = normalise(s, cfg);
    if (err < 0)
        goto out_free;
    err = open_listeners(s, cfg);
    if (err < 0)
        goto out_close;
    if (s->cfg.timeline_events != CR_SERVER_TIMELINE_OFF) {
        err = s->cfg.timeline_events < 0
                  ? -EINVAL
                  : cr_timeline_create(&s->timeline, (unsigned)s->cfg.timeline_events);
        if (err < 0)
            goto out_close;
    }
    s->env = (struct cr_model_env){
        .server = s,
        .cfg = &s->cfg,
        .listen_fds = s->group_fds != NULL ? s->group_fds : s->listen_fds,
        .nlisten = s->nlisten,
        .listen_groups = s->listen_groups,
        .conn =
            {
                .svc = svc,
                .server = s,
                .idle_timeout_ms = s->cfg.idle_timeout_ms,
                .send_timeout_ms = s->cfg.send_timeout_ms,
                .output_high_water = s->cfg.output_high_water,
                .send_budget = s->cfg.send_budget,
                .loopback_congestion = s->conn_loopback_congestion,
                .bytes_in = &s->bytes_in,
                .bytes_out = &s->bytes_out,
                .requests = &s->requests,
            },
        .reactor = {.backend = s->cfg.backend, .busy_poll_us = s->cfg.busy_poll_us},
        .accepted = &s->accepted,
        .open_connections = &s->open_connections,
        .bytes_in = &s->bytes_in,
        .bytes_out = &s->bytes_out,
        .requests = &s->requests,
        .timeline = s->timeline,
    };
    err = s->ops->create(&s->model, &s->env);
    if (err < 0)
        goto out_close;
    *out = s;
    return 0;

out_close:
    cr_timeline_destroy(s->timeline);
    close_listeners(s);
out_free:
    free(s->backend);
    free(s->promotion);
    free(s);
    return err;
}

/* A write to a connection the peer closed must not kill the process:
 * sendfile(2) has no MSG_NOSIGNAL. An application's own handler stays. */
static void ignore_sigpipe(void)
{
    struct sigaction old;

    if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
        !(old.sa_flags & SA_SIGINFO)) {
        struct sigaction ign = {.sa_handler = SIG_IGN};

        sigemptyset(&ign.sa_mask);
        (void)sigaction(SIGPIPE, &ign, NULL);
    }
}

int cr_server_start(struct cr_server *s)
{
    int err;

    if (s->state != STATE_CREATED)
        return -EINVAL;
    ignore_sigpipe();
    __atomic_store_n(&s->start_ns, cr_clock_now_ns(), __ATOMIC_RELEASE);
    err = s->ops->start(s->model);
    if (err < 0)
        return err;
    s->state = STATE_STARTED;
    return 0;
}

void cr_server_stop(struct cr_server *s, bool graceful)
{
    /* Relaxed: a flag for cr_server_run's loop; the model synchronises. */
    __atomic_store_n(&s->stop_requested, 1, __ATOMIC_RELAXED);
    s->ops->stop(s->model, graceful);
}

int cr_server_restart(struct cr_server *s)
{
    if (s->ops->restart == NULL)
        return 0;
    return s->ops->restart(s->model);
}

int cr_server_wait(struct cr_server *s)
{
    int err;

    if (s->state != STATE_STARTED)
        return 0; /* never started, or already waited for: no worker runs */
    err = s->ops->wait(s->model);
    if (err < 0)
        return err;
    s->state = STATE_WAITED;
    return 0;
}

/* The signals cr_server_run handles, and SIGPIPE. */
static void run_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGQUIT);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGUSR1);
    sigaddset(set, SIGPIPE);
}

int cr_server_run(struct cr_server *s)
{
    const struct timespec poll_ts = {.tv_sec = 0, .tv_nsec = RUN_POLL_MS * 1000000L};
    const struct timespec zero = {0};
    sigset_t set;
    sigset_t old;
    int err;

    run_signals(&set);
    /* Blocked before the workers start, so they inherit the mask and the
     * signals wait for sigtimedwait here. */
    err = -pthread_sigmask(SIG_BLOCK, &set, &old);
    if (err < 0)
        return err;
    err = cr_server_start(s);
    if (err < 0)
        goto out_restore;
    if (s->cfg.on_started != NULL)
        s->cfg.on_started(s, s->cfg.signal_arg);
    while (!__atomic_load_n(&s->stop_requested, __ATOMIC_RELAXED)) {
        siginfo_t si;
        int signo = sigtimedwait(&set, &si, &poll_ts);

        if (signo < 0)
            continue; /* EAGAIN (timeout) or EINTR */
        switch (signo) {
        case SIGTERM:
        case SIGINT:
            CR_LOG(CR_LOG_INFO, "signal %d: graceful stop", signo);
            cr_server_stop(s, true);
            break;
        case SIGQUIT:
            CR_LOG(CR_LOG_INFO, "signal %d: immediate stop", signo);
            cr_server_stop(s, false);
            break;
        case SIGHUP: {
            int rerr;

            /* No process model forks meanwhile: a child sees the new
             * configuration whole or not at all. */
            if (s->cfg.on_hup != NULL) {
                cr__proc_hold_forks();
                s->cfg.on_hup(s, s->cfg.signal_arg);
                cr__proc_release_forks();
            }
            rerr = cr_server_restart(s);
            if (rerr < 0)
                CR_LOG(CR_LOG_ERROR, "graceful restart: %s", strerror(-rerr));
            break;
        }
        case SIGUSR1:
            if (s->cfg.on_usr1 != NULL)
                s->cfg.on_usr1(s, s->cfg.signal_arg);
            break;
        default:
            break; /* SIGPIPE */
        }
    }
    err = cr_server_wait(s);
out_restore:
    /* Take what arrived meanwhile, so unblocking does not deliver it. */
    while (sigtimedwait(&set, NULL, &zero) > 0)
        ;
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

void cr_server_destroy(struct cr_server *s)
{
    if (s == NULL)
        return;
    if (s->state == STATE_STARTED) {
        s->ops->stop(s->model, false);
        (void)s->ops->wait(s->model);
    }
    s->ops->destroy(s->model);
    cr_timeline_destroy(s->timeline);
    close_listeners(s);
    free(s->backend);
    free(s->promotion);
    free(s);
}

unsigned cr_server_listeners(const struct cr_server *s)
{
    return s->nlisten;
}

int cr_server_address(const struct cr_server *s, unsigned i, char *buf, size_t len)
{
    if (i >= s->nlisten)
        return -EINVAL;
    return cr_listener_address(s->listen_fds[i], buf, len);
}

unsigned cr_server_stats(const struct cr_server *s, struct cr_server_stats *st,
                         struct cr_worker_stats *workers, unsigned max)
{
    uint64_t start = __atomic_load_n(&s->start_ns, __ATOMIC_ACQUIRE);

    memset(st, 0, sizeof(*st));
    st->model = s->cfg.model;
    st->promotion = s->cfg.promotion;
    st->uptime_ns = start != 0 ? cr_clock_now_ns() - start : 0;
    /* Relaxed: counters, pairing with the models' relaxed updates. */
    st->accepted = __atomic_load_n(&s->accepted, __ATOMIC_RELAXED);
    st->open_connections = __atomic_load_n(&s->open_connections, __ATOMIC_RELAXED);
    st->bytes_in = __atomic_load_n(&s->bytes_in, __ATOMIC_RELAXED);
    st->bytes_out = __atomic_load_n(&s->bytes_out, __ATOMIC_RELAXED);
    st->requests = __atomic_load_n(&s->requests, __ATOMIC_RELAXED);
    st->workers = s->ops->stats != NULL ? s->ops->stats(s->model, st, workers, max) : 0;
    return st->workers;
}

int cr_server_timeline(const struct cr_server *s, uint64_t since_ns, struct cr_timeline_view **out)
{
    struct cr_timeline_view *v;
    int err;

    *out = NULL;
    if (s->timeline == NULL)
        return -ENOENT;
    err = cr_timeline_read(s->timeline, since_ns, &v);
    if (err == 0 && s->ops->timeline != NULL)
        err = s->ops->timeline(s->model, v, since_ns);
    if (err < 0) {
        cr_timeline_view_free(v);
        return err;
    }
    *out = v;
    return 0;
}

unsigned cr_server_scoreboard(const struct cr_server *s, struct cr_scoreboard_entry *entries,
                              unsigned max)
{
    if (s->ops->scoreboard == NULL)
        return 0;
    return s->ops->scoreboard(s->model, entries, max);
}

/*
 * model_internal.h - the interface between cr_server (src/server.c) and a
 * concurrency model (src/model_<name>.c). One const struct cr_model_ops per
 * model, picked by name. server.c owns the listening sockets, the service and
 * the counters; the model owns its threads, reactors and connections.
 * Library-internal.
 */
#ifndef CABRANK_MODEL_INTERNAL_H
#define CABRANK_MODEL_INTERNAL_H

#include <cabrank/reactor.h>
#include <cabrank/server.h>
#include <cabrank/timeline.h>

#include "net/conn_internal.h"

struct cr_model;

/* What server.c hands a model. All borrowed for the model's lifetime. */
struct cr_model_env {
    struct cr_server *server;
    const struct cr_server_config *cfg; /* normalised: defaults filled in */
    /*
     * nlisten addresses, each open listen_groups times, group-major:
     * listen_fds[g * nlisten + i] is group g's socket for address i.
     * listen_groups is 1 (one socket per address, for every thread) except
     * under lf or hshr with groups > 1 over listeners the server opened
     * itself: then cfg->groups SO_REUSEPORT copies, one per handle set (reactor),
     * and group g's reactor accepts on its own copies only; and under
     * prefork with accept_lock reuseport: cfg->workers + 1, group 0 shared
     * by every worker, group k + 1 the copy of worker index k.
     */
    const int *listen_fds;
    unsigned nlisten;
    unsigned listen_groups;
    struct cr__conn_config conn;      /* for cr__conn_create */
    struct cr_reactor_config reactor; /* for the reactors of reactor, lf, hshr */
    /* Server-wide counters, updated by models with relaxed atomics. */
    uint64_t *accepted;
    uint64_t *open_connections;
    uint64_t *bytes_in;
    uint64_t *bytes_out;
    uint64_t *requests;
    /* The server's timeline (timeline.h), or NULL (off): each thread gets a
     * lane (cr__role_attach), a process model's workers one each. */
    struct cr_timeline *timeline;
};

struct cr_model_ops {
    const char *name;
    /* TCP_NOTSENT_LOWAT when the configuration leaves it 0:
     * CR_SERVER_NOTSENT_LOWAT, or CR_SERVER_NOTSENT_SYSTEM for a model it
     * does not suit; 0 here means CR_SERVER_NOTSENT_LOWAT. */
    unsigned notsent_lowat;
    int (*create)(struct cr_model **out, const struct cr_model_env *env);
    int (*start)(struct cr_model *m);
    /* Thread-safe; returns at once. */
    void (*stop)(struct cr_model *m, bool graceful);
    /* Waits for every thread to exit after stop. */
    int (*wait)(struct cr_model *m);
    void (*destroy)(struct cr_model *m);
    /* Fills model-specific stats and worker roles; returns the worker count. */
    unsigned (*stats)(const struct cr_model *m, struct cr_server_stats *st,
                      struct cr_worker_stats *workers, unsigned max);
    /* Graceful restart (cr_server_restart). Thread-safe. Optional: NULL
     * means nothing to restart. */
    int (*restart)(struct cr_model *m);
    /* Process models: copies the scoreboard (cr_server_scoreboard).
     * Optional: NULL means none. */
    unsigned (*scoreboard)(const struct cr_model *m, struct cr_scoreboard_entry *e, unsigned max);
    /* Optional: adds to v the lanes the model keeps outside env->timeline
     * (a process pool's workers), their events since since_ns. -ENOMEM. */
    int (*timeline)(const struct cr_model *m, struct cr_timeline_view *v, uint64_t since_ns);
};

extern const struct cr_model_ops cr__model_reactor_ops;
extern const struct cr_model_ops cr__model_lf_ops;
extern const struct cr_model_ops cr__model_hshr_ops;
extern const struct cr_model_ops cr__model_tpc_ops;
extern const struct cr_model_ops cr__model_forking_ops;
extern const struct cr_model_ops cr__model_prefork_ops;
extern const struct cr_model_ops cr__model_proactor_ops;

#endif /* CABRANK_MODEL_INTERNAL_H */

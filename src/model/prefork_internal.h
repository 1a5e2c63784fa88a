/*
 * prefork_internal.h - what the prefork model's two roles share: the Worker
 * Pool Manager (prefork_manager.c, a thread of the master process) and the
 * worker (prefork_worker.c, a child process the manager forks). The manager
 * sets the pool up before the first fork; each worker reads its inherited
 * copy and never writes it. Library-internal.
 */
#ifndef CABRANK_PREFORK_INTERNAL_H
#define CABRANK_PREFORK_INTERNAL_H

#include "model/model_internal.h"
#include "net/accept_lock_internal.h"
#include "pool/scoreboard_internal.h"

#include <stdint.h>

/*
 * The Worker Pool as both roles see it. Immutable after create. The accept
 * lock, the scoreboard and its totals are shared memory (or a shared file
 * lock): what the manager and the workers write there is seen by all.
 */
struct cr__prefork_pool {
    struct cr_model_env env;
    const struct cr_server_config *cfg;
    struct cr__accept_lock *alock;
    struct cr__scoreboard *sb;
    struct cr__scoreboard_totals *totals; /* sb's */
};

/*
 * reuseport: whether the server opened SO_REUSEPORT copies of the
 * listeners, one per worker index (cfg->workers of them). The copies live
 * in the master, so a worker that exits leaves the connections queued on
 * its copy to its successor, where a copy of the worker's own would reset
 * them when closed. Spare workers beyond cfg->workers have none.
 */
static inline bool cr__prefork_has_copies(const struct cr__prefork_pool *pool)
{
    return pool->env.listen_groups > 1;
}

/* reuseport: worker index k's copy of listener i (its listen group k + 1;
 * group 0 is the sockets every worker shares). */
static inline int cr__prefork_copy_fd(const struct cr__prefork_pool *pool, int k, unsigned i)
{
    return pool->env.listen_fds[(size_t)(k + 1) * pool->env.nlisten + i];
}

/*
 * The body of a worker process, called in the child right after the fork
 * (the manager has closed its own state there). slot and tag: the
 * scoreboard slot the manager claimed for it; rp_index: the reuseport copies
 * it accepts on, -1 for none. Returns the process's exit status: 0 when it
 * stopped as told or retired itself, 3 when the service's process_init
 * failed, 4 out of memory or threads, 5 when its listeners could not be set
 * up. Worker process only.
 */
int cr__prefork_worker_main(const struct cr__prefork_pool *pool, unsigned slot, uint32_t tag,
                            int rp_index);

#endif /* CABRANK_PREFORK_INTERNAL_H */

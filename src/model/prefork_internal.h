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
 * The listening sockets, env.listen_fds[0 .. nsockets): one per address,
 * and under reuseport cfg->workers SO_REUSEPORT copies of each besides
 * (the kernel spreads arrivals over them). Every worker accepts on all of
 * them, so a connection queued on any copy goes to whichever worker is
 * free; the copies live in the master, so a worker that exits resets no
 * queued connection (closing a socket's last copy would).
 */
static inline size_t cr__prefork_nsockets(const struct cr__prefork_pool *pool)
{
    return (size_t)pool->env.listen_groups * pool->env.nlisten;
}

/*
 * The body of a worker process, called in the child right after the fork
 * (the manager has closed its own state there). slot and tag: the
 * scoreboard slot the manager claimed for it. Returns the process's exit status: 0 when it
 * stopped as told or retired itself, 3 when the service's process_init
 * failed, 4 out of memory or threads, 5 when its listeners could not be set
 * up. Worker process only.
 */
int cr__prefork_worker_main(const struct cr__prefork_pool *pool, unsigned slot, uint32_t tag);

#endif /* CABRANK_PREFORK_INTERNAL_H */

/*
 * pg.h - a throwaway PostgreSQL server for tests: initdb into a fresh
 * directory under /tmp, postgres on a free 127.0.0.1 port, stopped and
 * removed by the test. Linked into every unit runner and integration
 * program, so it only runs processes: no libpq.
 *
 * The binaries come from $CR_TEST_PG_BINDIR when set (another
 * installation; a directory without them makes every PostgreSQL test skip),
 * else from /usr/lib/postgresql/<highest version>/bin. As
 * root (postgres refuses to run as root) the directory is given to the
 * 'postgres' user and initdb and postgres run as that user. It runs with
 * deadlock_timeout=20ms, so that provoked deadlocks resolve fast. The server
 * dies with the thread that started it (PR_SET_PDEATHSIG), so a crashed
 * test leaves nothing running; its output goes to <dir>/log.
 */
#ifndef CABRANK_TEST_PG_H
#define CABRANK_TEST_PG_H

#include <sys/types.h>

struct cr_test_pg {
    char dir[256]; /* /tmp/cr-pg-XXXXXX: data/, the Unix socket, log */
    char url[256]; /* postgresql://cabrank@127.0.0.1:PORT/postgres */
    int port;
    pid_t pid; /* the postmaster; 0 when not running */
};

/*
 * Creates a database cluster (user cabrank, trust authentication) and
 * starts its server; returns once it accepts connections (a wait scaled by
 * cr_test_tmo).
 * 0; -ENOENT when PostgreSQL is not installed (or, as root, there is no
 * 'postgres' user): the caller skips its test; -ETIMEDOUT or another
 * -errno, with the tail of the server's log on stderr. On failure nothing
 * is left behind. The server is a child of the calling thread and dies
 * when that thread ends.
 */
int cr_test_pg_start(struct cr_test_pg *pg);

/* Fast shutdown (SIGINT), SIGKILL if it takes over 10 s (scaled), then
 * removes the directory. Safe after a failed start, a kill or a stop. */
void cr_test_pg_stop(struct cr_test_pg *pg);

/* Kills the server at once, as a crash would: SIGKILL to the postmaster
 * and every process it started, and returns once they are all gone (so
 * none commits anything after); the directory stays for cr_test_pg_stop.
 * 0 or -errno (-ESRCH: not running, -ETIMEDOUT). */
int cr_test_pg_kill(struct cr_test_pg *pg);

/* Starts the server of a killed one again, on its directory and port (its
 * url stays valid); returns once it accepts connections, after its crash
 * recovery. 0, -EINVAL (not killed), -EADDRINUSE (it exited at once: most
 * likely another process took the port meanwhile), -ETIMEDOUT or another
 * -errno. */
int cr_test_pg_restart(struct cr_test_pg *pg);

#endif /* CABRANK_TEST_PG_H */

/*
 * ledger.h - cabrank-ledger's transaction service (the OLTP example's back end): a
 * cr_service speaking the protocol of proto.h over the database of
 * ledger_db.h, with multi-request transactions kept by the Session Context
 * Manager (cabrank/session.h). Runs unchanged under every model of
 * cr_server; a write blocks its worker until the database has made it
 * durable, and only then is its reply queued.
 *
 * Requests without a session: OPEN, DEPOSIT, WITHDRAW, TRANSFER are one
 * atomic unit each; BALANCE and HISTORY read; PING answers OK. BEGIN
 * creates a session and answers with its id in the header's session field.
 * Such writes pipelined on one connection (consecutive frames, up to 64)
 * are applied by one ledger_db_apply_batch, so they share a group commit as
 * writes of different connections do; each keeps its own outcome, and every
 * reply follows its request's order on the connection.
 *
 * Requests with a session (header field != 0): DEPOSIT, WITHDRAW and
 * TRANSFER are queued in the session (QUEUED; TOO_LARGE past
 * OLTP_MAX_SESSION_OPS, the session then stays as it was); COMMIT applies
 * the queue as one unit (OK with the count, or the failing op's status,
 * nothing applied) and ends the session either way; ABORT ends it, applying
 * nothing; PING touches it (restarts its idle clock). OPEN, BALANCE,
 * HISTORY and BEGIN answer NOT_IN_SESSION without looking at the session.
 * BEGIN beyond the caps (max_sessions, max_sessions_per_conn) answers
 * TOO_MANY_SESSIONS. A session's context grows with the ops queued in it, so
 * a session begun and left costs some hundred bytes until it expires.
 * An unknown, expired or ended session answers NO_SESSION; a session in use
 * by another request at that moment (its COMMIT being applied), SESSION_BUSY. COMMIT or ABORT
 * without a session answers NO_SESSION. Any connection may continue any session.
 *
 * Errors: a frame with a bad body size or an unknown op gets an error reply
 * and the stream goes on; a stream that is not ours (bad magic, flags,
 * length over OLTP_MAX_BODY) is closed.
 *
 * Process models (forking, prefork; cfg.process_model): each worker process
 * opens its own database connections, session table and sweeper in
 * process_init; sessions are then per process, so one begun in a worker
 * process continues only on connections served by that process (under
 * forking, only on the connection that began it).
 */
#ifndef CABRANK_OLTP_LEDGER_H
#define CABRANK_OLTP_LEDGER_H

#include <cabrank/common.h>
#include <cabrank/service.h>

struct ledger;

#define LEDGER_IDLE_TIMEOUT_MS_DEFAULT    300000
#define LEDGER_SESSION_TIMEOUT_MS_DEFAULT 60000
/* Open sessions per process, and per connection (sessions it began and has not ended), that
 * BEGIN accepts: far above what clients in earnest keep open, and low enough that a client
 * opening sessions it never ends, or a flood of garbage frames, holds bounded memory (an
 * empty session costs some 130 bytes, a full one some 3 KB; docs/oltp.md).
 * main_ledger.c's --help repeats them. */
#define LEDGER_MAX_SESSIONS_DEFAULT          16384
#define LEDGER_MAX_SESSIONS_PER_CONN_DEFAULT 1024

struct ledger_config {
    /* Database url (ledger_db_config.url). Required. Borrowed. */
    const char *db_url;
    /* ledger_db_config.group_commit. */
    bool group_commit;
    /* Close a connection idle this long; 0 = LEDGER_IDLE_TIMEOUT_MS_DEFAULT. */
    uint64_t idle_timeout_ms;
    /* Sessions idle this long expire; 0 = LEDGER_SESSION_TIMEOUT_MS_DEFAULT. */
    uint64_t session_timeout_ms;
    /* BEGIN answers TOO_MANY_SESSIONS beyond, in this process; 0 =
     * LEDGER_MAX_SESSIONS_DEFAULT. */
    unsigned max_sessions;
    /* BEGIN answers TOO_MANY_SESSIONS beyond, for sessions begun on one connection and not
     * ended yet (whichever connection continues them); 0 =
     * LEDGER_MAX_SESSIONS_PER_CONN_DEFAULT. A gateway's connection carries many clients'
     * sessions: size this to what one of its connections may carry. */
    unsigned max_sessions_per_conn;
    /* The service runs under a process model (forking, prefork): create
     * only checks that the database opens (and creates its schema), then
     * closes it before any fork; each worker process opens its own. */
    bool process_model;
};

struct ledger_stats {
    uint64_t requests;        /* replies queued */
    uint64_t writes;          /* single-op writes applied (OK or a refusal) */
    uint64_t sessions;        /* sessions begun */
    uint64_t session_commits; /* COMMITs that applied their ops */
    uint64_t session_aborts;  /* ABORTs, and COMMITs refused by the database */
    uint64_t expired;         /* sessions collected idle */
    unsigned live_sessions;   /* sessions held now */
    uint64_t begins_refused;  /* BEGINs answered TOO_MANY_SESSIONS */
    uint64_t units;           /* ledger_db_stats: units, database commits, */
    uint64_t commits;         /* and the most units one commit carried */
    uint64_t max_batch;
};

/*
 * Opens the database (creating its schema) and the session table, and
 * starts the thread that collects idle sessions. 0, -EINVAL (no url),
 * -ENOMEM, or ledger_db_open's error. *out returns owned. Thread-safe.
 */
CR_MUST_CHECK int ledger_create(struct ledger **out, const struct ledger_config *cfg);

/* Stops the sweeper, frees every session and closes the database. No
 * server may still run the service. NULL-safe. Owner thread only. */
void ledger_destroy(struct ledger *l);

/* The service to hand to cr_server_create (borrowed; lives as long as l).
 * Thread-safe. */
const struct cr_service *ledger_service(struct ledger *l);

/* The counters of this process (zero in a process model's master).
 * Thread-safe. */
void ledger_stats(struct ledger *l, struct ledger_stats *st);

/* Collects every session idle longer than the timeout now (what the
 * sweeper does periodically); how many. Thread-safe. */
unsigned ledger_expire_sessions(struct ledger *l);

#endif /* CABRANK_OLTP_LEDGER_H */

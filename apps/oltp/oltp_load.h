/*
 * oltp_load.h - the OLTP load generator, the engine of
 * cabrank-oltp-load: opens and funds the accounts (setup), then drives N
 * clients, each its own connection and thread, against cabrank-gateway or a
 * cabrank-ledger, closed loop or open loop at a fixed rate. Every
 * acknowledged transfer goes to a log, and every transfer whose outcome was
 * never learnt (its reply lost) to "<log>.sent"; both are fsynced before
 * oltp_load_run returns, so the checker (oltp_check.h) reads them whole.
 *
 * Open loop: request i of the whole run is due at start + i / rate, and its
 * latency counts from that time, not from when a free client sent it, so a
 * slow server shows as queueing delay (no coordinated omission).
 */
#ifndef CABRANK_OLTP_LOAD_H
#define CABRANK_OLTP_LOAD_H

#include "../common/samples.h"
#include "proto.h"

#include <stdio.h>

/* What setup deposits into each account. Transfers move 1..100, so a
 * balance rarely runs out. */
#define OLTP_LOAD_DEPOSIT  100000
#define OLTP_LOAD_ACCOUNTS 100

enum oltp_load_mix {
    OLTP_MIX_TRANSFER, /* transfers only */
    OLTP_MIX_MIXED,    /* transfers, balance reads, sessions of two transfers */
};

struct oltp_load_config {
    /* "HOST:PORT" of a gateway or a ledger. Required. Borrowed. */
    const char *target;
    /* Clients, each a thread and a connection; 0 = 1. */
    unsigned clients;
    /* Requests per second over all clients (a mixed run's session counts
     * as one); 0 = closed loop. */
    double rate;
    /* Bounds: either or both (the first reached ends the run); none = 1 s. */
    double seconds;
    uint64_t requests;
    /* Accounts 1..accounts; 0 = OLTP_LOAD_ACCOUNTS. */
    uint64_t accounts;
    enum oltp_load_mix mix;
    /* The log of acknowledged transfers, and log + ".sent"; NULL = none
     * (then nothing can be checked). Borrowed. */
    const char *log;
    /* Append to the logs instead of starting them afresh: for several runs
     * against one database, checked together. */
    bool append;
    /* Resend a transfer whose connection failed (or that the gateway could
     * not place, or the database failed), after reconnecting, until
     * acknowledged or the bound ends; failed connections are then expected,
     * not errors. */
    bool retry;
    /* A new connection for every request (the benchmark's baseline). */
    bool connect_per_request;
};

struct oltp_load_result {
    double elapsed_s;
    uint64_t acked;     /* transfers acknowledged (sessions' included) */
    uint64_t replies;   /* replies of every op */
    uint64_t sessions;  /* sessions committed */
    uint64_t in_flight; /* transfers whose outcome was never learnt */
    /* Transfers answered IN_DOUBT (sessions' counted per transfer), each
     * time: resent only with their key, else logged as of unknown outcome. */
    uint64_t in_doubt;
    uint64_t status[OLTP_ST_COUNT]; /* replies by status */
    uint64_t conn_errors;           /* failed connects, sends, reads, timeouts */
    uint64_t proto_errors;          /* replies that did not decode or match */
    uint64_t retries;
    /* What the run should not have met: error statuses other than
     * INSUFFICIENT, and connection failures unless retry is set. */
    uint64_t unexpected;
    uint64_t samples; /* latency samples: acknowledged single transfers */
    struct bench_pcts pcts;
    double max_us;
};

/*
 * Opens accounts 1..accounts (EXISTS is fine) and deposits
 * OLTP_LOAD_DEPOSIT into each under a key derived from the account, so a
 * second setup changes nothing. 0, -ECONNREFUSED and other -errno, or
 * -EPROTO (an unexpected reply; said on err). Owner thread only.
 */
CR_MUST_CHECK int oltp_load_setup(const struct oltp_load_config *cfg, FILE *err);

/*
 * Runs the load and fills *res. 0, -EINVAL (bad target), -EIO (the logs
 * could not be written: said on err), -ENOMEM. Owner thread only; starts
 * and joins the clients' threads.
 */
CR_MUST_CHECK int oltp_load_run(const struct oltp_load_config *cfg, struct oltp_load_result *res,
                                FILE *err);

/* Prints the results: throughput, latency percentiles, replies by status,
 * errors. Owner thread only. */
void oltp_load_print(const struct oltp_load_config *cfg, const struct oltp_load_result *res,
                     FILE *out);

#endif /* CABRANK_OLTP_LOAD_H */

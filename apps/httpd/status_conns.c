/*
 * status_conns.c - the registry of the service's open connections, for the
 * status page's connection table (status.h). The serving threads call
 * status_conn_* at a connection's open and close and at its request's start
 * and end; the thread that renders a status page copies the rows. The rows
 * are the service's (embedded in its per-connection state); the shards and
 * their locks are the status object's.
 *
 * A shard is a mutex and a doubly linked list; a connection goes into the
 * shard of the worker that opened it, so the threads of different workers
 * rarely meet on a lock, and a copy takes each shard's lock in turn (never
 * two at once), so no row is read half-written.
 */
#include "status_internal.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

void status_conn_open(struct status *st, struct status_conn *sc, unsigned worker,
                      const struct sockaddr *peer, socklen_t peer_len, uint64_t now_ns)
{
    struct status_shard *sh = &status_shards(st)[worker % STATUS_CONN_SHARDS];

    memset(&sc->peer, 0, sizeof(sc->peer));
    if (peer != NULL && peer_len > 0)
        memcpy(&sc->peer, peer, peer_len < sizeof(sc->peer) ? peer_len : sizeof(sc->peer));
    sc->shard = worker % STATUS_CONN_SHARDS;
    sc->state = STATUS_CONN_READING;
    sc->since_ns = now_ns;
    sc->requests = 0;
    sc->line_len = 0;
    sc->prev = NULL;
    pthread_mutex_lock(&sh->lock);
    sc->next = sh->head;
    if (sh->head != NULL)
        sh->head->prev = sc;
    sh->head = sc;
    sh->count++;
    pthread_mutex_unlock(&sh->lock);
}

void status_conn_set(struct status *st, struct status_conn *sc, enum status_conn_state state,
                     uint64_t now_ns)
{
    struct status_shard *sh = &status_shards(st)[sc->shard];

    pthread_mutex_lock(&sh->lock);
    if (sc->state == STATUS_CONN_WRITING && state != STATUS_CONN_WRITING)
        sc->requests++;
    sc->state = state;
    sc->since_ns = now_ns;
    pthread_mutex_unlock(&sh->lock);
}

/* Appends s[0..len) to line (*n used), as much as fits in
 * STATUS_CONN_LINE_MAX - 1 bytes. */
static void append(char *line, size_t *n, const char *s, size_t len)
{
    size_t room = STATUS_CONN_LINE_MAX - 1 - *n;

    if (len > room)
        len = room;
    memcpy(line + *n, s, len);
    *n += len;
}

void status_conn_request(struct status *st, struct status_conn *sc, const char *method,
                         size_t method_len, const char *target, size_t target_len, int minor,
                         uint64_t now_ns)
{
    struct status_shard *sh = &status_shards(st)[sc->shard];
    char line[STATUS_CONN_LINE_MAX];
    char version[] = " HTTP/1.x";
    size_t n = 0;

    /* Put together before the lock, only copied under it; by copies: a
     * format string would be most of what the registry costs a request
     * (docs/httpd.md, "The status page"). */
    version[sizeof(version) - 2] = (char)('0' + (minor >= 0 && minor <= 9 ? minor : 1));
    append(line, &n, method, method_len);
    append(line, &n, " ", 1);
    append(line, &n, target, target_len);
    append(line, &n, version, sizeof(version) - 1);
    pthread_mutex_lock(&sh->lock);
    if (sc->state == STATUS_CONN_WRITING)
        sc->requests++; /* pipelined: the previous one is answered */
    sc->state = STATUS_CONN_WRITING;
    sc->since_ns = now_ns;
    sc->line_len = n;
    memcpy(sc->line, line, n);
    pthread_mutex_unlock(&sh->lock);
}

void status_conn_close(struct status *st, struct status_conn *sc)
{
    struct status_shard *sh = &status_shards(st)[sc->shard];

    pthread_mutex_lock(&sh->lock);
    if (sc->prev != NULL)
        sc->prev->next = sc->next;
    else
        sh->head = sc->next;
    if (sc->next != NULL)
        sc->next->prev = sc->prev;
    sh->count--;
    pthread_mutex_unlock(&sh->lock);
}

const char *status_conn_state_name(enum status_conn_state s)
{
    static const char *const names[STATUS_CONN_STATES] = {"reading", "writing", "keep-alive"};

    return (unsigned)s < STATUS_CONN_STATES ? names[s] : "?";
}

/* "addr:port", "[addr]:port" or "-". */
static void format_peer(const union status_peer *p, char *buf, size_t cap)
{
    char addr[INET6_ADDRSTRLEN];

    if (p->sa.sa_family == AF_INET &&
        inet_ntop(AF_INET, &p->in.sin_addr, addr, sizeof(addr)) != NULL)
        snprintf(buf, cap, "%s:%u", addr, ntohs(p->in.sin_port));
    else if (p->sa.sa_family == AF_INET6 &&
             inet_ntop(AF_INET6, &p->in6.sin6_addr, addr, sizeof(addr)) != NULL)
        snprintf(buf, cap, "[%s]:%u", addr, ntohs(p->in6.sin6_port));
    else if (p->sa.sa_family == AF_UNIX)
        snprintf(buf, cap, "unix");
    else
        snprintf(buf, cap, "-");
}

unsigned status_conns_copy(struct status *st, struct status_conn_row *rows, unsigned cap,
                           unsigned *total, uint64_t now_ns)
{
    struct status_shard *shards = status_shards(st);
    unsigned n = 0;

    *total = 0;
    for (unsigned i = 0; i < STATUS_CONN_SHARDS; i++) {
        struct status_shard *sh = &shards[i];

        pthread_mutex_lock(&sh->lock);
        *total += sh->count;
        for (const struct status_conn *sc = sh->head; sc != NULL && n < cap; sc = sc->next) {
            struct status_conn_row *r = &rows[n++];

            r->addr = sc->peer;
            r->state = sc->state;
            r->in_state_s = now_ns > sc->since_ns ? (double)(now_ns - sc->since_ns) / 1e9 : 0;
            r->requests = sc->requests;
            r->line_len = sc->line_len;
            memcpy(r->line, sc->line, sc->line_len);
        }
        pthread_mutex_unlock(&sh->lock);
    }
    /* Formatted after the locks: the copy is all they cover. */
    for (unsigned i = 0; i < n; i++)
        format_peer(&rows[i].addr, rows[i].peer, sizeof(rows[i].peer));
    return n;
}

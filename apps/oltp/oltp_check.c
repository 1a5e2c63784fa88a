/*
 * oltp_check.c - the OLTP checker (oltp_check.h). Loads both logs into one
 * open-addressing table keyed by the transfer key, walks the database's
 * keyed txns rows once against it, then reads the totals. Runs on the
 * caller's thread; the table lives for one call.
 */
#include "oltp_check.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum entry_kind {
    ENTRY_FREE = 0,
    ENTRY_ACKED, /* in the log: acknowledged */
    ENTRY_SENT,  /* in the .sent log only: outcome unknown */
};

struct entry {
    uint8_t key[OLTP_KEY_SIZE];
    uint8_t kind;  /* enum entry_kind */
    uint32_t seen; /* txns rows carrying the key */
    uint64_t from;
    uint64_t to;
    int64_t amount;
};

struct table {
    struct entry *v;
    size_t cap; /* a power of two */
    size_t len;
};

/* What reading one log found. */
struct log_read {
    bool ok;          /* readable (or, for .sent, absent) */
    uint64_t lines;   /* transfers listed */
    uint64_t bad;     /* lines that did not parse */
    uint64_t repeats; /* keys listed twice */
};

/* What the walk over the txns rows found. */
struct walk {
    struct table *t;
    uint64_t rows;    /* keyed TRANSFER rows */
    uint64_t differ;  /* rows of an acknowledged key with other accounts or amount */
    uint64_t foreign; /* rows whose key neither log has */
    uint8_t first_foreign[OLTP_KEY_SIZE];
    uint8_t first_differ[OLTP_KEY_SIZE];
};

static const char hexdig[] = "0123456789abcdef";

static void key_hex(const uint8_t *key, char *out)
{
    for (int i = 0; i < OLTP_KEY_SIZE; i++) {
        out[2 * i] = hexdig[key[i] >> 4];
        out[2 * i + 1] = hexdig[key[i] & 15];
    }
    out[2 * OLTP_KEY_SIZE] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

size_t oltp_log_format(const struct ledger_op *t, char *buf)
{
    char hex[2 * OLTP_KEY_SIZE + 1];
    int n;

    key_hex(t->key, hex);
    n = snprintf(buf, OLTP_LOG_LINE_MAX, "%s %" PRIu64 " %" PRIu64 " %" PRId64 "\n", hex,
                 t->account, t->to, t->amount);
    /* 32 + 3 spaces + three numbers of at most 20 characters fit in 96. */
    return n > 0 && n < OLTP_LOG_LINE_MAX ? (size_t)n : 0;
}

/* Parses a decimal number ending at a space, a newline or the end. */
static const char *parse_u64(const char *s, uint64_t *v)
{
    uint64_t x = 0;
    const char *p = s;

    while (*p >= '0' && *p <= '9') {
        unsigned d = (unsigned)(*p - '0');

        if (x > (UINT64_MAX - d) / 10)
            return NULL;
        x = x * 10 + d;
        p++;
    }
    if (p == s || (*p != ' ' && *p != '\n' && *p != '\0'))
        return NULL;
    *v = x;
    return p;
}

int oltp_log_parse(const char *line, struct ledger_op *t)
{
    const char *p = line;
    uint64_t amount;

    memset(t, 0, sizeof(*t));
    t->op = OLTP_OP_TRANSFER;
    for (int i = 0; i < OLTP_KEY_SIZE; i++) {
        int hi = hexval(p[2 * i]);
        int lo = hi < 0 ? -1 : hexval(p[2 * i + 1]);

        if (lo < 0)
            return -EBADMSG;
        t->key[i] = (uint8_t)(hi << 4 | lo);
    }
    p += 2 * OLTP_KEY_SIZE;
    if (*p++ != ' ' || (p = parse_u64(p, &t->account)) == NULL || *p++ != ' ' ||
        (p = parse_u64(p, &t->to)) == NULL || *p++ != ' ' || (p = parse_u64(p, &amount)) == NULL)
        return -EBADMSG;
    if ((*p != '\n' && *p != '\0') || (*p == '\n' && p[1] != '\0') || amount > (uint64_t)INT64_MAX)
        return -EBADMSG;
    t->amount = (int64_t)amount;
    return 0;
}

/* Keys are random, but a hand-made log may not be: mix all 16 bytes. */
static size_t key_hash(const uint8_t *key)
{
    uint64_t a;
    uint64_t b;

    memcpy(&a, key, 8);
    memcpy(&b, key + 8, 8);
    a ^= b * 0x9e3779b97f4a7c15ULL;
    a ^= a >> 31;
    a *= 0xbf58476d1ce4e5b9ULL;
    a ^= a >> 29;
    return (size_t)a;
}

static struct entry *table_find(struct table *t, const uint8_t *key)
{
    if (t->cap == 0)
        return NULL;
    for (size_t i = key_hash(key) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        struct entry *e = &t->v[i];

        if (e->kind == ENTRY_FREE)
            return NULL;
        if (memcmp(e->key, key, OLTP_KEY_SIZE) == 0)
            return e;
    }
}

/* The slot for key: its entry, or a free one to fill (kind FREE). */
static int table_slot(struct table *t, const uint8_t *key, struct entry **out)
{
    if ((t->len + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        struct entry *v = calloc(cap, sizeof(*v));
        struct table n = {v, cap, 0};

        if (v == NULL)
            return -ENOMEM;
        for (size_t i = 0; i < t->cap; i++) {
            struct entry *dst;

            if (t->v[i].kind == ENTRY_FREE)
                continue;
            for (size_t j = key_hash(t->v[i].key) & (cap - 1);; j = (j + 1) & (cap - 1)) {
                dst = &v[j];
                if (dst->kind == ENTRY_FREE)
                    break;
            }
            *dst = t->v[i];
            n.len++;
        }
        free(t->v);
        *t = n;
    }
    for (size_t i = key_hash(key) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        struct entry *e = &t->v[i];

        if (e->kind == ENTRY_FREE || memcmp(e->key, key, OLTP_KEY_SIZE) == 0) {
            *out = e;
            return 0;
        }
    }
}

/* Reads one log into t as kind. An acknowledged entry stays acknowledged
 * when the .sent log lists its key too (a retry learnt its outcome). */
static int read_log(struct table *t, const char *path, uint8_t kind, bool may_be_absent,
                    struct log_read *lr)
{
    FILE *f = fopen(path, "re");
    char *line = NULL;
    size_t cap = 0;
    int err = 0;

    memset(lr, 0, sizeof(*lr));
    if (f == NULL) {
        lr->ok = errno == ENOENT && may_be_absent;
        return 0;
    }
    lr->ok = true;
    while (getline(&line, &cap, f) > 0) {
        struct ledger_op op;
        struct entry *e;

        if (oltp_log_parse(line, &op) < 0) {
            lr->bad++;
            continue;
        }
        err = table_slot(t, op.key, &e);
        if (err < 0)
            break;
        lr->lines++;
        if (e->kind != ENTRY_FREE) {
            if (e->kind == kind)
                lr->repeats++;
            if (e->kind == ENTRY_ACKED)
                continue;
        } else {
            t->len++;
        }
        memcpy(e->key, op.key, OLTP_KEY_SIZE);
        e->kind = kind;
        e->from = op.account;
        e->to = op.to;
        e->amount = op.amount;
    }
    if (ferror(f))
        lr->ok = false;
    free(line);
    fclose(f);
    return err;
}

static int on_row(void *arg, const struct ledger_op *row, int64_t balance_after)
{
    struct walk *w = arg;
    struct entry *e;

    (void)balance_after;
    if (row->op != OLTP_OP_TRANSFER)
        return 0;
    w->rows++;
    e = table_find(w->t, row->key);
    if (e == NULL) {
        if (w->foreign++ == 0)
            memcpy(w->first_foreign, row->key, OLTP_KEY_SIZE);
        return 0;
    }
    e->seen++;
    if (e->kind == ENTRY_ACKED &&
        (e->from != row->account || e->to != row->to || e->amount != row->amount)) {
        if (w->differ++ == 0)
            memcpy(w->first_differ, row->key, OLTP_KEY_SIZE);
    }
    return 0;
}

static void verdict(FILE *out, struct oltp_check_result *res, const char *name, bool pass,
                    const char *what)
{
    if (pass) {
        res->passed++;
        fprintf(out, "PASS %s\n", name);
    } else {
        res->failed++;
        fprintf(out, "FAIL %s: %s\n", name, what);
    }
}

/* A SQLite database that is not there would be created empty by the open,
 * and then every acknowledged transfer would read as missing: say so. */
static bool is_missing_sqlite(const char *url)
{
    if (strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0)
        return false;
    if (strncmp(url, "sqlite:", 7) == 0)
        url += 7;
    return access(url, F_OK) < 0;
}

int oltp_check_run(const struct oltp_check_config *cfg, FILE *out, struct oltp_check_result *res)
{
    struct ledger_db_config dbc = {.url = cfg->db_url};
    struct ledger_db *db = NULL;
    struct table t = {0};
    struct log_read acked;
    struct log_read sent;
    struct walk w = {.t = &t};
    char sent_path[4096];
    char what[512];
    char hex[2 * OLTP_KEY_SIZE + 1];
    bool logs_ok;
    bool walked = false;
    int err;

    memset(res, 0, sizeof(*res));
    if (cfg->sent != NULL)
        snprintf(sent_path, sizeof(sent_path), "%s", cfg->sent);
    else
        snprintf(sent_path, sizeof(sent_path), "%s.sent", cfg->log);
    err = read_log(&t, cfg->log, ENTRY_ACKED, false, &acked);
    if (err == 0)
        err = read_log(&t, sent_path, ENTRY_SENT, true, &sent);
    if (err < 0)
        goto out_free;
    logs_ok = acked.ok && sent.ok && acked.bad == 0 && sent.bad == 0 && acked.repeats == 0;

    if (is_missing_sqlite(cfg->db_url)) {
        fprintf(out, "database %s: no such file\n", cfg->db_url);
    } else if (ledger_db_open(&db, &dbc) < 0) {
        fprintf(out, "database %s: cannot open\n", cfg->db_url);
        db = NULL;
    } else {
        int werr = ledger_db_each_keyed(db, on_row, &w);

        walked = werr == 0;
        if (werr == -ENOMEM) {
            err = werr;
            goto out_close;
        }
    }

    /* 1: every acknowledged transfer present exactly once, as logged. */
    if (!logs_ok) {
        snprintf(what, sizeof(what),
                 "the log %s, its .sent %s, %" PRIu64 " bad lines, %" PRIu64 " keys listed twice",
                 acked.ok ? "read" : "unreadable", sent.ok ? "read" : "unreadable",
                 acked.bad + sent.bad, acked.repeats);
        verdict(out, res, "acknowledged_once", false, what);
    } else if (!walked) {
        verdict(out, res, "acknowledged_once", false, "the database's txns could not be read");
    } else {
        uint64_t nacked = 0;
        uint64_t missing = 0;
        uint64_t dup = 0;
        const uint8_t *first = NULL;

        for (size_t i = 0; i < t.cap; i++) {
            struct entry *e = &t.v[i];

            if (e->kind != ENTRY_ACKED)
                continue;
            nacked++;
            if (e->seen == 0)
                missing++;
            else if (e->seen > 1)
                dup++;
            if (e->seen != 1 && first == NULL)
                first = e->key;
        }
        if (missing == 0 && dup == 0 && w.differ == 0) {
            verdict(out, res, "acknowledged_once", true, NULL);
        } else {
            key_hex(first != NULL ? first : w.first_differ, hex);
            snprintf(what, sizeof(what),
                     "of %" PRIu64 " acknowledged, %" PRIu64 " missing, %" PRIu64
                     " more than once, %" PRIu64 " with other accounts or amount (first key %s)",
                     nacked, missing, dup, w.differ, hex);
            verdict(out, res, "acknowledged_once", false, what);
        }
    }

    /* 2: no transfer row whose key the load never sent. */
    if (!logs_ok || !walked) {
        verdict(out, res, "nothing_unsent", false,
                !logs_ok ? "the logs could not be read" : "the database's txns could not be read");
    } else if (w.foreign == 0) {
        verdict(out, res, "nothing_unsent", true, NULL);
    } else {
        key_hex(w.first_foreign, hex);
        snprintf(what, sizeof(what),
                 "%" PRIu64 " of %" PRIu64 " transfer rows carry a key never sent (first %s)",
                 w.foreign, w.rows, hex);
        verdict(out, res, "nothing_unsent", false, what);
    }

    /* 3 and 4: the totals. */
    {
        int64_t sum = 0;
        uint64_t accounts = 0;
        uint64_t negative = 0;
        bool have = db != NULL && ledger_db_totals(db, &sum, &accounts, &negative) == 0;

        if (!have) {
            verdict(out, res, "sum_unchanged", false, "the database's totals could not be read");
            verdict(out, res, "no_negative", false, "the database's totals could not be read");
        } else {
            snprintf(what, sizeof(what),
                     "the %" PRIu64 " balances sum to %" PRId64 ", expected %" PRId64, accounts,
                     sum, cfg->expect_sum);
            verdict(out, res, "sum_unchanged", sum == cfg->expect_sum, what);
            snprintf(what, sizeof(what), "%" PRIu64 " of %" PRIu64 " balances are negative",
                     negative, accounts);
            verdict(out, res, "no_negative", negative == 0, what);
        }
    }
    err = 0;
out_close:
    ledger_db_close(db);
out_free:
    free(t.v);
    return err;
}

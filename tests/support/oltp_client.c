/*
 * oltp_client.c - the OLTP tests' client, load and end check
 * (oltp_client.h). The load's threads each own one cr_test_oltp_client
 * record; only acked and lost_connections are shared (relaxed atomics:
 * counts a watcher polls, nothing is published through them, the join
 * orders the records). The check writes the load's answers as the load
 * generator's logs into a temporary directory and hands them to
 * oltp_check_run, so the tests judge the database by the same code as
 * cabrank-oltp-load does.
 */
#include "oltp_client.h"

#include "../../apps/oltp/ledger_db.h"
#include "../../apps/oltp/oltp_check.h"
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int cr_test_oltp_spawn(const char *prog, char *const args[], pid_t *pid, uint16_t *port,
                       int timeout_ms)
{
    char path[4096];
    char *argv[32];
    int n = 0;
    int err;

    cr_test_build_path(prog, path, sizeof(path));
    argv[n++] = path;
    for (int i = 0; args[i] != NULL; i++) {
        if (n == 31) {
            fprintf(stderr, "starting %s: more than 30 arguments\n", path);
            return -E2BIG;
        }
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    err = cr_test_spawn_server(argv, pid, port, timeout_ms);
    if (err < 0)
        fprintf(stderr, "starting %s: %s\n", path, strerror(-err));
    return err;
}

int cr_test_oltp_run_load(char **args, char *out, size_t cap, int timeout_ms)
{
    char path[4096];
    char *argv[32];
    int fds[2];
    int n = 0;
    size_t len = 0;
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;
    pid_t pid;
    int st;

    cr_test_build_path("cabrank-oltp-load", path, sizeof(path));
    argv[n++] = path;
    for (int i = 0; args[i] != NULL && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        execv(path, argv);
        _exit(127);
    }
    close(fds[1]);
    for (;;) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        uint64_t now = cr_test_now_ms();
        ssize_t r;

        if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0)
            break;
        r = read(fds[0], out + len, cap - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == cap - 1)
            break;
    }
    out[len] = '\0';
    close(fds[0]);
    fprintf(stderr, "--- cabrank-oltp-load");
    for (int i = 1; i < n; i++)
        fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "\n%s---\n", out);
    if (cr_test_wait_exit(pid, (int)(deadline > cr_test_now_ms() ? deadline - cr_test_now_ms() : 1),
                          &st) < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int cr_test_oltp_send(int fd, const struct oltp_req *r)
{
    uint8_t buf[OLTP_MAX_FRAME];
    size_t n = oltp_req_encode(r, buf, sizeof(buf));

    if (n == 0)
        return -EINVAL;
    return cr_test_write_all(fd, buf, n);
}

int cr_test_oltp_recv(int fd, struct oltp_reply *rp, int timeout_ms)
{
    uint8_t buf[OLTP_MAX_FRAME];
    uint32_t body;
    int err = cr_test_read_exact(fd, buf, OLTP_HEADER_SIZE, timeout_ms);

    if (err < 0)
        return err;
    body = (uint32_t)buf[4] << 24 | (uint32_t)buf[5] << 16 | (uint32_t)buf[6] << 8 | buf[7];
    if (body > OLTP_MAX_BODY)
        return -EBADMSG;
    err = cr_test_read_exact(fd, buf + OLTP_HEADER_SIZE, body, timeout_ms);
    if (err < 0)
        return err;
    if (oltp_reply_decode(buf, OLTP_HEADER_SIZE + body, rp) != (ssize_t)(OLTP_HEADER_SIZE + body))
        return -EBADMSG;
    return 0;
}

int cr_test_oltp_call(int fd, const struct oltp_req *r, struct oltp_reply *rp, int timeout_ms)
{
    int err = cr_test_oltp_send(fd, r);

    if (err == 0)
        err = cr_test_oltp_recv(fd, rp, timeout_ms);
    if (err == 0 && rp->id != r->id)
        err = -EBADMSG;
    return err;
}

void cr_test_oltp_key(unsigned client, unsigned seq, uint8_t key[OLTP_KEY_SIZE])
{
    char buf[OLTP_KEY_SIZE + 1];

    memset(buf, 0, sizeof(buf));
    snprintf(buf, sizeof(buf), "c%02u-s%010u", client, seq);
    memcpy(key, buf, OLTP_KEY_SIZE);
}

int cr_test_oltp_make_db(const char *url, unsigned accounts, int64_t balance)
{
    struct ledger_db_config dc = {.url = url};
    struct ledger_db *db;
    int err = ledger_db_open(&db, &dc);

    if (err < 0)
        return err;
    for (uint64_t a = 1; a <= accounts && err == 0; a++) {
        struct ledger_op ops[2] = {
            {.op = OLTP_OP_OPEN, .account = a},
            {.op = OLTP_OP_DEPOSIT, .account = a, .amount = balance},
        };
        struct ledger_result res;

        err = ledger_db_apply(db, ops, 2, &res);
        if (err == 0 && res.status != OLTP_ST_OK)
            err = -EIO;
    }
    ledger_db_close(db);
    return err;
}

/* ------------------------------------------------------------------ the load */

static int connect_retry(struct cr_test_oltp_load *ld)
{
    for (;;) {
        int fd = cr_test_connect(ld->cfg.port);

        if (fd >= 0 || !ld->cfg.reconnect || cr_test_now_ms() >= ld->cfg.deadline_ms)
            return fd;
        usleep(20000);
    }
}

static void *client_main(void *arg)
{
    struct cr_test_oltp_client *c = arg;
    struct cr_test_oltp_load *ld = c->ld;
    unsigned seed = ld->cfg.seed + c->idx * 7919u;
    int fd = connect_retry(ld);

    for (unsigned i = 0; i < ld->cfg.per_client; i++) {
        struct cr_test_oltp_xfer *x = &c->x[i];
        struct oltp_req r = {.op = OLTP_OP_TRANSFER, .id = i + 1};
        struct oltp_reply rp;

        x->from = 1 + rand_r(&seed) % ld->cfg.accounts;
        x->to = 1 + (x->from + rand_r(&seed) % (ld->cfg.accounts - 1)) % ld->cfg.accounts;
        x->amount = 1 + rand_r(&seed) % ld->cfg.max_amount;
        x->status = CR_TEST_OLTP_NO_ANSWER;
        r.account = x->from;
        r.to = x->to;
        r.amount = x->amount;
        cr_test_oltp_key(c->idx, i, r.key);
        c->sent = i + 1;
        for (;;) {
            int err = fd >= 0 ? cr_test_oltp_call(fd, &r, &rp, ld->cfg.reply_tmo_ms) : fd;

            if (err == 0)
                break;
            if (fd >= 0)
                close(fd);
            fd = -1;
            atomic_fetch_add_explicit(&ld->lost_connections, 1, memory_order_relaxed);
            if (!ld->cfg.reconnect || cr_test_now_ms() >= ld->cfg.deadline_ms) {
                c->failed++;
                return NULL;
            }
            /* The answer is lost, not the transfer: resend it with its key. */
            fd = connect_retry(ld);
        }
        x->status = rp.status;
        if (rp.status == OLTP_ST_OK) {
            atomic_fetch_add_explicit(&ld->acked, 1, memory_order_relaxed);
        } else if (rp.status != OLTP_ST_INSUFFICIENT) {
            c->unexpected++;
            c->last_unexpected = rp.status;
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

int cr_test_oltp_load_start(struct cr_test_oltp_load *ld,
                            const struct cr_test_oltp_load_config *cfg)
{
    memset(ld, 0, sizeof(*ld));
    if (cfg->clients > CR_TEST_OLTP_MAX_CLIENTS || cfg->per_client > CR_TEST_OLTP_MAX_PER ||
        cfg->accounts < 2 || cfg->max_amount == 0)
        return -EINVAL;
    ld->cfg = *cfg;
    atomic_init(&ld->acked, 0);
    atomic_init(&ld->lost_connections, 0);
    for (unsigned i = 0; i < cfg->clients; i++) {
        struct cr_test_oltp_client *c = &ld->c[i];
        int err;

        c->ld = ld;
        c->idx = i;
        err = pthread_create(&ld->th[i], NULL, client_main, c);
        if (err != 0)
            return -err;
        ld->started++;
    }
    return 0;
}

void cr_test_oltp_load_join(struct cr_test_oltp_load *ld)
{
    for (unsigned i = 0; i < ld->started; i++)
        pthread_join(ld->th[i], NULL);
    ld->started = 0;
}

/* ------------------------------------------------------------------ the check */

/* Appends a line to the report (cut short when it is full). */
static void say(struct cr_test_oltp_verdict *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void say(struct cr_test_oltp_verdict *v, const char *fmt, ...)
{
    size_t len = strlen(v->report);
    va_list ap;

    if (len + 1 >= sizeof(v->report))
        return;
    va_start(ap, fmt);
    vsnprintf(v->report + len, sizeof(v->report) - len, fmt, ap);
    va_end(ap);
}

/* The load's answers as cabrank-oltp-load logs them: acknowledged
 * transfers in log, unanswered and IN_DOUBT ones in sent (refused ones in
 * neither, so a row of one is a row nobody was promised). */
static int write_logs(const struct cr_test_oltp_load *ld, const char *log, const char *sent,
                      struct cr_test_oltp_verdict *v)
{
    FILE *fa = fopen(log, "we");
    FILE *fs = fopen(sent, "we");
    int err = 0;

    if (fa == NULL || fs == NULL) {
        err = -errno;
        goto out;
    }
    for (unsigned c = 0; c < ld->cfg.clients; c++) {
        for (unsigned s = 0; s < ld->c[c].sent; s++) {
            const struct cr_test_oltp_xfer *x = &ld->c[c].x[s];
            struct ledger_op t = {
                .op = OLTP_OP_TRANSFER, .account = x->from, .to = x->to, .amount = x->amount};
            char line[OLTP_LOG_LINE_MAX];
            size_t n;

            cr_test_oltp_key(c, s, t.key);
            n = oltp_log_format(&t, line);
            if (x->status == OLTP_ST_OK) {
                v->acked++;
                fwrite(line, 1, n, fa);
            } else if (x->status == CR_TEST_OLTP_NO_ANSWER) {
                v->unanswered++;
                fwrite(line, 1, n, fs);
            } else if (x->status == OLTP_ST_IN_DOUBT) {
                /* Applied or not: the checker accepts either. */
                v->in_doubt++;
                fwrite(line, 1, n, fs);
            }
        }
    }
out:
    if (fa != NULL && fclose(fa) != 0 && err == 0)
        err = -EIO;
    if (fs != NULL && fclose(fs) != 0 && err == 0)
        err = -EIO;
    return err;
}

int cr_test_oltp_check(const struct cr_test_oltp_load *ld, const char *db_url, unsigned accounts,
                       int64_t balance, struct cr_test_oltp_verdict *v)
{
    char dir[] = "/tmp/cr-oltp-check-XXXXXX";
    char log[64];
    char sent[64];
    struct oltp_check_config cc = {
        .log = log, .sent = sent, .db_url = db_url, .expect_sum = (int64_t)accounts * balance};
    struct oltp_check_result res;
    struct ledger_db_config dc = {.url = db_url};
    struct ledger_db *db;
    uint64_t negative = 0;
    char *out = NULL;
    size_t out_len = 0;
    FILE *f;
    int err;

    memset(v, 0, sizeof(*v));
    v->sum = -1;
    if (mkdtemp(dir) == NULL)
        return -errno;
    snprintf(log, sizeof(log), "%s/acked.log", dir);
    snprintf(sent, sizeof(sent), "%s/acked.log.sent", dir);
    err = write_logs(ld, log, sent, v);
    if (err < 0)
        goto out_rm;
    f = open_memstream(&out, &out_len);
    if (f == NULL) {
        err = -ENOMEM;
        goto out_rm;
    }
    err = oltp_check_run(&cc, f, &res);
    fclose(f);
    if (err < 0)
        goto out_free;
    say(v, "%s", out);
    /* The checker judges balances but not how many accounts there are. */
    if (ledger_db_open(&db, &dc) == 0) {
        if (ledger_db_totals(db, &v->sum, &v->accounts, &negative) < 0)
            v->sum = -1;
        ledger_db_close(db);
    }
    v->ok = res.failed == 0 && res.passed == 4;
    if (v->accounts != accounts) {
        v->ok = false;
        say(v, "FAIL accounts: %llu, expected %u\n", (unsigned long long)v->accounts, accounts);
    }
    if (v->acked == 0) {
        v->ok = false;
        say(v, "FAIL acknowledged: none\n");
    }
    if (v->unanswered != 0) {
        v->ok = false;
        say(v, "FAIL answered: %u transfers never answered\n", v->unanswered);
    }
out_free:
    free(out);
out_rm:
    unlink(log);
    unlink(sent);
    rmdir(dir);
    return err;
}

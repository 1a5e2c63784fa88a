/*
 * oltp_flood.c (integration) - cabrank-ledger's memory under a flood of
 * session-opening garbage, at its default limits (issue #26 item 4). Each of
 * ROUNDS rounds opens CONNS new connections; each sends BEGINS BEGIN frames
 * mixed with as many random frames (any request kind, random length and
 * bytes, a random session: answered MALFORMED, UNKNOWN_OP, NO_SESSION or
 * NOT_IN_SESSION, never touching the database), pipelined in batches, reads
 * every answer and closes without ending a session. Sessions live 60 s, so
 * none expires during the run: only the limits bound them.
 *
 * Checks: every frame is answered; a BEGIN gets OK or TOO_MANY_SESSIONS,
 * nothing else; no connection gets more than LEDGER_MAX_SESSIONS_PER_CONN_DEFAULT
 * sessions, and all of them together exactly LEDGER_MAX_SESSIONS_DEFAULT;
 * TOO_MANY_SESSIONS is answered in every round; and the ledger's resident set
 * (VmRSS of /proc/PID/status) levels off: from the first round after the
 * limit is reached to the last it grows less than RSS_MARGIN_KB. The series
 * is printed; under a sanitizer (whose shadow and quarantine grow with what is
 * freed) the resident set is only printed. Exit 0 pass, 1 fail, 77 skip.
 */
#include "../../apps/oltp/ledger.h"
#include "../support/oltp_client.h"
#include "httpd_client.h"

#define ROUNDS 16
#define CONNS  4
/* Per connection: more than its limit, so every connection is refused some. */
#define BEGINS (LEDGER_MAX_SESSIONS_PER_CONN_DEFAULT + 176)
/* Marks the ids of the BEGINs (the garbage's ids lack it). */
#define BEGIN_ID (UINT64_C(1) << 63)
/* Frames written before their answers are read. */
#define BATCH 256
/* Growth allowed over the rounds after the limit: a round of garbage before
 * the fix left some 15 MB behind (a full-size context per session). */
#define RSS_MARGIN_KB 2048

_Static_assert((uint64_t)ROUNDS *CONNS *LEDGER_MAX_SESSIONS_PER_CONN_DEFAULT >=
                   2 * (uint64_t)LEDGER_MAX_SESSIONS_DEFAULT,
               "the flood must reach the server's limit by half time");

static char dir[256];

/* VmRSS of pid in kB, or -1. */
static long rss_kb(pid_t pid)
{
    char path[64];
    char line[256];
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}

/* Appends a garbage frame to buf at *len: any request kind, a random session,
 * len random bytes of body. */
static void put_garbage(uint8_t *buf, size_t *len, uint64_t id, unsigned *seed)
{
    uint8_t *p = buf + *len;
    uint32_t body = (uint32_t)(rand_r(seed) % 49);
    uint64_t session = ((uint64_t)rand_r(seed) << 32 | (uint64_t)rand_r(seed)) | 1;

    p[0] = OLTP_MAGIC0;
    p[1] = OLTP_MAGIC1;
    p[2] = (uint8_t)(1 + rand_r(seed) % 127);
    p[3] = 0;
    for (int i = 0; i < 4; i++)
        p[4 + i] = (uint8_t)(body >> (24 - 8 * i));
    for (int i = 0; i < 8; i++) {
        p[8 + i] = (uint8_t)(id >> (56 - 8 * i));
        p[16 + i] = (uint8_t)(session >> (56 - 8 * i));
    }
    for (uint32_t i = 0; i < body; i++)
        p[OLTP_HEADER_SIZE + i] = (uint8_t)rand_r(seed);
    *len += OLTP_HEADER_SIZE + body;
}

static int write_all(int fd, const uint8_t *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* One connection's flood; its BEGINs answered OK in *ok, TOO_MANY_SESSIONS
 * in *refused. 0, or -1 after a failed check. */
static int flood_conn(uint16_t port, unsigned *seed, unsigned *ok, unsigned *refused)
{
    static uint8_t buf[BATCH * (OLTP_HEADER_SIZE + 48)];
    int fd = cr_test_connect(port);
    uint64_t id = 0;
    unsigned begins = 0;
    unsigned other = 0;
    int rc = 0;

    *ok = 0;
    *refused = 0;
    CHECK(fd >= 0, "connect: %s", strerror(errno));
    if (fd < 0)
        return -1;
    while (rc == 0 && begins < BEGINS) {
        size_t len = 0;
        unsigned n = 0;

        /* Half BEGINs, half garbage, alternating. */
        for (; n < BATCH && begins < BEGINS; n++) {
            if (n % 2 == 0) {
                struct oltp_req r = {.op = OLTP_OP_BEGIN, .id = ++id | BEGIN_ID};

                len += oltp_req_encode(&r, buf + len, sizeof(buf) - len);
                begins++;
            } else {
                put_garbage(buf, &len, ++id, seed);
            }
        }
        if (write_all(fd, buf, len) < 0) {
            CHECK(false, "write: %s", strerror(errno));
            rc = -1;
            break;
        }
        for (unsigned i = 0; i < n; i++) {
            struct oltp_reply rp;
            int err = cr_test_oltp_recv(fd, &rp, hc_tmo(10000));

            if (err < 0) {
                CHECK(false, "answer %u of a batch of %u: %s", i, n, strerror(-err));
                rc = -1;
                break;
            }
            if (!(rp.id & BEGIN_ID))
                continue;
            CHECK(rp.op == OLTP_OP_BEGIN, "answer %s to a BEGIN", oltp_op_name(rp.op));
            if (rp.status == OLTP_ST_OK) {
                ++*ok;
            } else if (rp.status == OLTP_ST_TOO_MANY_SESSIONS) {
                ++*refused;
            } else if (other++ == 0) {
                CHECK(false, "BEGIN answered %s", oltp_status_name(rp.status));
            }
        }
    }
    close(fd);
    CHECK(other == 0, "%u BEGINs answered neither OK nor TOO_MANY_SESSIONS", other);
    return other == 0 ? rc : -1;
}

int main(void)
{
    char db[300];
    char *args[] = {"--listen", "127.0.0.1:0", "--db", db,  "--threads",
                    "4",        "--log-level", "warn", NULL};
    struct hc_server s;
    long rss[ROUNDS];
    unsigned total = 0;
    int full_at = -1;
    unsigned seed = 4242;

    signal(SIGPIPE, SIG_IGN);
    if (hc_mkdtemp(dir, sizeof(dir)) < 0) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(db, sizeof(db), "%s/flood.db", dir);
    if (cr_test_oltp_spawn("cabrank-ledger", args, &s.pid, &s.port, hc_tmo(20000)) < 0) {
        (void)cr_test_rmtree(dir);
        return 1;
    }
    fprintf(stderr, "oltp_flood: start: VmRSS %ld kB\n", rss_kb(s.pid));
    for (int r = 0; r < ROUNDS; r++) {
        unsigned round_ok = 0;
        unsigned round_refused = 0;

        for (int c = 0; c < CONNS; c++) {
            unsigned ok;
            unsigned refused;

            if (flood_conn(s.port, &seed, &ok, &refused) < 0 && ok + refused == 0)
                break;
            CHECK(ok <= LEDGER_MAX_SESSIONS_PER_CONN_DEFAULT,
                  "round %d: a connection got %u sessions", r, ok);
            round_ok += ok;
            round_refused += refused;
        }
        total += round_ok;
        if (full_at < 0 && total >= LEDGER_MAX_SESSIONS_DEFAULT)
            full_at = r;
        rss[r] = rss_kb(s.pid);
        fprintf(stderr, "oltp_flood: round %d: %u sessions opened, %u refused; VmRSS %ld kB\n", r,
                round_ok, round_refused, rss[r]);
        CHECK(round_refused > 0, "round %d: no BEGIN answered TOO_MANY_SESSIONS", r);
        CHECK(rss[r] > 0, "round %d: no VmRSS", r);
    }
    CHECK(total == LEDGER_MAX_SESSIONS_DEFAULT, "%u sessions opened in all, the limit is %u", total,
          LEDGER_MAX_SESSIONS_DEFAULT);
    if (hc_is_sanitized()) {
        /* ASan's quarantine and both sanitizers' shadow memory grow with what is freed. */
        fprintf(stderr, "oltp_flood: VmRSS not checked under a sanitizer\n");
    } else if (full_at >= 0 && full_at + 1 < ROUNDS - 1) {
        long grew = rss[ROUNDS - 1] - rss[full_at + 1];

        CHECK(grew < RSS_MARGIN_KB, "VmRSS grew %ld kB from round %d to %d (margin %d kB)", grew,
              full_at + 1, ROUNDS - 1, RSS_MARGIN_KB);
    }
    CHECK(hc_stop(&s) == 0, "graceful stop");
    (void)cr_test_rmtree(dir);
    if (hc_failures != 0) {
        fprintf(stderr, "oltp_flood: %d checks failed\n", hc_failures);
        return 1;
    }
    fprintf(stderr, "oltp_flood: all checks passed\n");
    return 0;
}

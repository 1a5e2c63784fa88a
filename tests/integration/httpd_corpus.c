/*
 * httpd_corpus.c (integration) - replays every file of the parser's corpus
 * (fuzz/corpus/http_parser/: real requests, our seeds, smuggling cases,
 * fuzzer finds) over a socket to cabrank-httpd under each model (reactor,
 * lf, hshr, tpc): one connection per file, the file's bytes sent, our side
 * half-closed, and then an answer beginning "HTTP/1.1 " or a clean close
 * (EOF, or a reset after unread input) must come within a timeout. No crash
 * and no hang: the server must still answer and exit 0 on SIGTERM after
 * each model's run. A few connections are kept in flight at once so the run
 * stays within seconds per model, even under TSan. Skips (77) when the
 * corpus directory is missing. Exit 0 pass, 1 fail, 77 skip.
 */
#include "httpd_client.h"

#include <dirent.h>
#include <poll.h>

#define CORPUS_DIR "fuzz/corpus/http_parser"
#define MAX_FILES  4000
#define IN_FLIGHT  8

struct sample {
    char *name;
    char *data;
    size_t len;
};

struct slot {
    int fd;
    int file;
    size_t sent;
    bool shut;
    size_t got;
    char first[16]; /* the answer's first bytes */
    uint64_t deadline;
};

static struct sample *samples;
static int nsamples;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct sample *)a)->name, ((const struct sample *)b)->name);
}

/* Loads every regular file of the corpus. -1 on error, 0 when missing. */
static int load_corpus(void)
{
    DIR *d = opendir(CORPUS_DIR);
    struct dirent *e;

    if (d == NULL)
        return 0;
    samples = calloc(MAX_FILES, sizeof(*samples));
    if (samples == NULL) {
        closedir(d);
        return -1;
    }
    while ((e = readdir(d)) != NULL && nsamples < MAX_FILES) {
        char path[1024];
        struct stat st;
        int fd;
        struct sample *s = &samples[nsamples];

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", CORPUS_DIR, e->d_name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) {
            close(fd);
            continue;
        }
        s->len = (size_t)st.st_size;
        s->data = malloc(s->len + 1);
        s->name = strdup(e->d_name);
        if (s->data == NULL || s->name == NULL ||
            (s->len > 0 && read(fd, s->data, s->len) != (ssize_t)s->len)) {
            close(fd);
            free(s->data);
            free(s->name);
            continue;
        }
        close(fd);
        nsamples++;
    }
    closedir(d);
    qsort(samples, (size_t)nsamples, sizeof(*samples), by_name);
    return nsamples;
}

static void free_corpus(void)
{
    for (int i = 0; i < nsamples; i++) {
        free(samples[i].name);
        free(samples[i].data);
    }
    free(samples);
}

/* Starts file i on slot sl. */
static int slot_start(struct slot *sl, int i, uint16_t port)
{
    memset(sl, 0, sizeof(*sl));
    sl->file = i;
    sl->fd = cr_test_connect(port);
    if (sl->fd < 0) {
        fprintf(stderr, "%s: connect: %s\n", samples[i].name, strerror(-sl->fd));
        sl->fd = -1;
        return -1;
    }
    if (cr_test_set_nonblock(sl->fd, true) < 0)
        return -1;
    sl->deadline = cr_test_now_ms() + (uint64_t)hc_tmo(10000);
    return 0;
}

/* Makes progress on sl. 1 when it is done (closed), 0 to go on, -1 on a
 * failure (said why). */
static int slot_step(struct slot *sl, short revents, int counts[6])
{
    const struct sample *s = &samples[sl->file];
    char buf[16384];

    if (!sl->shut && (revents & POLLOUT)) {
        ssize_t n = s->len > sl->sent
                        ? send(sl->fd, s->data + sl->sent, s->len - sl->sent, MSG_NOSIGNAL)
                        : 0;

        if (n > 0)
            sl->sent += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EINTR)
            sl->sent = s->len; /* closed early, e.g. after an error answer */
        if (sl->sent == s->len) {
            shutdown(sl->fd, SHUT_WR);
            sl->shut = true;
        }
    }
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
        for (;;) {
            ssize_t n = recv(sl->fd, buf, sizeof(buf), 0);

            if (n > 0) {
                if (sl->got < sizeof(sl->first))
                    memcpy(sl->first + sl->got, buf,
                           (size_t)n < sizeof(sl->first) - sl->got ? (size_t)n
                                                                   : sizeof(sl->first) - sl->got);
                sl->got += (size_t)n;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                break;
            /* EOF or a reset: done. Anything it said must be HTTP. */
            if (sl->got > 0 && (sl->got < 12 || memcmp(sl->first, "HTTP/1.1 ", 9) != 0)) {
                fprintf(stderr, "%s: answer is not HTTP: %.12s\n", s->name, sl->first);
                return -1;
            }
            if (sl->got >= 12) {
                int cls = sl->first[9] - '0';

                counts[cls >= 1 && cls <= 5 ? cls : 0]++;
            } else {
                counts[0]++;
            }
            return 1;
        }
    }
    if (cr_test_now_ms() >= sl->deadline) {
        fprintf(stderr, "%s: no answer and no close within %d ms (sent %zu of %zu, got %zu)\n",
                s->name, hc_tmo(10000), sl->sent, s->len, sl->got);
        return -1;
    }
    return 0;
}

/* Replays the corpus against one server. 0 or -1. */
static int replay(uint16_t port, const char *label)
{
    struct slot slots[IN_FLIGHT];
    struct pollfd pfd[IN_FLIGHT];
    int counts[6] = {0};
    int next = 0;
    int active = 0;
    int rc = 0;
    uint64_t start = cr_test_now_ms();

    for (int k = 0; k < IN_FLIGHT; k++)
        slots[k].fd = -1;
    while (next < nsamples || active > 0) {
        for (int k = 0; k < IN_FLIGHT && next < nsamples; k++) {
            if (slots[k].fd >= 0)
                continue;
            if (slot_start(&slots[k], next++, port) < 0) {
                rc = -1;
                goto out;
            }
            active++;
        }
        for (int k = 0; k < IN_FLIGHT; k++) {
            pfd[k].fd = slots[k].fd;
            pfd[k].events = (short)(POLLIN | (slots[k].shut ? 0 : POLLOUT));
            pfd[k].revents = 0;
        }
        if (poll(pfd, IN_FLIGHT, 100) < 0 && errno != EINTR) {
            rc = -1;
            goto out;
        }
        for (int k = 0; k < IN_FLIGHT; k++) {
            int r;

            if (slots[k].fd < 0)
                continue;
            r = slot_step(&slots[k], pfd[k].revents, counts);
            if (r == 0)
                continue;
            close(slots[k].fd);
            slots[k].fd = -1;
            active--;
            if (r < 0)
                rc = -1;
        }
    }
out:
    for (int k = 0; k < IN_FLIGHT; k++) {
        if (slots[k].fd >= 0)
            close(slots[k].fd);
    }
    fprintf(stderr,
            "%s: %d files in %llu ms: %d closed without an answer, 2xx %d, 3xx %d, 4xx %d, "
            "5xx %d\n",
            label, nsamples, (unsigned long long)(cr_test_now_ms() - start), counts[0], counts[2],
            counts[3], counts[4], counts[5]);
    return rc;
}

int main(void)
{
    static const char *const models[] = {"reactor", "lf", "hshr", "tpc"};
    char root[256];
    int rc = 1;
    int n = load_corpus();

    if (n < 0) {
        fprintf(stderr, "httpd_corpus: out of memory\n");
        return 1;
    }
    if (n == 0) {
        printf("no corpus in %s\n", CORPUS_DIR);
        fprintf(stderr, "httpd_corpus: no corpus in %s (run from the source tree); skipped\n",
                CORPUS_DIR);
        free_corpus();
        return 77;
    }
    if (hc_mkdtemp(root, sizeof(root)) < 0 || hc_write_file(root, "index.html", "i\n", 2) < 0 ||
        hc_write_file(root, "hello.txt", "Hello, world\n", 13) < 0) {
        fprintf(stderr, "httpd_corpus: making the root: %s\n", strerror(errno));
        free_corpus();
        return 1;
    }
    for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
        const char *const args[] = {"--model", models[m], "--threads", "3", NULL};
        struct hc_server s;

        if (hc_start(&s, root, args) < 0) {
            hc_failures++;
            continue;
        }
        CHECK(replay(s.port, models[m]) == 0, "%s: replay", models[m]);
        CHECK(hc_alive(&s), "%s: server died", models[m]);
        CHECK(hc_status(s.port, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 200,
              "%s: serving after the corpus", models[m]);
        CHECK(hc_stop(&s) == 0, "%s: graceful stop", models[m]);
    }
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_corpus: ok\n");
        rc = 0;
    } else {
        fprintf(stderr, "httpd_corpus: %d check(s) failed\n", hc_failures);
    }
    (void)cr_test_rmtree(root);
    free_corpus();
    return rc;
}

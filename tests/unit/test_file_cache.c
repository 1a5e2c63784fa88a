/*
 * test_file_cache.c - the open-file cache (apps/httpd/file_cache.c) over a temporary tree: a hit
 * costs no open or stat (the open and revalidation counters stay put and the fd is the same),
 * a changed, replaced, deleted or newly compressed file is noticed after the revalidation
 * interval, directories and index files, errors not cached, the entry and descriptor bounds, an
 * evicted entry's fd staying open while referenced, the copies of small files' content (the
 * size threshold, the total budget, a new copy after a change, an old copy valid while
 * referenced: ASan catches a use after free), and many threads getting, reading and releasing
 * while another rewrites the files (run under TSan by `make test`).
 */
#include "../../apps/httpd/file_cache.h"

#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../apps/httpd/http_path.h"

static char tmpdir[PATH_MAX];
static int root_fd = -1;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Writes name (relative to the root) with content, replacing it atomically by rename. */
static void put_file(const char *name, const char *content, size_t len)
{
    char tmp[PATH_MAX];
    int fd;

    snprintf(tmp, sizeof(tmp), "%s.tmp%d", name, (int)gettid());
    fd = openat(root_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, content, len), (ssize_t)len);
    close(fd);
    ck_assert_int_eq(renameat(root_fd, tmp, root_fd, name), 0);
}

static void put_str(const char *name, const char *content)
{
    put_file(name, content, strlen(content));
}

static void setup(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/cr-file-cache-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    root_fd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(root_fd, 0);
    ck_assert_int_eq(mkdirat(root_fd, "dir", 0755), 0);
    ck_assert_int_eq(mkdirat(root_fd, "empty", 0755), 0);
    put_str("a.txt", "hello");
    put_str("b.txt", "bye");
    put_str("index.html", "<h1>root</h1>");
    put_str("dir/index.html", "<h1>dir</h1>");
    put_str("app.js", "var x = 1;");
    put_str("app.js.gz", "GZ");
    ck_assert_int_eq(symlinkat("/etc/hostname", root_fd, "out"), 0);
}

static void teardown(void)
{
    close(root_fd);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static struct http_file_cache *new_cache(struct http_file_cache_config cfg)
{
    struct http_file_cache *fc;

    cfg.root_fd = root_fd;
    ck_assert_int_eq(http_file_cache_create(&fc, &cfg), 0);
    ck_assert_ptr_nonnull(fc);
    return fc;
}

static const struct http_file *get(struct http_file_cache *fc, const char *path)
{
    const struct http_file *f = NULL;

    ck_assert_msg(http_file_cache_get(fc, path, strlen(path), &f) == 0, "get %s failed", path);
    ck_assert_ptr_nonnull(f);
    return f;
}

static int get_err(struct http_file_cache *fc, const char *path)
{
    const struct http_file *f = (const void *)1;
    int rc = http_file_cache_get(fc, path, strlen(path), &f);

    if (rc == 0)
        http_file_cache_release((void *)f);
    else
        ck_assert_ptr_null(f);
    return rc;
}

static struct http_file_cache_stats stats(struct http_file_cache *fc)
{
    struct http_file_cache_stats st;

    http_file_cache_stats(fc, &st);
    return st;
}

static void read_all(int fd, char *buf, size_t cap)
{
    ssize_t n = pread(fd, buf, cap - 1, 0);

    ck_assert_int_ge(n, 0);
    buf[n] = '\0';
}

START_TEST(create_needs_a_root)
{
    struct http_file_cache *fc = (void *)1;
    struct http_file_cache_config cfg = {.root_fd = -1};

    ck_assert_int_eq(http_file_cache_create(&fc, &cfg), -EINVAL);
    ck_assert_ptr_null(fc);
    http_file_cache_destroy(NULL);
}
END_TEST

START_TEST(hit_costs_no_open_and_no_stat)
{
    struct http_mime *mime;
    struct http_file_cache *fc;
    const struct http_file *f;
    const struct http_file *g;
    struct http_file_cache_stats st;
    char buf[64];

    ck_assert_int_eq(http_mime_create(&mime, NULL), 0);
    fc = new_cache((struct http_file_cache_config){.mime = mime, .revalidate_ms = 60000});
    f = get(fc, "/a.txt");
    st = stats(fc);
    ck_assert_uint_eq(st.misses, 1);
    ck_assert_uint_eq(st.opens, 1);
    ck_assert_uint_eq(f->identity.size, 5);
    ck_assert_str_eq(f->mime, "text/plain; charset=utf-8");
    ck_assert_uint_eq(f->mime_len, strlen(f->mime));
    ck_assert_uint_eq(f->identity.etag_len, strlen(f->identity.etag));
    ck_assert_uint_eq(strlen(f->identity.last_modified), HTTP_DATE_LEN);
    ck_assert(!f->has_gz);
    ck_assert_int_eq(f->gz.fd, -1);
    read_all(f->identity.fd, buf, sizeof(buf));
    ck_assert_str_eq(buf, "hello");
    for (int i = 0; i < 100; i++) {
        g = get(fc, "/a.txt");
        ck_assert_ptr_eq(g, f);
        ck_assert_int_eq(g->identity.fd, f->identity.fd);
        http_file_cache_release((void *)g);
    }
    st = stats(fc);
    ck_assert_uint_eq(st.opens, 1);
    ck_assert_uint_eq(st.revalidations, 0);
    ck_assert_uint_eq(st.hits, 100);
    ck_assert_uint_eq(st.entries, 1);
    ck_assert_uint_eq(st.fds, 1);
    http_file_cache_release((void *)f);
    http_file_cache_destroy(fc);
    http_mime_destroy(mime);
}
END_TEST

START_TEST(gz_sibling_is_kept_with_its_own_validators)
{
    struct http_mime *mime;
    struct http_file_cache *fc;
    const struct http_file *f;
    char buf[64];

    ck_assert_int_eq(http_mime_create(&mime, NULL), 0);
    fc = new_cache((struct http_file_cache_config){.mime = mime, .gzip_static = true});
    f = get(fc, "/app.js");
    ck_assert(f->has_gz);
    ck_assert_int_ge(f->gz.fd, 0);
    ck_assert_uint_eq(f->gz.size, 2);
    ck_assert_uint_eq(f->identity.size, 10);
    ck_assert_str_eq(f->mime, "text/javascript; charset=utf-8");
    ck_assert_str_ne(f->gz.etag, f->identity.etag);
    ck_assert_str_eq(f->gz.etag + f->gz.etag_len - 4, "-gz\"");
    read_all(f->gz.fd, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GZ");
    ck_assert_uint_eq(stats(fc).opens, 2);
    ck_assert_uint_eq(stats(fc).fds, 2);
    ck_assert_ptr_nonnull(f->gz.content);
    ck_assert_mem_eq(f->gz.content, "GZ", 2);
    ck_assert_ptr_nonnull(f->identity.content);
    ck_assert_mem_eq(f->identity.content, "var x = 1;", 10);
    ck_assert_uint_eq(stats(fc).content_bytes, 12);
    http_file_cache_release((void *)f);
    /* No sibling: one open for the file, one that finds no ".gz". */
    f = get(fc, "/a.txt");
    ck_assert(!f->has_gz);
    ck_assert_uint_eq(stats(fc).opens, 4);
    http_file_cache_release((void *)f);
    http_file_cache_destroy(fc);
    http_mime_destroy(mime);
}
END_TEST

/* The validator fields of far.txt in a fresh directory under parent, its
 * modification time set to mtime, into want (the ETag part as it should be)
 * and got; false when the file system does not hold that time. */
static bool far_date_fields(const char *parent, time_t mtime, char *want, char *got, size_t cap)
{
    char dir[PATH_MAX];
    struct timespec ts[2] = {{.tv_sec = mtime}, {.tv_sec = mtime}};
    struct http_file_cache_config cfg = {0};
    struct http_file_cache *fc;
    const struct http_file *f;
    struct stat st;
    bool held = false;
    int dfd;
    int fd;

    snprintf(dir, sizeof(dir), "%s/cr-file-cache-XXXXXX", parent);
    if (mkdtemp(dir) == NULL)
        return false;
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(dfd, 0);
    fd = openat(dfd, "far.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "far", 3), 3);
    if (futimens(fd, ts) == 0 && fstat(fd, &st) == 0 && st.st_mtime == mtime) {
        held = true;
        cfg.root_fd = dfd;
        ck_assert_int_eq(http_file_cache_create(&fc, &cfg), 0);
        ck_assert_int_eq(http_file_cache_get(fc, "/far.txt", 8, &f), 0);
        snprintf(want, cap, "\r\nETag: %s", f->identity.etag);
        snprintf(got, cap, "%s|%zu|%s", f->identity.validator_fields,
                 f->identity.validator_fields_len, f->identity.last_modified);
        http_file_cache_release((void *)f);
        http_file_cache_destroy(fc);
    }
    close(fd);
    unlinkat(dfd, "far.txt", 0);
    close(dfd);
    rmdir(dir);
    return held;
}

/*
 * Each variant carries its Last-Modified and ETag fields as a response head
 * puts them, formatted once. A modification time with no IMF-fixdate (a year
 * past 9999) leaves Last-Modified out, where the head once sent the empty
 * date buffer (a NUL and 28 bytes of uninitialized heap). That part needs a
 * file system that holds such a time: tmpfs does (/dev/shm), ext4 does not.
 */
START_TEST(validator_fields_are_the_head_fields_without_a_missing_date)
{
    struct http_file_cache *fc = new_cache((struct http_file_cache_config){0});
    const struct http_file *f = get(fc, "/a.txt");
    char want[HTTP_VALIDATOR_FIELDS_MAX + 64];
    char got[HTTP_VALIDATOR_FIELDS_MAX + 64];
    time_t far = (time_t)253402300800 + 86400; /* 10000-01-02 */

    ck_assert_uint_eq(strlen(f->identity.last_modified), HTTP_DATE_LEN);
    snprintf(want, sizeof(want), "\r\nLast-Modified: %s\r\nETag: %s", f->identity.last_modified,
             f->identity.etag);
    ck_assert_str_eq(f->identity.validator_fields, want);
    ck_assert_uint_eq(f->identity.validator_fields_len, strlen(want));
    http_file_cache_release((void *)f);
    http_file_cache_destroy(fc);

    if (far_date_fields("/dev/shm", far, want, got, sizeof(want))) {
        char expect[2 * (HTTP_VALIDATOR_FIELDS_MAX + 64)];

        snprintf(expect, sizeof(expect), "%s|%zu|", want, strlen(want));
        ck_assert_str_eq(got, expect);
    } else {
        fprintf(stderr, "validator_fields: /dev/shm does not hold year 10000; its part not run\n");
    }
}
END_TEST

/* path's ok_fields as they should be: of type (NULL: the 127-byte type of
 * the test's mime.types and a charset), size bytes, Vary when vary. */
static void expect_ok_fields(struct http_file_cache *fc, const char *path, const char *type,
                             uint64_t size, bool vary)
{
    const struct http_file *f = get(fc, path);
    char want[HTTP_OK_FIELDS_MAX + 64];

    if (type == NULL) {
        ck_assert_uint_eq(f->mime_len, 127 + strlen("; charset=utf-8"));
        type = f->mime;
    }
    snprintf(want, sizeof(want),
             "\r\nContent-Type: %s\r\nContent-Length: %llu%s\r\nAccept-Ranges: bytes%s", type,
             (unsigned long long)size, f->identity.validator_fields,
             vary ? "\r\nVary: Accept-Encoding" : "");
    ck_assert_str_eq(f->ok_fields, want);
    ck_assert_uint_eq(f->ok_fields_len, strlen(want));
    http_file_cache_release((void *)f);
}

/*
 * The fields of a 200 answer with the whole file are formatted once per entry,
 * in the order the head writes them: Vary only where a ".gz" exists, and room
 * for the longest type a mime.types file can give (127 bytes and a charset).
 */
START_TEST(ok_fields_are_a_whole_200_head_between_date_and_connection)
{
    char types[sizeof(tmpdir) + 16];
    char longtype[128];
    struct http_mime *mime;
    struct http_file_cache *fc;
    FILE *fp;

    memcpy(longtype, "text/", 5);
    memset(longtype + 5, 'x', 122);
    longtype[127] = '\0';
    snprintf(types, sizeof(types), "%s/mime.types", tmpdir);
    fp = fopen(types, "w");
    ck_assert_ptr_nonnull(fp);
    fprintf(fp, "%s long\n", longtype);
    ck_assert_int_eq(fclose(fp), 0);
    put_str("a.long", "0123456789abcdef");
    ck_assert_int_eq(http_mime_create(&mime, types), 0);
    fc = new_cache((struct http_file_cache_config){.mime = mime, .gzip_static = true});

    expect_ok_fields(fc, "/app.js", "text/javascript; charset=utf-8", 10, true);
    expect_ok_fields(fc, "/a.txt", "text/plain; charset=utf-8", 5, false);
    expect_ok_fields(fc, "/a.long", NULL, 16, false);
    http_file_cache_destroy(fc);
    http_mime_destroy(mime);
}
END_TEST

START_TEST(revalidates_after_the_interval_and_reopens_changed_files)
{
    struct http_file_cache *fc = new_cache((struct http_file_cache_config){.revalidate_ms = 1});
    const struct http_file *f = get(fc, "/a.txt");
    const struct http_file *g;
    char etag[HTTP_ETAG_MAX];
    char buf[64];
    uint64_t opens;

    strcpy(etag, f->identity.etag);
    http_file_cache_release((void *)f);
    /* Unchanged: a stat, no open. */
    usleep(5000);
    opens = stats(fc).opens;
    f = get(fc, "/a.txt");
    ck_assert_uint_eq(stats(fc).revalidations, 1);
    ck_assert_uint_eq(stats(fc).opens, opens);
    http_file_cache_release((void *)f);
    /* Replaced by rename: a new file. */
    put_str("a.txt", "hello, world");
    usleep(5000);
    g = get(fc, "/a.txt");
    ck_assert_uint_eq(g->identity.size, 12);
    ck_assert_str_ne(g->identity.etag, etag);
    read_all(g->identity.fd, buf, sizeof(buf));
    ck_assert_str_eq(buf, "hello, world");
    ck_assert_uint_eq(stats(fc).replacements, 1);
    ck_assert_uint_eq(stats(fc).entries, 1);
    strcpy(etag, g->identity.etag);
    http_file_cache_release((void *)g);
    /* Rewritten in place: same inode, new size and mtime. */
    {
        int fd = openat(root_fd, "a.txt", O_WRONLY | O_TRUNC | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "x", 1), 1);
        close(fd);
    }
    usleep(5000);
    g = get(fc, "/a.txt");
    ck_assert_uint_eq(g->identity.size, 1);
    ck_assert_str_ne(g->identity.etag, etag);
    http_file_cache_release((void *)g);
    http_file_cache_destroy(fc);
}
END_TEST

START_TEST(within_the_interval_a_change_is_not_seen)
{
    struct http_file_cache *fc = new_cache((struct http_file_cache_config){.revalidate_ms = 60000});
    const struct http_file *f = get(fc, "/a.txt");

    http_file_cache_release((void *)f);
    put_str("a.txt", "changed!");
    f = get(fc, "/a.txt");
    ck_assert_uint_eq(f->identity.size, 5);
    ck_assert_uint_eq(stats(fc).revalidations, 0);
    http_file_cache_release((void *)f);
    http_file_cache_destroy(fc);
}
END_TEST

START_TEST(deleted_file_is_dropped_and_a_new_gz_is_noticed)
{
    struct http_file_cache *fc =
        new_cache((struct http_file_cache_config){.revalidate_ms = 1, .gzip_static = true});
    const struct http_file *f = get(fc, "/b.txt");

    ck_assert(!f->has_gz);
    http_file_cache_release((void *)f);
    put_str("b.txt.gz", "compressed");
    usleep(5000);
    f = get(fc, "/b.txt");
    ck_assert(f->has_gz);
    ck_assert_uint_eq(f->gz.size, 10);
    http_file_cache_release((void *)f);
    ck_assert_int_eq(unlinkat(root_fd, "b.txt", 0), 0);
    usleep(5000);
    ck_assert_int_eq(get_err(fc, "/b.txt"), -ENOENT);
    ck_assert_uint_eq(stats(fc).entries, 0);
    ck_assert_uint_eq(stats(fc).fds, 0);
    ck_assert_uint_eq(stats(fc).content_bytes, 0);
    http_file_cache_destroy(fc);
}
END_TEST

START_TEST(directories_redirect_or_serve_their_index)
{
    struct http_mime *mime;
    struct http_file_cache *fc;
    const struct http_file *f;
    char buf[64];

    ck_assert_int_eq(http_mime_create(&mime, NULL), 0);
    fc = new_cache((struct http_file_cache_config){.mime = mime});
    ck_assert_int_eq(get_err(fc, "/dir"), -EISDIR);
    f = get(fc, "/dir/");
    read_all(f->identity.fd, buf, sizeof(buf));
    ck_assert_str_eq(buf, "<h1>dir</h1>");
    ck_assert_str_eq(f->mime, "text/html; charset=utf-8");
    http_file_cache_release((void *)f);
    f = get(fc, "/");
    read_all(f->identity.fd, buf, sizeof(buf));
    ck_assert_str_eq(buf, "<h1>root</h1>");
    http_file_cache_release((void *)f);
    ck_assert_int_eq(get_err(fc, "/empty/"), -ENOENT);
    ck_assert_int_eq(get_err(fc, "/missing"), -ENOENT);
    ck_assert_int_eq(get_err(fc, "/missing/"), -ENOENT);
    ck_assert_int_eq(get_err(fc, "/a.txt/"), -ENOTDIR);
    ck_assert_int_eq(get_err(fc, "/out"), -EACCES);
    ck_assert_int_eq(get_err(fc, "a.txt"), -EINVAL);
    /* Errors are not cached: only the two indexes are. */
    ck_assert_uint_eq(stats(fc).entries, 2);
    http_file_cache_destroy(fc);
    http_mime_destroy(mime);
}
END_TEST

START_TEST(custom_index_name)
{
    struct http_file_cache *fc = new_cache((struct http_file_cache_config){.index_name = "a.txt"});
    const struct http_file *f = get(fc, "/");

    ck_assert_uint_eq(f->identity.size, 5);
    ck_assert_str_eq(f->mime, HTTP_MIME_DEFAULT);
    http_file_cache_release((void *)f);
    http_file_cache_destroy(fc);
}
END_TEST

static void make_files(int n)
{
    for (int i = 0; i < n; i++) {
        char name[32];

        snprintf(name, sizeof(name), "f%d", i);
        put_str(name, name);
    }
}

START_TEST(entry_bound_holds_with_clock_eviction)
{
    struct http_file_cache *fc =
        new_cache((struct http_file_cache_config){.max_entries = 4, .shards = 1});
    const struct http_file *hot;

    make_files(20);
    hot = get(fc, "/f0");
    http_file_cache_release((void *)hot);
    for (int i = 1; i < 20; i++) {
        char path[32];
        const struct http_file *f;
        struct http_file_cache_stats st;

        snprintf(path, sizeof(path), "/f%d", i);
        f = get(fc, path);
        http_file_cache_release((void *)f);
        /* f0 is hit before every miss: CLOCK keeps it. */
        f = get(fc, "/f0");
        ck_assert_ptr_eq(f, hot);
        http_file_cache_release((void *)f);
        st = stats(fc);
        ck_assert_uint_le(st.entries, 4);
        ck_assert_uint_le(st.fds, 4);
    }
    ck_assert_uint_eq(stats(fc).evictions, 20 - 4);
    ck_assert_uint_eq(stats(fc).misses, 20);
    http_file_cache_destroy(fc);
}
END_TEST

START_TEST(fd_bound_holds_with_gz_siblings)
{
    struct http_file_cache *fc = new_cache(
        (struct http_file_cache_config){.max_entries = 64, .max_fds = 5, .gzip_static = true});

    make_files(10);
    for (int i = 0; i < 10; i++) {
        char name[32];

        snprintf(name, sizeof(name), "f%d.gz", i);
        put_str(name, "gz");
    }
    for (int i = 0; i < 10; i++) {
        char path[32];
        const struct http_file *f;

        snprintf(path, sizeof(path), "/f%d", i);
        f = get(fc, path);
        ck_assert(f->has_gz);
        http_file_cache_release((void *)f);
        ck_assert_uint_le(stats(fc).fds, 5);
        ck_assert_uint_le(stats(fc).entries, 2);
    }
    http_file_cache_destroy(fc);
}
END_TEST

START_TEST(evicted_entry_keeps_its_fd_while_referenced)
{
    struct http_file_cache *fc =
        new_cache((struct http_file_cache_config){.max_entries = 1, .shards = 1});
    const struct http_file *a = get(fc, "/a.txt");
    const struct http_file *b;
    int fd = a->identity.fd;
    char buf[64];

    b = get(fc, "/b.txt"); /* evicts a */
    ck_assert_uint_eq(stats(fc).evictions, 1);
    ck_assert_uint_eq(stats(fc).entries, 1);
    read_all(fd, buf, sizeof(buf));
    ck_assert_str_eq(buf, "hello");
    /* Two more references, as for a multipart body. */
    http_file_cache_ref(a);
    http_file_cache_ref(a);
    http_file_cache_release((void *)a);
    http_file_cache_release((void *)a);
    ck_assert_int_ge(fcntl(fd, F_GETFD), 0);
    http_file_cache_release((void *)a);
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    ck_assert_int_eq(errno, EBADF);
    http_file_cache_release((void *)b);
    http_file_cache_release(NULL);
    http_file_cache_destroy(fc);
}
END_TEST

START_TEST(entries_outlive_the_cache_while_referenced)
{
    struct http_file_cache *fc = new_cache((struct http_file_cache_config){0});
    const struct http_file *f = get(fc, "/a.txt");
    char buf[64];

    http_file_cache_destroy(fc);
    read_all(f->identity.fd, buf, sizeof(buf));
    ck_assert_str_eq(buf, "hello");
    http_file_cache_release((void *)f);
}
END_TEST

/* ---------------------------------------------------------------- content */

/* Writes name with n bytes of pattern ('a' + i % 26). */
static void put_sized(const char *name, size_t n)
{
    char *buf = malloc(n + 1);

    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)('a' + i % 26);
    put_file(name, buf, n);
    free(buf);
}

/* Whether v holds a copy equal to what its fd reads. */
static bool has_file_content(const struct http_file_variant *v)
{
    char *buf;
    bool same;

    if (v->content == NULL)
        return false;
    buf = malloc(v->size + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(pread(v->fd, buf, v->size + 1, 0), (ssize_t)v->size);
    same = memcmp(buf, v->content, v->size) == 0;
    free(buf);
    return same;
}

START_TEST(small_file_keeps_a_copy_equal_to_the_file)
{
    struct http_file_cache *fc = new_cache((struct http_file_cache_config){0});
    const struct http_file *f;

    put_sized("16k", 16 * 1024);
    put_sized("16k+1", 16 * 1024 + 1);
    put_str("zero", "");
    f = get(fc, "/a.txt");
    ck_assert(has_file_content(&f->identity));
    ck_assert_mem_eq(f->identity.content, "hello", 5);
    http_file_cache_release((void *)f);
    /* The default threshold is 16 KiB, inclusive. */
    f = get(fc, "/16k");
    ck_assert(has_file_content(&f->identity));
    http_file_cache_release((void *)f);
    f = get(fc, "/16k+1");
    ck_assert_ptr_null(f->identity.content);
    http_file_cache_release((void *)f);
    /* An empty file's copy is empty, not absent. */
    f = get(fc, "/zero");
    ck_assert_ptr_nonnull(f->identity.content);
    ck_assert_uint_eq(f->identity.size, 0);
    http_file_cache_release((void *)f);
    ck_assert_uint_eq(stats(fc).content_bytes, 5 + 16 * 1024);
    /* A hit reads nothing: the copy is the one made at open. */
    f = get(fc, "/a.txt");
    ck_assert_uint_eq(stats(fc).hits, 1);
    ck_assert_mem_eq(f->identity.content, "hello", 5);
    http_file_cache_release((void *)f);
    http_file_cache_destroy(fc);
}
END_TEST

START_TEST(no_copy_above_the_threshold_or_when_disabled)
{
    struct http_file_cache *fc =
        new_cache((struct http_file_cache_config){.content_max = 4, .gzip_static = true});
    const struct http_file *f;

    f = get(fc, "/a.txt"); /* 5 bytes */
    ck_assert_ptr_null(f->identity.content);
    http_file_cache_release((void *)f);
    f = get(fc, "/b.txt"); /* 3 bytes */
    ck_assert(has_file_content(&f->identity));
    http_file_cache_release((void *)f);
    /* Each variant by its own size: "var x = 1;" is too big, its "GZ" is not. */
    f = get(fc, "/app.js");
    ck_assert_ptr_null(f->identity.content);
    ck_assert(has_file_content(&f->gz));
    http_file_cache_release((void *)f);
    ck_assert_uint_eq(stats(fc).content_bytes, 3 + 2);
    http_file_cache_destroy(fc);

    fc = new_cache((struct http_file_cache_config){.content_max = -1});
    f = get(fc, "/b.txt");
    ck_assert_ptr_null(f->identity.content);
    http_file_cache_release((void *)f);
    ck_assert_uint_eq(stats(fc).content_bytes, 0);
    http_file_cache_destroy(fc);

    fc = new_cache((struct http_file_cache_config){.content_total = -1});
    f = get(fc, "/b.txt");
    ck_assert_ptr_null(f->identity.content);
    http_file_cache_release((void *)f);
    http_file_cache_destroy(fc);
}
END_TEST

START_TEST(no_copy_once_the_total_bound_is_reached)
{
    struct http_file_cache *fc = new_cache(
        (struct http_file_cache_config){.content_total = 8, .max_entries = 2, .shards = 1});
    const struct http_file *a;
    const struct http_file *f;

    put_str("c.txt", "12345");
    put_str("d.txt", "1234");
    a = get(fc, "/a.txt"); /* 5 of 8 */
    ck_assert(has_file_content(&a->identity));
    f = get(fc, "/b.txt"); /* 8 of 8 */
    ck_assert(has_file_content(&f->identity));
    http_file_cache_release((void *)f);
    ck_assert_uint_eq(stats(fc).content_bytes, 8);
    /* The budget is spent: c is served from its fd. Its open evicts a, which gives back its
     * 5 bytes though a is still referenced (its copy stays valid until released). */
    f = get(fc, "/c.txt");
    ck_assert_ptr_null(f->identity.content);
    ck_assert_uint_eq(f->identity.size, 5);
    http_file_cache_release((void *)f);
    ck_assert_uint_eq(stats(fc).evictions, 1);
    ck_assert_uint_eq(stats(fc).content_bytes, 3);
    ck_assert_mem_eq(a->identity.content, "hello", 5);
    http_file_cache_release((void *)a);
    /* Room again: 3 + 4, and evicting b leaves d's 4. */
    f = get(fc, "/d.txt");
    ck_assert(has_file_content(&f->identity));
    http_file_cache_release((void *)f);
    ck_assert_uint_eq(stats(fc).content_bytes, 4);
    http_file_cache_destroy(fc);
}
END_TEST

START_TEST(changed_file_gets_a_new_copy_after_the_interval)
{
    /* slow never revalidates within the test; fast does on each get after 1 ms. */
    struct http_file_cache *slow =
        new_cache((struct http_file_cache_config){.revalidate_ms = 60000});
    struct http_file_cache *fast = new_cache((struct http_file_cache_config){.revalidate_ms = 1});
    const struct http_file *f;
    char etag[HTTP_ETAG_MAX];
    int fd;

    f = get(slow, "/a.txt");
    strcpy(etag, f->identity.etag);
    http_file_cache_release((void *)f);
    f = get(fast, "/a.txt");
    ck_assert_mem_eq(f->identity.content, "hello", 5);
    http_file_cache_release((void *)f);
    fd = openat(root_fd, "a.txt", O_WRONLY | O_TRUNC | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "HELLO, WORLD", 12), 12);
    close(fd);
    /* Rewritten in place within the interval: the old bytes, length and ETag, consistently
     * (a read from the fd would give 5 of the new bytes under the old ETag). */
    f = get(slow, "/a.txt");
    ck_assert_uint_eq(f->identity.size, 5);
    ck_assert_str_eq(f->identity.etag, etag);
    ck_assert_mem_eq(f->identity.content, "hello", 5);
    http_file_cache_release((void *)f);
    /* The revalidation after the interval reopens it with a new copy. */
    usleep(5000);
    f = get(fast, "/a.txt");
    ck_assert_uint_eq(stats(fast).replacements, 1);
    ck_assert_uint_eq(f->identity.size, 12);
    ck_assert_str_ne(f->identity.etag, etag);
    ck_assert(has_file_content(&f->identity));
    ck_assert_mem_eq(f->identity.content, "HELLO, WORLD", 12);
    ck_assert_uint_eq(stats(fast).content_bytes, 12);
    http_file_cache_release((void *)f);
    http_file_cache_destroy(fast);
    http_file_cache_destroy(slow);
}
END_TEST

START_TEST(replaced_entry_keeps_its_copy_while_referenced)
{
    struct http_file_cache *fc = new_cache((struct http_file_cache_config){.revalidate_ms = 1});
    const struct http_file *old = get(fc, "/a.txt");
    const struct http_file *f;
    char etag[HTTP_ETAG_MAX];

    strcpy(etag, old->identity.etag);
    put_str("a.txt", "hello, world");
    usleep(5000);
    f = get(fc, "/a.txt");
    ck_assert_ptr_ne(f, old);
    ck_assert_mem_eq(f->identity.content, "hello, world", 12);
    http_file_cache_release((void *)f);
    /* Replaced twice more: old is two versions behind, out of the table, still whole. */
    put_str("a.txt", "third");
    usleep(5000);
    f = get(fc, "/a.txt");
    ck_assert_mem_eq(f->identity.content, "third", 5);
    http_file_cache_release((void *)f);
    ck_assert_uint_eq(stats(fc).replacements, 2);
    ck_assert_uint_eq(stats(fc).content_bytes, 5);
    ck_assert_uint_eq(old->identity.size, 5);
    ck_assert_str_eq(old->identity.etag, etag);
    ck_assert_mem_eq(old->identity.content, "hello", 5);
    http_file_cache_release((void *)old);
    /* Also when the cache goes first. */
    old = get(fc, "/a.txt");
    http_file_cache_destroy(fc);
    ck_assert_mem_eq(old->identity.content, "third", 5);
    http_file_cache_release((void *)old);
}
END_TEST

/* ---------------------------------------------------------------- stress */

#define STRESS_FILES   24
#define STRESS_THREADS 6
#define STRESS_GETS    4000

struct stress {
    struct http_file_cache *fc;
    int stop;    /* atomic, relaxed: set once readers are done */
    int bad;     /* atomic: inconsistent entries seen */
    unsigned id; /* per-thread seed, set before the thread starts */
};

/* Content "len=<8 digits>\n" padded to that length, so a reader can check fd against size. */
static void put_versioned(int i, size_t len)
{
    char name[32];
    char *buf = malloc(len + 1);

    ck_assert_ptr_nonnull(buf);
    memset(buf, 'x', len);
    snprintf(buf, len + 1, "len=%08zu\n", len);
    buf[13] = 'x'; /* snprintf's NUL; len >= 15 */
    snprintf(name, sizeof(name), "s%d", i);
    put_file(name, buf, len);
    free(buf);
}

static void *stress_reader(void *arg)
{
    struct stress *s = arg;
    unsigned seed = s->id;

    for (int n = 0; n < STRESS_GETS; n++) {
        char path[32];
        char head[16];
        const struct http_file *f;
        int rc;

        snprintf(path, sizeof(path), "/s%d", rand_r(&seed) % STRESS_FILES);
        rc = http_file_cache_get(s->fc, path, strlen(path), &f);
        if (rc != 0) {
            __atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
            continue;
        }
        if (pread(f->identity.fd, head, 15, 0) != 15 || strncmp(head, "len=", 4) != 0 ||
            strtoull(head + 4, NULL, 10) != f->identity.size)
            __atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
        /* A copy is of the version the entry describes, read whole. */
        if (f->identity.content != NULL) {
            const char *p = f->identity.content;

            memcpy(head, p, 15);
            head[15] = '\0';
            if (strncmp(head, "len=", 4) != 0 || strtoull(head + 4, NULL, 10) != f->identity.size ||
                p[f->identity.size - 1] != 'x')
                __atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
        }
        if (n % 7 == 0) {
            http_file_cache_ref(f);
            http_file_cache_release((void *)f);
        }
        http_file_cache_release((void *)f);
    }
    return NULL;
}

static void *stress_writer(void *arg)
{
    struct stress *s = arg;
    unsigned seed = 12345;

    while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
        put_versioned(rand_r(&seed) % STRESS_FILES, 15 + (size_t)(rand_r(&seed) % 4000));
        usleep(200);
    }
    return NULL;
}

START_TEST(many_threads_get_read_and_release_while_files_change)
{
    struct stress base = {0};
    struct stress args[STRESS_THREADS];
    pthread_t readers[STRESS_THREADS];
    pthread_t writer;
    struct http_file_cache_stats st;

    for (int i = 0; i < STRESS_FILES; i++)
        put_versioned(i, 15 + (size_t)i * 10);
    /* A short interval, and (run 0) fewer entries than files and a content budget of about
     * four: evictions and replacements race hits and budget charges; (run 1) room for all:
     * hot hits race revalidations. */
    base.fc = new_cache((struct http_file_cache_config){.max_entries = _i == 0 ? 8 : 64,
                                                        .shards = 2,
                                                        .revalidate_ms = 1,
                                                        .content_total = _i == 0 ? 8000 : 0});
    ck_assert_int_eq(pthread_create(&writer, NULL, stress_writer, &base), 0);
    for (int t = 0; t < STRESS_THREADS; t++) {
        args[t] = base;
        args[t].id = (unsigned)t + 1;
        ck_assert_int_eq(pthread_create(&readers[t], NULL, stress_reader, &args[t]), 0);
    }
    for (int t = 0; t < STRESS_THREADS; t++) {
        ck_assert_int_eq(pthread_join(readers[t], NULL), 0);
        ck_assert_int_eq(args[t].bad, 0);
    }
    __atomic_store_n(&base.stop, 1, __ATOMIC_RELAXED);
    ck_assert_int_eq(pthread_join(writer, NULL), 0);
    st = stats(base.fc);
    ck_assert_uint_le(st.entries, _i == 0 ? 8 : 64);
    ck_assert_uint_le(st.content_bytes, _i == 0 ? 8000 : 64 * 4015);
    /* Each get is one hit or one miss (a reopen after a change counts as a miss). */
    ck_assert_uint_eq(st.hits + st.misses, (uint64_t)STRESS_THREADS * STRESS_GETS);
    ck_assert(_i == 0 ? st.evictions > 0 : st.evictions == 0);
    fprintf(stderr,
            "file_cache stress: %llu hits, %llu misses, %llu revalidations, %llu evictions, "
            "%llu replacements\n",
            (unsigned long long)st.hits, (unsigned long long)st.misses,
            (unsigned long long)st.revalidations, (unsigned long long)st.evictions,
            (unsigned long long)st.replacements);
    http_file_cache_destroy(base.fc);
}
END_TEST

Suite *file_cache_suite(void);
Suite *file_cache_suite(void)
{
    Suite *s = suite_create("file_cache");
    TCase *tc = tcase_create("core");
    TCase *ts = tcase_create("stress");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, create_needs_a_root);
    tcase_add_test(tc, hit_costs_no_open_and_no_stat);
    tcase_add_test(tc, gz_sibling_is_kept_with_its_own_validators);
    tcase_add_test(tc, validator_fields_are_the_head_fields_without_a_missing_date);
    tcase_add_test(tc, ok_fields_are_a_whole_200_head_between_date_and_connection);
    tcase_add_test(tc, revalidates_after_the_interval_and_reopens_changed_files);
    tcase_add_test(tc, within_the_interval_a_change_is_not_seen);
    tcase_add_test(tc, deleted_file_is_dropped_and_a_new_gz_is_noticed);
    tcase_add_test(tc, directories_redirect_or_serve_their_index);
    tcase_add_test(tc, custom_index_name);
    tcase_add_test(tc, entry_bound_holds_with_clock_eviction);
    tcase_add_test(tc, fd_bound_holds_with_gz_siblings);
    tcase_add_test(tc, evicted_entry_keeps_its_fd_while_referenced);
    tcase_add_test(tc, entries_outlive_the_cache_while_referenced);
    tcase_add_test(tc, small_file_keeps_a_copy_equal_to_the_file);
    tcase_add_test(tc, no_copy_above_the_threshold_or_when_disabled);
    tcase_add_test(tc, no_copy_once_the_total_bound_is_reached);
    tcase_add_test(tc, changed_file_gets_a_new_copy_after_the_interval);
    tcase_add_test(tc, replaced_entry_keeps_its_copy_while_referenced);
    suite_add_tcase(s, tc);
    tcase_add_checked_fixture(ts, setup, teardown);
    tcase_set_timeout(ts, 30);
    tcase_add_loop_test(ts, many_threads_get_read_and_release_while_files_change, 0, 2);
    suite_add_tcase(s, ts);
    return s;
}

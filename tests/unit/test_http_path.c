/*
 * test_http_path.c - request-target normalization and opening beneath the document root
 * (apps/httpd/http_path.c): a table of traversal attempts and ordinary paths with the result
 * each must give (inputs placed against a PROT_NONE page, so a read past the end faults), the
 * output bound, and symlinks in a temporary tree (inside the root followed, outside refused
 * unless allowed) under both openat2 and the component walk.
 */
#include "../../apps/httpd/http_path.h"
#include "../support/support.h"

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Copies s[0..len) to the end of a page followed by a PROT_NONE page. */
static const char *guarded(const char *s, size_t len)
{
    static char *region;
    long page = sysconf(_SC_PAGESIZE);

    if (region == NULL) {
        region = mmap(NULL, (size_t)page * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
        ck_assert_ptr_ne(region, MAP_FAILED);
        ck_assert_int_eq(mprotect(region + page * 2, (size_t)page, PROT_NONE), 0);
    }
    ck_assert_uint_le(len, (size_t)page * 2);
    memcpy(region + page * 2 - len, s, len);
    return region + page * 2 - len;
}

static int normalize(const char *s, char *out, size_t cap, struct http_path *res)
{
    size_t len = strlen(s);

    return http_path_normalize(guarded(s, len), len, out, cap, res);
}

struct path_case {
    const char *in;
    int err;
    const char *out; /* expected path when err == 0 */
};

static const struct path_case cases[] = {
    /* Traversal: refused, never clamped to the root. */
    {"/../etc/passwd", -EBADMSG, NULL},
    {"/..", -EBADMSG, NULL},
    {"/%2e%2e/", -EBADMSG, NULL},
    {"/%2E%2e/etc/passwd", -EBADMSG, NULL},
    {"/.%2e/etc", -EBADMSG, NULL},
    {"/a/%2e%2e/%2e%2e/", -EBADMSG, NULL},
    {"/a/../..", -EBADMSG, NULL},
    {"/a/b/../../../c", -EBADMSG, NULL},
    {"/a/./../../c", -EBADMSG, NULL},
    /* ".." inside the root resolves. */
    {"/a/%2e%2e/", 0, "/"},
    {"/a/b/../c", 0, "/a/c"},
    {"/a/b/%2E%2E/c", 0, "/a/c"},
    {"/a/..", 0, "/"},
    {"/a/b/..", 0, "/a/"},
    {"/a/b/../", 0, "/a/"},
    /* An encoded '/' names no file. */
    {"/%2f", -ENOENT, NULL},
    {"/a%2Fb", -ENOENT, NULL},
    {"/..%2f..%2fetc", -ENOENT, NULL},
    /* NUL and control characters, raw or encoded. */
    {"/a%00b", -EBADMSG, NULL},
    {"/a%00", -EBADMSG, NULL},
    {"/a%0d%0aSet-Cookie:x", -EBADMSG, NULL},
    {"/a%09b", -EBADMSG, NULL},
    {"/a%7f", -EBADMSG, NULL},
    {"/a\tb", -EBADMSG, NULL},
    {"/a\x7f", -EBADMSG, NULL},
    /* Backslashes, raw or encoded. */
    {"/a\\b", -EBADMSG, NULL},
    {"/..\\..\\etc\\passwd", -EBADMSG, NULL},
    {"/a%5cb", -EBADMSG, NULL},
    {"/%5c..%5c..%5cetc", -EBADMSG, NULL},
    /* Malformed escapes. */
    {"/%", -EBADMSG, NULL},
    {"/a%2", -EBADMSG, NULL},
    {"/%zz", -EBADMSG, NULL},
    {"/%2g", -EBADMSG, NULL},
    {"/%%32%65", -EBADMSG, NULL},
    /* Overlong UTF-8 for '.' and '/' is bytes, not separators or dots. */
    {"/%c0%ae%c0%ae/etc", 0, "/\xc0\xae\xc0\xae/etc"},
    {"/%C0%AF", 0, "/\xc0\xaf"},
    {"/%e0%80%ae%e0%80%ae/x", 0, "/\xe0\x80\xae\xe0\x80\xae/x"},
    /* UTF-8, encoded or raw. */
    {"/caf%C3%A9.html", 0, "/caf\xc3\xa9.html"},
    {"/caf\xc3\xa9.html", 0, "/caf\xc3\xa9.html"},
    /* Slashes and dot segments collapse. */
    {"//etc", 0, "/etc"},
    {"/./a/./b", 0, "/a/b"},
    {"/a//b///c", 0, "/a/b/c"},
    {"/.", 0, "/"},
    {"/./", 0, "/"},
    {"/", 0, "/"},
    {"/a/", 0, "/a/"},
    {"/a//", 0, "/a/"},
    {"/a/.", 0, "/a/"},
    {"/.../", 0, "/.../"},
    {"/a/...", 0, "/a/..."},
    {"/.hidden", 0, "/.hidden"},
    {"/..a/b..", 0, "/..a/b.."},
    {"/a%20b", 0, "/a b"},
    {"/a%23b", 0, "/a#b"},
    {"/%41%42c", 0, "/ABc"},
    {"/index.html", 0, "/index.html"},
    /* The query is split off and not decoded or normalized. */
    {"/a?b=../../x", 0, "/a"},
    {"/a/../b?%2e%2e", 0, "/b"},
    {"/?", 0, "/"},
    {"/a?x\r\n", -EBADMSG, NULL},
    {"/a?x y", -EBADMSG, NULL},
    /* Request-target forms. */
    {"http://example.com/a/b?x", 0, "/a/b"},
    {"HTTPS://example.com:8443/a/../b", 0, "/b"},
    {"http://example.com", 0, "/"},
    {"http://example.com?q", 0, "/"},
    {"http://example.com/../x", -EBADMSG, NULL},
    {"http:///a", -EBADMSG, NULL},
    {"http://user:pw@example.com/", -EBADMSG, NULL},
    {"ftp://example.com/", -EBADMSG, NULL},
    {"example.com:80", -EBADMSG, NULL},
    {"*", -EBADMSG, NULL},
    {"a/b", -EBADMSG, NULL},
    {"/a#frag", -EBADMSG, NULL},
    {"/a b", -EBADMSG, NULL},
};

START_TEST(normalizes_or_rejects_each_target_of_the_table)
{
    const struct path_case *c = &cases[_i];
    char out[256];
    struct http_path res;
    int rc = normalize(c->in, out, sizeof(out), &res);

    ck_assert_msg(rc == c->err, "\"%s\": got %d, want %d", c->in, rc, c->err);
    if (c->err == 0) {
        ck_assert_msg(strcmp(out, c->out) == 0, "\"%s\": got \"%s\", want \"%s\"", c->in, out,
                      c->out);
        ck_assert_uint_eq(res.len, strlen(c->out));
        ck_assert(res.trailing_slash == (c->out[strlen(c->out) - 1] == '/'));
    }
}
END_TEST

START_TEST(empty_target_is_malformed)
{
    char out[16];
    struct http_path res;

    ck_assert_int_eq(http_path_normalize(guarded("/", 1), 0, out, sizeof(out), &res), -EBADMSG);
}
END_TEST

START_TEST(returns_the_query_without_the_question_mark)
{
    char out[64];
    struct http_path res;

    ck_assert_int_eq(normalize("/dir?a=1&b=%2e", out, sizeof(out), &res), 0);
    ck_assert_str_eq(out, "/dir");
    ck_assert(!res.trailing_slash);
    ck_assert_uint_eq(res.query_len, 9);
    ck_assert_int_eq(memcmp(res.query, "a=1&b=%2e", 9), 0);
    ck_assert_int_eq(normalize("/dir", out, sizeof(out), &res), 0);
    ck_assert_ptr_null(res.query);
    ck_assert_int_eq(normalize("/dir?", out, sizeof(out), &res), 0);
    ck_assert_ptr_nonnull(res.query);
    ck_assert_uint_eq(res.query_len, 0);
}
END_TEST

START_TEST(output_bound_is_exact_and_counts_every_step)
{
    char out[8];
    struct http_path res;

    /* "/abcd" and its NUL fill six bytes exactly. */
    ck_assert_int_eq(normalize("/abcd", out, 6, &res), 0);
    ck_assert_str_eq(out, "/abcd");
    ck_assert_int_eq(normalize("/abcde", out, 6, &res), -ENAMETOOLONG);
    /* The trailing '/' counts. */
    ck_assert_int_eq(normalize("/abc/", out, 6, &res), 0);
    ck_assert_int_eq(normalize("/abcd/", out, 6, &res), -ENAMETOOLONG);
    /* An intermediate state too long is refused even if ".." would shorten it. */
    ck_assert_int_eq(normalize("/abcdefgh/..", out, 8, &res), -ENAMETOOLONG);
    ck_assert_int_eq(normalize("/", out, 1, &res), -ENAMETOOLONG);
    ck_assert_int_eq(normalize("/", out, 2, &res), 0);
    ck_assert_str_eq(out, "/");
}
END_TEST

START_TEST(long_paths_fit_http_path_max)
{
    static char in[HTTP_PATH_MAX + 16];
    static char out[HTTP_PATH_MAX];
    struct http_path res;

    in[0] = '/';
    memset(in + 1, 'a', HTTP_PATH_MAX - 2);
    in[HTTP_PATH_MAX - 1] = '\0';
    ck_assert_int_eq(normalize(in, out, sizeof(out), &res), 0);
    ck_assert_uint_eq(res.len, HTTP_PATH_MAX - 2 + 1);
    in[HTTP_PATH_MAX - 1] = 'a';
    in[HTTP_PATH_MAX] = '\0';
    ck_assert_int_eq(normalize(in, out, sizeof(out), &res), -ENAMETOOLONG);
}
END_TEST

START_TEST(encode_escapes_what_would_read_as_syntax)
{
    static const char path[] = "/a b/%?#\xc3\xa9\\/x-._~!$&'()*+,;=:@";
    char out[128];
    char back[128];
    struct http_path res;
    ssize_t n = http_path_encode(path, sizeof(path) - 1, out, sizeof(out));

    ck_assert_int_gt(n, 0);
    ck_assert_str_eq(out, "/a%20b/%25%3F%23%C3%A9%5C/x-._~!$&'()*+,;=:@");
    ck_assert_uint_eq((size_t)n, strlen(out));
    /* What normalization accepts comes back unchanged. */
    n = http_path_encode("/a b/%?#\xc3\xa9/", 11, out, sizeof(out));
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(http_path_normalize(out, (size_t)n, back, sizeof(back), &res), 0);
    ck_assert_str_eq(back, "/a b/%?#\xc3\xa9/");
    /* The bound counts the NUL. */
    ck_assert_int_eq(http_path_encode("/ab", 3, out, 4), 3);
    ck_assert_int_eq(http_path_encode("/ab", 3, out, 3), -ENAMETOOLONG);
    ck_assert_int_eq(http_path_encode("/a ", 3, out, 5), -ENAMETOOLONG);
    ck_assert_int_eq(http_path_encode("/a ", 3, out, 6), 5);
}
END_TEST

/* ---------------------------------------------------------------- opening */

static char tmpdir[PATH_MAX];

static void write_file(const char *path, const char *content)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
}

/*
 * tmp/root/{file.txt, sub/inner.txt, sub/up -> ../file.txt, in -> file.txt, insub -> sub,
 * out -> ../outside/secret.txt, abs -> <tmp>/outside/secret.txt, absin -> <tmp>/root/file.txt,
 * around -> ../root/file.txt, outdir -> ../outside, loop -> loop, fifo, empty/}, tmp/outside/.
 * Returns the root's fd.
 */
static int make_tree(void)
{
    char p[PATH_MAX + 64];
    char t[PATH_MAX + 64];
    int root;

    snprintf(tmpdir, sizeof(tmpdir), "/tmp/cr-http-path-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(p, sizeof(p), "%s/root", tmpdir);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/outside", tmpdir);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/outside/secret.txt", tmpdir);
    write_file(p, "secret");
    root = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(root, 0);
    ck_assert_int_eq(mkdirat(root, "root/sub", 0755), 0);
    ck_assert_int_eq(mkdirat(root, "root/empty", 0755), 0);
    snprintf(p, sizeof(p), "%s/root/file.txt", tmpdir);
    write_file(p, "file");
    snprintf(p, sizeof(p), "%s/root/sub/inner.txt", tmpdir);
    write_file(p, "inner");
    ck_assert_int_eq(symlinkat("../file.txt", root, "root/sub/up"), 0);
    ck_assert_int_eq(symlinkat("file.txt", root, "root/in"), 0);
    ck_assert_int_eq(symlinkat("sub", root, "root/insub"), 0);
    ck_assert_int_eq(symlinkat("../outside/secret.txt", root, "root/out"), 0);
    snprintf(t, sizeof(t), "%s/outside/secret.txt", tmpdir);
    ck_assert_int_eq(symlinkat(t, root, "root/abs"), 0);
    snprintf(t, sizeof(t), "%s/root/file.txt", tmpdir);
    ck_assert_int_eq(symlinkat(t, root, "root/absin"), 0);
    ck_assert_int_eq(symlinkat("../root/file.txt", root, "root/around"), 0);
    ck_assert_int_eq(symlinkat("../outside", root, "root/outdir"), 0);
    ck_assert_int_eq(symlinkat("loop", root, "root/loop"), 0);
    ck_assert_int_eq(mkfifoat(root, "root/fifo", 0644), 0);
    close(root);
    snprintf(p, sizeof(p), "%s/root", tmpdir);
    root = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(root, 0);
    return root;
}

static void remove_tree(int root)
{
    close(root);
    ck_assert_int_eq(cr_test_rmtree(tmpdir), 0);
}

/* Opens path and returns its first bytes in buf, or the error. */
static int open_read(int root, const char *path, bool follow, char *buf, size_t cap)
{
    struct stat st;
    int fd;
    int rc = http_path_open(root, path, follow, &fd, &st);
    ssize_t n;

    if (rc < 0) {
        ck_assert_int_eq(fd, -1);
        return rc;
    }
    buf[0] = '\0';
    if (S_ISREG(st.st_mode)) {
        n = pread(fd, buf, cap - 1, 0);
        ck_assert_int_ge(n, 0);
        buf[n] = '\0';
    } else {
        snprintf(buf, cap, "<dir>");
    }
    close(fd);
    return 0;
}

struct open_case {
    const char *path;
    int err;
    const char *content; /* first bytes, or "<dir>" */
};

static const struct open_case open_cases[] = {
    {"/file.txt", 0, "file"},
    {"/", 0, "<dir>"},
    {"/sub", 0, "<dir>"},
    {"/sub/", 0, "<dir>"},
    {"/sub/inner.txt", 0, "inner"},
    {"/in", 0, "file"},
    {"/insub/inner.txt", 0, "inner"},
    {"/sub/up", 0, "file"},
    {"/missing", -ENOENT, NULL},
    {"/file.txt/x", -ENOTDIR, NULL},
    {"/out", -EACCES, NULL},
    {"/abs", -EACCES, NULL},
    {"/absin", -EACCES, NULL}, /* absolute, even though it lands inside */
    {"/around", -EACCES, NULL},
    {"/outdir/secret.txt", -EACCES, NULL},
    {"/loop", -ELOOP, NULL},
    {"/fifo", -EACCES, NULL},
    {"/a/../file.txt", -EINVAL, NULL},
    {"/./file.txt", -EINVAL, NULL},
    {"file.txt", -EINVAL, NULL},
};

static void check_open_cases(bool openat2)
{
    int root = make_tree();
    char buf[64];

    http_path_set_use_openat2(openat2);
    for (size_t i = 0; i < sizeof(open_cases) / sizeof(open_cases[0]); i++) {
        const struct open_case *c = &open_cases[i];
        int rc = open_read(root, c->path, false, buf, sizeof(buf));

        ck_assert_msg(rc == c->err, "%s (openat2 %d): got %d, want %d", c->path, openat2, rc,
                      c->err);
        if (rc == 0)
            ck_assert_str_eq(buf, c->content);
    }
    /* Allowed, the links out lead where they point. */
    ck_assert_int_eq(open_read(root, "/out", true, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "secret");
    ck_assert_int_eq(open_read(root, "/abs", true, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "secret");
    ck_assert_int_eq(open_read(root, "/outdir/secret.txt", true, buf, sizeof(buf)), 0);
    ck_assert_int_eq(open_read(root, "/fifo", true, buf, sizeof(buf)), -EACCES);
    http_path_set_use_openat2(true);
    remove_tree(root);
}

START_TEST(opens_beneath_the_root_with_openat2)
{
    check_open_cases(true);
}
END_TEST

START_TEST(opens_beneath_the_root_with_the_component_walk)
{
    check_open_cases(false);
}
END_TEST

START_TEST(walk_refuses_dotdot_symlinks_that_climb_out)
{
    int root = make_tree();
    char buf[64];

    /* sub/esc -> ../../outside/secret.txt climbs out through a real directory. */
    ck_assert_int_eq(symlinkat("../../outside/secret.txt", root, "sub/esc"), 0);
    ck_assert_int_eq(symlinkat("../sub/../sub/inner.txt", root, "sub/zigzag"), 0);
    for (int mode = 0; mode < 2; mode++) {
        http_path_set_use_openat2(mode == 0);
        ck_assert_int_eq(open_read(root, "/sub/esc", false, buf, sizeof(buf)), -EACCES);
        ck_assert_int_eq(open_read(root, "/sub/zigzag", false, buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "inner");
    }
    http_path_set_use_openat2(true);
    remove_tree(root);
}
END_TEST

/* A query parameter: the last one of its name, its value raw; a longer name
 * with the same start, a name without '=' and an absent one do not match. */
START_TEST(query_param_finds_the_last_value_of_its_name)
{
    static const char q[] = "formats=x&format&format=json&window=5&format=html";
    const char *v = NULL;
    size_t n = 0;

    ck_assert(http_query_param(q, sizeof(q) - 1, "format", &v, &n));
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(memcmp(v, "html", 4), 0);
    ck_assert(http_query_param(q, sizeof(q) - 1, "window", &v, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(v[0], '5');
    ck_assert(!http_query_param(q, sizeof(q) - 1, "form", &v, &n));
    ck_assert(!http_query_param(q, 9, "format", &v, &n)); /* "formats=x" alone */
    ck_assert(!http_query_param(NULL, 0, "format", &v, &n));
    ck_assert(http_query_param("a=", 2, "a", &v, &n));
    ck_assert_uint_eq(n, 0);
}
END_TEST

Suite *http_path_suite(void);
Suite *http_path_suite(void)
{
    Suite *s = suite_create("http_path");
    TCase *tc = tcase_create("normalize");
    TCase *to = tcase_create("open");

    tcase_set_timeout(tc, 10);
    tcase_add_loop_test(tc, normalizes_or_rejects_each_target_of_the_table, 0,
                        (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_test(tc, empty_target_is_malformed);
    tcase_add_test(tc, returns_the_query_without_the_question_mark);
    tcase_add_test(tc, query_param_finds_the_last_value_of_its_name);
    tcase_add_test(tc, output_bound_is_exact_and_counts_every_step);
    tcase_add_test(tc, long_paths_fit_http_path_max);
    tcase_add_test(tc, encode_escapes_what_would_read_as_syntax);
    suite_add_tcase(s, tc);
    tcase_set_timeout(to, 10);
    tcase_add_test(to, opens_beneath_the_root_with_openat2);
    tcase_add_test(to, opens_beneath_the_root_with_the_component_walk);
    tcase_add_test(to, walk_refuses_dotdot_symlinks_that_climb_out);
    suite_add_tcase(s, to);
    return s;
}

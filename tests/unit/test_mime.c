/*
 * test_mime.c - the extension -> media type table (apps/httpd/mime.c): the built-in types and
 * their charset, case-insensitive lookup, what counts as an extension, a mime.types file
 * extending and overriding the built-ins with malformed lines skipped, a missing file, and the
 * system's /etc/mime.types when there is one.
 */
#include "../../apps/httpd/mime.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct http_mime *builtin_only(void)
{
    struct http_mime *m;

    ck_assert_int_eq(http_mime_create(&m, NULL), 0);
    ck_assert_ptr_nonnull(m);
    return m;
}

static const char *type_of(const struct http_mime *m, const char *path)
{
    size_t len;
    const char *t = http_mime_lookup(m, path, strlen(path), &len);

    ck_assert_uint_eq(len, strlen(t));
    return t;
}

static const struct {
    const char *path;
    const char *type;
} builtin_cases[] = {
    {"/index.html", "text/html; charset=utf-8"},
    {"/a.htm", "text/html; charset=utf-8"},
    {"/s.css", "text/css; charset=utf-8"},
    {"/app.js", "text/javascript; charset=utf-8"},
    {"/m.mjs", "text/javascript; charset=utf-8"},
    {"/d.json", "application/json"},
    {"/r.txt", "text/plain; charset=utf-8"},
    {"/i.svg", "image/svg+xml"},
    {"/i.png", "image/png"},
    {"/i.jpg", "image/jpeg"},
    {"/i.jpeg", "image/jpeg"},
    {"/i.gif", "image/gif"},
    {"/i.webp", "image/webp"},
    {"/i.avif", "image/avif"},
    {"/favicon.ico", "image/x-icon"},
    {"/f.woff", "font/woff"},
    {"/f.woff2", "font/woff2"},
    {"/f.ttf", "font/ttf"},
    {"/d.pdf", "application/pdf"},
    {"/w.wasm", "application/wasm"},
    {"/x.xml", "application/xml"},
    {"/v.mp4", "video/mp4"},
    {"/v.webm", "video/webm"},
    {"/a.mp3", "audio/mpeg"},
    {"/z.zip", "application/zip"},
    {"/z.tar.gz", "application/gzip"},
    {"/z.tar", "application/x-tar"},
    {"/README.md", "text/markdown; charset=utf-8"},
    /* Case-insensitive. */
    {"/INDEX.HTML", "text/html; charset=utf-8"},
    {"/App.Js", "text/javascript; charset=utf-8"},
    /* No extension, or not one. */
    {"/Makefile", HTTP_MIME_DEFAULT},
    {"/file.unknownext", HTTP_MIME_DEFAULT},
    {"/a.html/b", HTTP_MIME_DEFAULT},
    {"/.profile", HTTP_MIME_DEFAULT},
    {"/dir/.html", HTTP_MIME_DEFAULT},
    {"/x.", HTTP_MIME_DEFAULT},
    {"/", HTTP_MIME_DEFAULT},
    {"", HTTP_MIME_DEFAULT},
    {"/x.abcdefghijklmnopqrstuvwxyz0123456789", HTTP_MIME_DEFAULT},
    {"/dir.d/x.css", "text/css; charset=utf-8"},
};

START_TEST(builtin_table_maps_the_web_types)
{
    struct http_mime *m = builtin_only();

    for (size_t i = 0; i < sizeof(builtin_cases) / sizeof(builtin_cases[0]); i++)
        ck_assert_msg(strcmp(type_of(m, builtin_cases[i].path), builtin_cases[i].type) == 0,
                      "%s: got %s, want %s", builtin_cases[i].path,
                      type_of(m, builtin_cases[i].path), builtin_cases[i].type);
    ck_assert_ptr_null(http_mime_by_ext(m, "nope", 4));
    ck_assert_ptr_null(http_mime_by_ext(m, "", 0));
    ck_assert_str_eq(http_mime_by_ext(m, "PNG", 3), "image/png");
    ck_assert_str_eq(http_mime_lookup(m, "/a", 2, NULL), HTTP_MIME_DEFAULT);
    http_mime_destroy(m);
    http_mime_destroy(NULL);
}
END_TEST

static char *write_types(const char *content)
{
    static char path[64];
    FILE *f;
    int fd;

    snprintf(path, sizeof(path), "/tmp/cr-mime-XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(content, 1, strlen(content), f), strlen(content));
    fclose(f);
    return path;
}

START_TEST(types_file_extends_and_overrides_and_skips_malformed_lines)
{
    const char *content = "# a comment line\n"
                          "\n"
                          "text/html\t\thtml htm shtml\n"
                          "application/x-foo\tfoo FOO2 # trailing comment\n"
                          "text/x-bar bar\n"
                          "text/plain md\n"
                          "nonsense baz\n"
                          "a/b/c qux\n"
                          "/x quux\n"
                          "image/ corge\n"
                          "application/x-long waytoolongextensionthatexceedsthirtyone\n"
                          "application/x-bad good bad\x01\n"
                          "application/x-dot a.b\n"
                          "video/x-last   last   ";
    char *path = write_types(content);
    struct http_mime *m;

    ck_assert_int_eq(http_mime_create(&m, path), 0);
    unlink(path);
    /* The same type without parameters keeps the built-in charset. */
    ck_assert_str_eq(type_of(m, "/a.html"), "text/html; charset=utf-8");
    ck_assert_str_eq(type_of(m, "/a.shtml"), "text/html; charset=utf-8");
    ck_assert_str_eq(type_of(m, "/a.foo"), "application/x-foo");
    ck_assert_str_eq(type_of(m, "/a.foo2"), "application/x-foo");
    ck_assert_str_eq(type_of(m, "/a.bar"), "text/x-bar; charset=utf-8");
    /* A different type overrides. */
    ck_assert_str_eq(type_of(m, "/a.md"), "text/plain; charset=utf-8");
    ck_assert_str_eq(type_of(m, "/a.last"), "video/x-last");
    /* Malformed lines add nothing, not even their valid parts. */
    ck_assert_str_eq(type_of(m, "/a.baz"), HTTP_MIME_DEFAULT);
    ck_assert_str_eq(type_of(m, "/a.qux"), HTTP_MIME_DEFAULT);
    ck_assert_str_eq(type_of(m, "/a.quux"), HTTP_MIME_DEFAULT);
    ck_assert_str_eq(type_of(m, "/a.corge"), HTTP_MIME_DEFAULT);
    ck_assert_str_eq(type_of(m, "/a.good"), HTTP_MIME_DEFAULT);
    ck_assert_ptr_null(http_mime_by_ext(m, "b", 1));
    /* Untouched built-ins stay. */
    ck_assert_str_eq(type_of(m, "/a.png"), "image/png");
    http_mime_destroy(m);
}
END_TEST

START_TEST(missing_types_file_means_builtin_only)
{
    struct http_mime *m;
    struct http_mime *b = builtin_only();

    ck_assert_int_eq(http_mime_create(&m, "/nonexistent/mime.types"), 0);
    ck_assert_uint_eq(http_mime_count(m), http_mime_count(b));
    ck_assert_str_eq(type_of(m, "/a.css"), "text/css; charset=utf-8");
    http_mime_destroy(m);
    http_mime_destroy(b);
}
END_TEST

START_TEST(system_types_file_loads_when_present)
{
    struct http_mime *m;
    struct http_mime *b = builtin_only();

    if (access("/etc/mime.types", R_OK) != 0) {
        http_mime_destroy(b);
        return;
    }
    ck_assert_int_eq(http_mime_create(&m, "/etc/mime.types"), 0);
    ck_assert_uint_gt(http_mime_count(m), http_mime_count(b));
    /* The built-in charset survives the file's plain "text/html". */
    ck_assert_str_eq(type_of(m, "/index.html"), "text/html; charset=utf-8");
    ck_assert_str_eq(type_of(m, "/Makefile"), HTTP_MIME_DEFAULT);
    http_mime_destroy(m);
    http_mime_destroy(b);
}
END_TEST

START_TEST(large_table_keeps_every_extension)
{
    size_t cap = 1 << 16;
    char *content = malloc(cap);
    size_t len = 0;
    struct http_mime *m;
    char *path;

    ck_assert_ptr_nonnull(content);
    for (int i = 0; i < 2000; i++)
        len += (size_t)snprintf(content + len, cap - len, "application/x-t%d e%d f%d\n", i, i, i);
    path = write_types(content);
    ck_assert_int_eq(http_mime_create(&m, path), 0);
    unlink(path);
    for (int i = 0; i < 2000; i += 7) {
        char ext[16];
        char want[32];

        snprintf(ext, sizeof(ext), "F%d", i);
        snprintf(want, sizeof(want), "application/x-t%d", i);
        ck_assert_str_eq(http_mime_by_ext(m, ext, strlen(ext)), want);
    }
    http_mime_destroy(m);
    free(content);
}
END_TEST

Suite *mime_suite(void);
Suite *mime_suite(void)
{
    Suite *s = suite_create("mime");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, builtin_table_maps_the_web_types);
    tcase_add_test(tc, types_file_extends_and_overrides_and_skips_malformed_lines);
    tcase_add_test(tc, missing_types_file_means_builtin_only);
    tcase_add_test(tc, system_types_file_loads_when_present);
    tcase_add_test(tc, large_table_keeps_every_extension);
    suite_add_tcase(s, tc);
    return s;
}

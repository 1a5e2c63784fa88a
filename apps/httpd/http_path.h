/*
 * http_path.h - the request-target to file mapping of cabrank-httpd: percent-decoding and
 * normalization of the request path (RFC 9112 3.2, RFC 3986 5.2.4) with no way out of the
 * document root, and opening a normalized path beneath the root directory without following
 * symlinks out of it. Called by the HTTP service and the open-file cache on any serving thread;
 * everything here is stateless and thread-safe. http_path_normalize() allocates nothing.
 *
 * Traversal policy (chosen to match nginx, which answers 400 for paths that escape):
 *   - ".." that would climb above the root is rejected (-EBADMSG, 400), never clamped;
 *     ".." inside the root is resolved ("/a/b/../c" is "/a/c"), so is "%2e%2e".
 *   - "%2F" (an encoded '/') is rejected with -ENOENT (404): no file name contains a '/',
 *     and treating it as a separator would let "%2e%2e%2f" escape the segment split.
 *   - NUL (raw or "%00"), other control characters (raw or encoded, 0x01-0x1f, 0x7f) and
 *     '\\' (raw or "%5C") are rejected with -EBADMSG (400): none belongs in a served name and
 *     '\\' is a separator on the systems some of our logs and proxies end up on.
 *   - '#' (a fragment is never sent) and malformed '%' escapes are rejected (-EBADMSG).
 *   - Bytes >= 0x80 (UTF-8 or not) pass through as they are: a file name is bytes, and an
 *     overlong sequence such as "%C0%AE" decodes to the bytes C0 AE, never to '.' or '/',
 *     because segments are split and dot-segments recognised on the decoded bytes alone.
 *   - Symlinks leading outside the root are refused by http_path_open() unless allowed.
 */
#ifndef CABRANK_HTTPD_HTTP_PATH_H
#define CABRANK_HTTPD_HTTP_PATH_H

#include <cabrank/common.h>
#include <sys/stat.h>

/* Longest normalized path, including its NUL (Linux PATH_MAX). */
#define HTTP_PATH_MAX 4096

struct http_path {
    /* Bytes in the normalized path, without its NUL. */
    size_t len;
    /* The path ends with '/': the client named a directory ("/", "/a/", "/a/.", "/a/b/.."). */
    bool trailing_slash;
    /* The query after '?' in the target, without the '?' (points into target, not decoded);
     * NULL when the target has no '?'. For the Location of a "/dir" -> "/dir/" redirect. */
    const char *query;
    size_t query_len;
};

/*
 * Decodes and normalizes the request-target target[0..len) into out[0..out_cap), NUL-terminated:
 * the result starts with '/', has no empty, "." or ".." segment (so no "//", "/./", "/../"), no
 * NUL, and ends with '/' only when res->trailing_slash. The query ("?...") is split off and
 * not decoded. Origin-form ("/a/b?q") and absolute-form ("http://host/a/b", "https://...",
 * scheme case-insensitive; the authority is skipped and ignored, the path is "/" when absent)
 * are accepted; authority-form ("host:80"), asterisk-form ("*") and anything else are not.
 *
 * Returns 0; -EBADMSG (answer 400) for a malformed or escaping target (see the policy above);
 * -ENOENT (404) for an encoded '/'; -ENAMETOOLONG (414) when the path, at any step of the
 * normalization, does not fit in out_cap bytes. On error out holds garbage. Allocation-free.
 * Thread-safe.
 */
CR_MUST_CHECK int http_path_normalize(const char *target, size_t len, char *out, size_t out_cap,
                                      struct http_path *res);

/*
 * Percent-encodes path[0..len) (a normalized path, whose '?', '#', '%', space and other
 * decoded bytes would otherwise be read as syntax) for use in a URI such as the Location of
 * the "/dir" -> "/dir/" redirect: every byte but RFC 3986 pchar (unreserved, sub-delims, ':',
 * '@') and '/' becomes "%XX". Writes into out[0..cap), NUL-terminated. Returns the length, or
 * -ENAMETOOLONG when it does not fit (3 * len + 1 always does). http_path_normalize() of the
 * result gives path back. Allocation-free. Thread-safe.
 */
CR_MUST_CHECK ssize_t http_path_encode(const char *path, size_t len, char *out, size_t cap);

/*
 * Opens path (a result of http_path_normalize(), so starting with '/', "/" being the root
 * itself) beneath the directory root_fd (borrowed) read-only, close-on-exec and non-blocking
 * (so a FIFO planted in the tree cannot stall a thread), and fstat()s it. Symlinks are followed
 * while they stay beneath the root; one that leads outside it (absolute, or ".." above the
 * root) is refused unless follow_outside_symlinks. Uses openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS) (Linux 5.6+); where the kernel lacks it, walks the path one component
 * at a time with O_NOFOLLOW and resolves each symlink itself with the same rules.
 *
 * Returns 0 with *fd_out (returns owned: the caller closes it) and *st_out set, for a regular
 * file or a directory (the caller checks S_ISDIR: "/dir" -> 301 "/dir/", "/dir/" -> its
 * index). Errors: -ENOENT or -ENOTDIR (404); -EACCES (403: permission denied, a symlink out of
 * the root, or neither a regular file nor a directory); -ELOOP (too many symlinks, 404 or 403);
 * -ENAMETOOLONG (414); -EINVAL for a path that is not normalized (our bug); -EMFILE, -ENFILE,
 * -ENOMEM (503). Thread-safe.
 */
CR_MUST_CHECK int http_path_open(int root_fd, const char *path, bool follow_outside_symlinks,
                                 int *fd_out, struct stat *st_out);

/* The value of the last "key=value" among the &-separated parameters of a raw
 * (undecoded) query q[0..len): *val points into q, *val_len its length. false
 * when key is not there. Thread-safe. */
bool http_query_param(const char *q, size_t len, const char *key, const char **val,
                      size_t *val_len);

/* For tests: false makes http_path_open() use the component walk even where openat2 exists.
 * Thread-safe (an atomic flag), but meant to be set before serving. */
void http_path_set_use_openat2(bool use);

#endif /* CABRANK_HTTPD_HTTP_PATH_H */

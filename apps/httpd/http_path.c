/*
 * http_path.c - request-target normalization and opening beneath the document root for
 * cabrank-httpd (policy in http_path.h). Runs on every serving thread; stateless but for one
 * process-wide flag saying whether openat2(2) works here, found on first use.
 *
 * Normalization works on decoded bytes segment by segment, writing straight into the output:
 * "%2e%2e" is recognised as ".." because the test runs after decoding, and a decoded '/' is
 * refused rather than becoming a separator, so no encoding can smuggle a separator or a dot
 * segment past the checks.
 */
#include "http_path.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Symlinks followed in one lookup before -ELOOP, as the kernel's MAXSYMLINKS. */
#define WALK_MAX_LINKS 40

/* openat2 usability: 0 not probed yet, 1 works, -1 missing (old kernel, seccomp). Relaxed:
 * the probe is idempotent, so racing first calls may both probe and agree. */
static int openat2_state;
/* Cleared by tests to force the component walk. Relaxed, read per call. */
static bool use_openat2 = true;

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static bool is_ctl(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

/* A path byte copied as it is: no control byte, space, '%', '#', '/' or '\\'.
 * Looked up in a table built from that rule: every request's path goes through
 * it a byte at a time. */
#define PLAIN(c)   ((c) > ' ' && (c) != 0x7f && (c) != '%' && (c) != '#' && (c) != '/' && (c) != '\\')
#define PLAIN4(c)  PLAIN(c), PLAIN((c) + 1), PLAIN((c) + 2), PLAIN((c) + 3)
#define PLAIN16(c) PLAIN4(c), PLAIN4((c) + 4), PLAIN4((c) + 8), PLAIN4((c) + 12)
#define PLAIN64(c) PLAIN16(c), PLAIN16((c) + 16), PLAIN16((c) + 32), PLAIN16((c) + 48)
static const bool plain_byte[256] = {PLAIN64(0), PLAIN64(64), PLAIN64(128), PLAIN64(192)};

/*
 * Skips "http://authority" or "https://authority" (scheme case-insensitive) at the start of
 * target[0..len). Returns the offset of what follows the authority, or -EBADMSG. The authority
 * is not interpreted (the service owns Host handling) but must be non-empty and free of
 * userinfo, which RFC 9110 4.2.4 tells recipients to treat as an error.
 */
static ssize_t skip_absolute_form(const char *t, size_t len)
{
    size_t i = 0;
    size_t a;

    if (len >= 7 && strncasecmp(t, "http://", 7) == 0)
        i = 7;
    else if (len >= 8 && strncasecmp(t, "https://", 8) == 0)
        i = 8;
    else
        return -EBADMSG;
    a = i;
    while (i < len && t[i] != '/' && t[i] != '?') {
        unsigned char c = (unsigned char)t[i];

        if (is_ctl(c) || c == ' ' || c == '#' || c == '@' || c == '\\')
            return -EBADMSG;
        i++;
    }
    if (i == a)
        return -EBADMSG;
    return (ssize_t)i;
}

bool http_query_param(const char *q, size_t len, const char *key, const char **val, size_t *val_len)
{
    size_t klen = strlen(key);
    bool found = false;
    size_t i = 0;

    while (q != NULL && i < len) {
        const char *amp = memchr(q + i, '&', len - i);
        size_t end = amp != NULL ? (size_t)(amp - q) : len;

        if (end - i > klen && memcmp(q + i, key, klen) == 0 && q[i + klen] == '=') {
            *val = q + i + klen + 1;
            *val_len = end - i - klen - 1;
            found = true;
        }
        i = end + 1;
    }
    return found;
}

int http_path_normalize(const char *target, size_t len, char *out, size_t out_cap,
                        struct http_path *res)
{
    size_t i = 0;
    size_t end = len;
    size_t o = 0;
    /* The path so far names a directory: true at the root and after '/', "." or "..". */
    bool dir = true;

    res->len = 0;
    res->trailing_slash = false;
    res->query = NULL;
    res->query_len = 0;
    if (len == 0)
        return -EBADMSG;
    if (out_cap < 2)
        return -ENAMETOOLONG;
    if (target[0] != '/') {
        ssize_t skip = skip_absolute_form(target, len);

        if (skip < 0)
            return (int)skip;
        i = (size_t)skip;
    }
    {
        const char *q = memchr(target + i, '?', len - i);

        if (q != NULL) {
            end = (size_t)(q - target);
            res->query = q + 1;
            res->query_len = len - end - 1;
        }
    }
    /* The query is copied into a Location by the service: no byte in it may split headers. */
    for (size_t q = end; q < len; q++) {
        unsigned char c = (unsigned char)target[q];

        if (is_ctl(c) || c == ' ' || c == '#')
            return -EBADMSG;
    }

    /* Invariant: out[0..o) is a normalized path with no trailing '/' ("/" alone when o == 1). */
    out[o++] = '/';
    while (i < end) {
        size_t seg;
        size_t seg_len;

        if (target[i] == '/') {
            dir = true;
            i++;
            continue;
        }
        if (o > 1) {
            if (o >= out_cap - 1)
                return -ENAMETOOLONG;
            out[o++] = '/';
        }
        seg = o;
        while (i < end && target[i] != '/') {
            unsigned char c = (unsigned char)target[i];
            size_t run = i;

            /* A run of plain bytes goes in one copy, after one bound check. */
            while (run < end && plain_byte[(unsigned char)target[run]])
                run++;
            if (run > i) {
                if (run - i > out_cap - 1 - o)
                    return -ENAMETOOLONG;
                memcpy(out + o, target + i, run - i);
                o += run - i;
                i = run;
                continue;
            }
            if (c == '%') {
                int hi;
                int lo;

                if (end - i < 3)
                    return -EBADMSG;
                hi = hex_value((unsigned char)target[i + 1]);
                lo = hex_value((unsigned char)target[i + 2]);
                if (hi < 0 || lo < 0)
                    return -EBADMSG;
                c = (unsigned char)(hi << 4 | lo);
                if (c == '/')
                    return -ENOENT;
                i += 3;
            } else {
                /* Raw bytes a request-target cannot hold (the encoded forms are fine). */
                if (c == ' ' || c == '#')
                    return -EBADMSG;
                i++;
            }
            if (is_ctl(c) || c == '\\')
                return -EBADMSG;
            if (o >= out_cap - 1)
                return -ENAMETOOLONG;
            out[o++] = (char)c;
        }
        seg_len = o - seg;
        if (seg_len == 1 && out[seg] == '.') {
            o = seg > 1 ? seg - 1 : 1;
            dir = true;
        } else if (seg_len == 2 && out[seg] == '.' && out[seg + 1] == '.') {
            o = seg > 1 ? seg - 1 : 1;
            if (o == 1)
                return -EBADMSG; /* above the root: refused, never clamped */
            while (out[o - 1] != '/')
                o--;
            if (o > 1)
                o--; /* drop the '/' too, unless it is the root's */
            dir = true;
        } else {
            dir = false;
        }
    }
    if (dir && o > 1) {
        if (o >= out_cap - 1)
            return -ENAMETOOLONG;
        out[o++] = '/';
    }
    out[o] = '\0';
    res->len = o;
    res->trailing_slash = out[o - 1] == '/';
    return 0;
}

/* RFC 3986 pchar minus pct-encoded, plus '/': what http_path_encode() leaves as it is. */
static bool is_path_char(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c != '\0' && strchr("-._~!$&'()*+,;=:@/", c) != NULL;
}

ssize_t http_path_encode(const char *path, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)path[i];

        if (is_path_char(c)) {
            if (o + 1 >= cap)
                return -ENAMETOOLONG;
            out[o++] = (char)c;
        } else {
            if (o + 3 >= cap)
                return -ENAMETOOLONG;
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (o >= cap)
        return -ENAMETOOLONG;
    out[o] = '\0';
    return (ssize_t)o;
}

void http_path_set_use_openat2(bool use)
{
    __atomic_store_n(&use_openat2, use, __ATOMIC_RELAXED);
    __atomic_store_n(&openat2_state, 0, __ATOMIC_RELAXED);
}

static long sys_openat2(int dirfd, const char *path, int flags, unsigned long long resolve)
{
    struct open_how how = {.flags = (unsigned long long)flags, .resolve = resolve};

    return syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

static bool has_openat2(void)
{
    int state;

    if (!__atomic_load_n(&use_openat2, __ATOMIC_RELAXED))
        return false;
    state = __atomic_load_n(&openat2_state, __ATOMIC_RELAXED);
    if (state == 0) {
        /* Any failure (ENOSYS on old kernels, EPERM from old seccomp profiles) means the
         * component walk; a working probe cannot fail. */
        long fd =
            sys_openat2(AT_FDCWD, ".", O_PATH | O_CLOEXEC, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);

        state = fd >= 0 ? 1 : -1;
        if (fd >= 0)
            close((int)fd);
        __atomic_store_n(&openat2_state, state, __ATOMIC_RELAXED);
    }
    return state > 0;
}

/*
 * The userspace RESOLVE_BENEATH: walks rel one component at a time from root_fd, entering only
 * real directories (O_NOFOLLOW) and expanding each symlink textually into the rest of the path,
 * counting how deep below the root it stands so a ".." from a symlink can never leave it and an
 * absolute symlink is refused. Returns an fd opened with oflags, or -errno (-EXDEV for an
 * escape). Caveat: ".." is taken through the kernel's parent of the directory reached, so a
 * directory moved out of the tree during the walk could be climbed out of; openat2 has no such
 * race, and this path only runs on kernels before 5.6.
 */
static int open_walk(int root_fd, const char *rel, int oflags)
{
    char bufs[2][HTTP_PATH_MAX];
    char name[NAME_MAX + 1];
    char target[HTTP_PATH_MAX];
    int which = 0;
    const char *rest;
    int cur = root_fd;
    int depth = 0;
    int links = 0;
    int fd = -1;
    int err;
    size_t rl = strlen(rel);

    if (rl >= sizeof(bufs[0]))
        return -ENAMETOOLONG;
    memcpy(bufs[0], rel, rl + 1);
    rest = bufs[0];
    for (;;) {
        const char *comp;
        size_t clen;
        const char *next;
        struct stat st;
        int nfd;

        while (*rest == '/')
            rest++;
        if (*rest == '\0') {
            /* The path ended on a directory (after "." or "..", or a symlink to a dir). */
            fd = openat(cur, ".", oflags);
            err = fd < 0 ? -errno : 0;
            goto out_close_cur;
        }
        comp = rest;
        clen = strcspn(comp, "/");
        next = comp + clen;
        if (clen == 1 && comp[0] == '.') {
            rest = next;
            continue;
        }
        if (clen == 2 && comp[0] == '.' && comp[1] == '.') {
            if (depth == 0) {
                err = -EXDEV;
                goto out_close_cur;
            }
            nfd = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (nfd < 0) {
                err = -errno;
                goto out_close_cur;
            }
            if (cur != root_fd)
                close(cur);
            cur = nfd;
            depth--;
            rest = next;
            continue;
        }
        if (clen > NAME_MAX) {
            err = -ENAMETOOLONG;
            goto out_close_cur;
        }
        memcpy(name, comp, clen);
        name[clen] = '\0';
        while (*next == '/')
            next++;
        if (*next == '\0') {
            /* Last component: open it for real; O_NOFOLLOW fails with ELOOP on a symlink,
             * which is then expanded below. */
            fd = openat(cur, name, oflags | O_NOFOLLOW);
            if (fd >= 0 || errno != ELOOP) {
                err = fd < 0 ? -errno : 0;
                goto out_close_cur;
            }
        }
        nfd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0) {
            err = -errno;
            goto out_close_cur;
        }
        if (fstat(nfd, &st) < 0) {
            err = -errno;
            close(nfd);
            goto out_close_cur;
        }
        if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlinkat(nfd, "", target, sizeof(target));
            size_t nl = strlen(next);

            err = n < 0 ? -errno : 0;
            close(nfd);
            if (err < 0)
                goto out_close_cur;
            if (++links > WALK_MAX_LINKS) {
                err = -ELOOP;
                goto out_close_cur;
            }
            if (n == 0) {
                err = -ENOENT;
                goto out_close_cur;
            }
            if (target[0] == '/') {
                err = -EXDEV;
                goto out_close_cur;
            }
            if ((size_t)n + 1 + nl >= sizeof(bufs[0])) {
                err = -ENAMETOOLONG;
                goto out_close_cur;
            }
            /* rest may point into bufs[which]: build the new path in the other buffer. */
            which ^= 1;
            memcpy(bufs[which], target, (size_t)n);
            bufs[which][n] = '/';
            memcpy(bufs[which] + n + 1, next, nl + 1);
            rest = bufs[which];
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            close(nfd);
            err = -ENOTDIR;
            goto out_close_cur;
        }
        if (cur != root_fd)
            close(cur);
        cur = nfd;
        depth++;
        rest = next;
    }
out_close_cur:
    if (cur != root_fd)
        close(cur);
    return err < 0 ? err : fd;
}

/* Whether path has a "." or ".." segment: http_path_normalize() never leaves one. */
static bool has_dot_segment(const char *path)
{
    for (const char *p = path; *p != '\0';) {
        size_t n;

        while (*p == '/')
            p++;
        n = strcspn(p, "/");
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return true;
        p += n;
    }
    return false;
}

int http_path_open(int root_fd, const char *path, bool follow_outside_symlinks, int *fd_out,
                   struct stat *st_out)
{
    const int oflags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    const char *rel;
    int fd;
    int err;

    *fd_out = -1;
    if (path[0] != '/' || has_dot_segment(path))
        return -EINVAL;
    rel = path + 1;
    if (*rel == '\0')
        rel = ".";
    if (follow_outside_symlinks) {
        fd = openat(root_fd, rel, oflags);
        err = fd < 0 ? -errno : 0;
    } else if (has_openat2()) {
        long r = sys_openat2(root_fd, rel, oflags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);

        fd = (int)r;
        err = r < 0 ? -errno : 0;
        /* Kernels before 5.12 may answer EAGAIN when a rename raced the lookup. */
        if (err == -EAGAIN) {
            r = sys_openat2(root_fd, rel, oflags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
            fd = (int)r;
            err = r < 0 ? -errno : 0;
        }
    } else {
        fd = open_walk(root_fd, rel, oflags);
        err = fd < 0 ? fd : 0;
    }
    if (err < 0) {
        switch (err) {
        case -EXDEV:  /* a symlink out of the root */
        case -ENXIO:  /* a socket */
        case -ENODEV: /* a device without a driver */
        case -EPERM:
            return -EACCES;
        case -EAGAIN:
            return -ENOENT; /* still racing a rename: as if not there yet */
        default:
            return err;
        }
    }
    if (fstat(fd, st_out) < 0) {
        err = -errno;
        goto out_close_fd;
    }
    if (!S_ISREG(st_out->st_mode) && !S_ISDIR(st_out->st_mode)) {
        err = -EACCES;
        goto out_close_fd;
    }
    *fd_out = fd;
    return 0;

out_close_fd:
    close(fd);
    return err;
}

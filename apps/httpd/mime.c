/*
 * mime.c - the extension -> media type table of cabrank-httpd (contract in mime.h). Built by
 * the main thread at start (built-in entries, then /etc/mime.types), read-only afterwards.
 * Owns one open-addressing hash table of fixed-size entries and one string pool of the types;
 * entries name their type by offset into the pool, so the pool may grow while loading.
 */
#include "mime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CHARSET       HTTP_MIME_CHARSET
#define TABLE_INITIAL 128 /* slots; a power of two */

struct mime_entry {
    /* Lowercase, NUL-terminated; empty means a free slot. */
    char ext[HTTP_MIME_EXT_MAX + 1];
    uint32_t type_off;
    uint32_t type_len;
};

struct http_mime {
    /* Immutable after http_mime_create(). */
    struct mime_entry *slots;
    size_t mask; /* slots - 1 */
    size_t count;
    char *pool;
    size_t pool_len;
    size_t pool_cap;
};

static const struct {
    const char *exts;
    const char *type;
} builtin[] = {
    {"html htm", "text/html" CHARSET},
    {"css", "text/css" CHARSET},
    {"js mjs", "text/javascript" CHARSET},
    {"json map", "application/json"},
    {"txt", "text/plain" CHARSET},
    {"md markdown", "text/markdown" CHARSET},
    {"csv", "text/csv" CHARSET},
    {"xml", "application/xml"},
    {"xhtml", "application/xhtml+xml"},
    {"rss", "application/rss+xml"},
    {"atom", "application/atom+xml"},
    {"webmanifest", "application/manifest+json"},
    {"svg svgz", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/x-icon"},
    {"bmp", "image/bmp"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    {"pdf", "application/pdf"},
    {"wasm", "application/wasm"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"ogg", "audio/ogg"},
    {"wav", "audio/wav"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
};

static uint64_t hash_ext(const char *ext, size_t len)
{
    uint64_t h = UINT64_C(14695981039346656037);

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)ext[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

static struct mime_entry *find_slot(const struct http_mime *m, const char *ext, size_t len)
{
    /* Load stays at most 1/2, so a free slot always ends the probe. */
    for (size_t i = hash_ext(ext, len) & m->mask;; i = (i + 1) & m->mask) {
        struct mime_entry *e = &m->slots[i];

        if (e->ext[0] == '\0' || (strncmp(e->ext, ext, len) == 0 && e->ext[len] == '\0'))
            return e;
    }
}

static int grow_table(struct http_mime *m)
{
    size_t n = (m->mask + 1) * 2;
    struct mime_entry *old = m->slots;
    size_t old_n = m->mask + 1;

    m->slots = calloc(n, sizeof(*m->slots));
    if (m->slots == NULL) {
        m->slots = old;
        return -ENOMEM;
    }
    m->mask = n - 1;
    for (size_t i = 0; i < old_n; i++) {
        if (old[i].ext[0] != '\0')
            *find_slot(m, old[i].ext, strlen(old[i].ext)) = old[i];
    }
    free(old);
    return 0;
}

/* Appends type[0..len) plus suffix to the pool; its offset goes to *off. */
static int pool_add(struct http_mime *m, const char *type, size_t len, const char *suffix,
                    uint32_t *off, uint32_t *total)
{
    size_t sl = strlen(suffix);
    size_t need = m->pool_len + len + sl + 1;

    if (need > UINT32_MAX)
        return -ENOMEM;
    if (need > m->pool_cap) {
        size_t cap = m->pool_cap ? m->pool_cap * 2 : 4096;
        char *p;

        while (cap < need)
            cap *= 2;
        p = realloc(m->pool, cap);
        if (p == NULL)
            return -ENOMEM;
        m->pool = p;
        m->pool_cap = cap;
    }
    *off = (uint32_t)m->pool_len;
    *total = (uint32_t)(len + sl);
    memcpy(m->pool + m->pool_len, type, len);
    memcpy(m->pool + m->pool_len + len, suffix, sl + 1);
    m->pool_len = need;
    return 0;
}

/* Sets ext[0..len) (already lowercase and valid) to the type at pool offset off. */
static int put(struct http_mime *m, const char *ext, size_t len, uint32_t off, uint32_t tlen)
{
    struct mime_entry *e;

    if ((m->count + 1) * 2 > m->mask + 1) {
        int err = grow_table(m);

        if (err < 0)
            return err;
    }
    e = find_slot(m, ext, len);
    if (e->ext[0] == '\0') {
        memcpy(e->ext, ext, len);
        e->ext[len] = '\0';
        m->count++;
    }
    e->type_off = off;
    e->type_len = tlen;
    return 0;
}

/* RFC 9110 tchar: what a type, subtype or extension may consist of. */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_valid_type(const char *t, size_t len)
{
    size_t slash = 0;
    size_t n = 0;

    if (len == 0 || len > HTTP_MIME_FILE_TYPE_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '/') {
            slash = i;
            n++;
        } else if (!is_tchar((unsigned char)t[i])) {
            return false;
        }
    }
    return n == 1 && slash > 0 && slash < len - 1;
}

/* Lowercases a valid extension token into out; false when it is not one. */
static bool normalize_ext(const char *ext, size_t len, char *out)
{
    if (len == 0 || len > HTTP_MIME_EXT_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)ext[i];

        if (!is_tchar(c) || c == '.')
            return false;
        out[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    out[len] = '\0';
    return true;
}

static int load_builtin(struct http_mime *m)
{
    for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++) {
        uint32_t off;
        uint32_t tlen;
        int err = pool_add(m, builtin[i].type, strlen(builtin[i].type), "", &off, &tlen);
        const char *p = builtin[i].exts;

        if (err < 0)
            return err;
        while (*p != '\0') {
            size_t n = strcspn(p, " ");

            err = put(m, p, n, off, tlen);
            if (err < 0)
                return err;
            p += n;
            p += strspn(p, " ");
        }
    }
    return 0;
}

/* Whether the table's type for ext is type[0..len) plus parameters (so it stays). */
static bool keeps_builtin(const struct http_mime *m, const char *ext, const char *type, size_t len)
{
    const struct mime_entry *e = find_slot(m, ext, strlen(ext));
    const char *cur;

    if (e->ext[0] == '\0')
        return false;
    cur = m->pool + e->type_off;
    return e->type_len > len && strncasecmp(cur, type, len) == 0 && cur[len] == ';';
}

/* Parses one mime.types line (NUL-terminated, comment already cut); skips a malformed one. */
static int load_line(struct http_mime *m, char *line)
{
    const char *ws = " \t\r\n\v\f";
    char exts[64][HTTP_MIME_EXT_MAX + 1];
    size_t n = 0;
    char *type;
    size_t tlen;
    char *p = line;
    uint32_t off = 0;
    uint32_t total = 0;
    bool added = false;

    p += strspn(p, ws);
    if (*p == '\0')
        return 0;
    type = p;
    tlen = strcspn(p, ws);
    if (!is_valid_type(type, tlen))
        return 0;
    p += tlen;
    for (;;) {
        size_t el;

        p += strspn(p, ws);
        if (*p == '\0')
            break;
        el = strcspn(p, ws);
        if (n == sizeof(exts) / sizeof(exts[0]) || !normalize_ext(p, el, exts[n]))
            return 0;
        n++;
        p += el;
    }
    for (size_t i = 0; i < n; i++) {
        int err;

        if (keeps_builtin(m, exts[i], type, tlen))
            continue;
        if (!added) {
            bool text = tlen > 5 && strncasecmp(type, "text/", 5) == 0;

            err = pool_add(m, type, tlen, text ? CHARSET : "", &off, &total);
            if (err < 0)
                return err;
            added = true;
        }
        err = put(m, exts[i], strlen(exts[i]), off, total);
        if (err < 0)
            return err;
    }
    return 0;
}

static int load_file(struct http_mime *m, const char *path)
{
    FILE *f = fopen(path, "re");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int err = 0;

    if (f == NULL)
        return 0; /* no file: built-in types only */
    while ((n = getline(&line, &cap, f)) >= 0) {
        char *hash = memchr(line, '#', (size_t)n);

        /* A NUL inside the line would hide the rest from the parser: skip the line. */
        if (strlen(line) != (size_t)n)
            continue;
        if (hash != NULL)
            *hash = '\0';
        err = load_line(m, line);
        if (err < 0)
            break;
    }
    free(line);
    fclose(f);
    return err;
}

int http_mime_create(struct http_mime **out, const char *types_path)
{
    struct http_mime *m = calloc(1, sizeof(*m));
    int err;

    *out = NULL;
    if (m == NULL)
        return -ENOMEM;
    m->slots = calloc(TABLE_INITIAL, sizeof(*m->slots));
    if (m->slots == NULL) {
        err = -ENOMEM;
        goto out_destroy;
    }
    m->mask = TABLE_INITIAL - 1;
    err = load_builtin(m);
    if (err < 0)
        goto out_destroy;
    if (types_path != NULL) {
        err = load_file(m, types_path);
        if (err < 0)
            goto out_destroy;
    }
    *out = m;
    return 0;

out_destroy:
    http_mime_destroy(m);
    return err;
}

void http_mime_destroy(struct http_mime *m)
{
    if (m == NULL)
        return;
    free(m->slots);
    free(m->pool);
    free(m);
}

const char *http_mime_by_ext(const struct http_mime *m, const char *ext, size_t len)
{
    char key[HTTP_MIME_EXT_MAX + 1];
    const struct mime_entry *e;

    if (!normalize_ext(ext, len, key))
        return NULL;
    e = find_slot(m, key, len);
    return e->ext[0] == '\0' ? NULL : m->pool + e->type_off;
}

const char *http_mime_lookup(const struct http_mime *m, const char *path, size_t len,
                             size_t *type_len)
{
    const char *type = NULL;

    for (size_t i = len; i > 0; i--) {
        char c = path[i - 1];

        if (c == '/')
            break;
        if (c == '.') {
            /* A leading dot starts a hidden name, not an extension. */
            if (i >= 2 && path[i - 2] != '/')
                type = http_mime_by_ext(m, path + i, len - i);
            break;
        }
    }
    if (type == NULL)
        type = HTTP_MIME_DEFAULT;
    if (type_len != NULL)
        *type_len = strlen(type);
    return type;
}

size_t http_mime_count(const struct http_mime *m)
{
    return m->count;
}

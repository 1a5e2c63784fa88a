/*
 * file_cache.h - the open-file cache of cabrank-httpd: normalized request path -> open fd,
 * stat, precomputed ETag and Last-Modified strings, MIME type and the precompressed ".gz"
 * sibling, so a hot file costs no open() or stat() per request. Shared by every serving thread.
 *
 * Bounded: at most max_entries entries and max_fds descriptors held by the table (split evenly
 * over the shards; CLOCK eviction within a shard). Revalidated: an entry is re-stat()ed by name
 * at most once per revalidate_ms (by one thread; the others keep using it meanwhile), and
 * reopened when its file or its ".gz" sibling changed, appeared or went away. Entries are
 * refcounted: one that is evicted or replaced keeps its descriptors open until the last
 * reference is released, so a response being sent from it is never cut short. Descriptors held
 * that way are not counted against max_fds.
 *
 * Content: a file (and a ".gz" sibling) of at most content_max bytes also has its bytes copied
 * into the entry when it is opened, so a hit on a small file needs no read at all; entries
 * stop taking copies once those held by the table reach content_total (they then have
 * content NULL and are read from their fd). Like the rest of an entry, the copy is immutable:
 * a file modified in place is served with its old bytes, old length and old validators, all
 * consistent, until the revalidation after the change reopens it as a new entry (where a read
 * from the fd would mix new bytes with the old Content-Length and ETag).
 *
 * Threads: lock striping over shards (a pthread rwlock each), readers take the read lock only;
 * refcounts and the CLOCK bit are atomics. No lock is held across a system call (opens, stats
 * and closes run unlocked).
 */
#ifndef CABRANK_HTTPD_FILE_CACHE_H
#define CABRANK_HTTPD_FILE_CACHE_H

#include <cabrank/common.h>
#include <sys/stat.h>

#include "http_file.h"
#include "mime.h"

struct http_file_cache;

struct http_file_cache_config {
    /* The document root directory; borrowed, must stay open while the cache lives. */
    int root_fd;
    /* Types for http_file.mime; borrowed, must outlive the cache. NULL: every file is
     * HTTP_MIME_DEFAULT. */
    const struct http_mime *mime;
    /* Entries kept (0: 1024). */
    unsigned max_entries;
    /* Descriptors kept by the table (0: 2 * max_entries, one file and one ".gz" each). */
    unsigned max_fds;
    /* How often an entry is re-stat()ed, in ms (0: 1000). */
    uint64_t revalidate_ms;
    /* Lock stripes, rounded up to a power of two (0: 16). */
    unsigned shards;
    /* The file served for a path ending in '/' (NULL: "index.html"). Borrowed. */
    const char *index_name;
    /* Look for and keep "<name>.gz" next to each file. */
    bool gzip_static;
    /* Follow symlinks leading outside the root (http_path_open()). */
    bool follow_outside_symlinks;
    /* Files of at most this many bytes keep a copy of their content (0: 16 KiB; < 0: no file
     * does). */
    ssize_t content_max;
    /* Content bytes held by the entries in the table, all together, at most (0: 64 MiB; < 0:
     * none). Entries evicted or replaced but still referenced are not counted. */
    ssize_t content_total;
};

/* Defaults of content_max and content_total. */
#define HTTP_FILE_CACHE_CONTENT_MAX_DEFAULT   (16 * 1024)
#define HTTP_FILE_CACHE_CONTENT_TOTAL_DEFAULT (64 * 1024 * 1024)

/* One representation of a cached file. */
/* Room for http_file_variant.validator_fields: "\r\nLast-Modified: " (17), a date, "\r\nETag: "
 * (8), an ETag and a NUL. */
#define HTTP_VALIDATOR_FIELDS_MAX (17 + HTTP_DATE_LEN + 8 + HTTP_ETAG_MAX)

struct http_file_variant {
    /* Open read-only; -1 when the variant does not exist. Borrowed from the entry. */
    int fd;
    uint64_t size;
    int64_t mtime;
    /* Strong ETag with quotes, NUL-terminated. */
    char etag[HTTP_ETAG_MAX];
    size_t etag_len;
    /* IMF-fixdate of mtime, NUL-terminated; empty for a year outside 1..9999. */
    char last_modified[HTTP_DATE_LEN + 1];
    /* "\r\nLast-Modified: <last_modified>\r\nETag: <etag>" as a response head carries
     * them (no Last-Modified when it is empty), formatted once for every answer to share;
     * NUL-terminated. */
    char validator_fields[HTTP_VALIDATOR_FIELDS_MAX];
    size_t validator_fields_len;
    /* The size bytes of the file as they were when the entry was opened (not NUL-terminated;
     * not NULL for an empty file), or NULL when the entry holds no copy: the file is larger
     * than content_max, the content_total budget was spent, or it changed while being read.
     * Borrowed from the entry. */
    const char *content;
};

/* Room for http_file.ok_fields: "\r\nContent-Type: " (16), the longest type, "\r\nContent-
 * Length: " (18), 20 digits, the validator fields, "\r\nAccept-Ranges: bytes" (22),
 * "\r\nVary: Accept-Encoding" (23) and a NUL. */
#define HTTP_OK_FIELDS_MAX                                                                         \
    (16 + HTTP_MIME_TYPE_MAX + 18 + 20 + HTTP_VALIDATOR_FIELDS_MAX + 22 + 23 + 1)

/* A cache entry as callers see it: read-only, valid while a reference is held. */
struct http_file {
    /* The file itself. */
    struct http_file_variant identity;
    /* "<name>.gz" (gz.fd < 0 when absent or gzip_static is off): serve it with
     * Content-Encoding: gzip when http_accepts_gzip(); send Vary: Accept-Encoding on every
     * response for this file when has_gz. */
    struct http_file_variant gz;
    bool has_gz;
    /* Content-Type of the file (of the identity name, also for the ".gz"); lives as long as
     * the mime table. */
    const char *mime;
    size_t mime_len;
    /* The fields of a 200 answer with the whole identity variant, between Date and the
     * request's own (Connection): "\r\nContent-Type: <mime>\r\nContent-Length: <size>"
     * <identity.validator_fields> "\r\nAccept-Ranges: bytes", then
     * "\r\nVary: Accept-Encoding" when has_gz (http_entity_put). Formatted once for every
     * such answer to share; NUL-terminated. */
    char ok_fields[HTTP_OK_FIELDS_MAX];
    size_t ok_fields_len;
};

/* Counters for status pages and tests; each read atomically, together not a snapshot. */
struct http_file_cache_stats {
    uint64_t hits;
    uint64_t misses;
    /* http_path_open() calls (file, index and ".gz" sibling). */
    uint64_t opens;
    /* Revalidation stat()s. */
    uint64_t revalidations;
    /* Entries dropped for room, or replaced because their file changed. */
    uint64_t evictions;
    uint64_t replacements;
    /* Entries, descriptors and content bytes in the table now (content_bytes also counts
     * copies being read for entries not yet published). */
    uint64_t entries;
    uint64_t fds;
    uint64_t content_bytes;
};

/* Creates a cache; *out returns owned. -EINVAL (root_fd < 0), -ENOMEM. Before start only. */
CR_MUST_CHECK int http_file_cache_create(struct http_file_cache **out,
                                         const struct http_file_cache_config *cfg);

/*
 * Frees the cache and closes the descriptors of entries nobody references; NULL-safe. Entries
 * still referenced are closed and freed by their last http_file_cache_release(), which stays
 * valid after destroy. No get may run concurrently. After stop only.
 */
void http_file_cache_destroy(struct http_file_cache *fc);

/*
 * Looks up path[0..len) (a result of http_path_normalize(): starts with '/', no dot segments),
 * opening and caching it on a miss: a path ending in '/' serves its index_name. On success
 * *out holds a reference (returns owned: release it with http_file_cache_release()).
 * Returns 0; -EISDIR when path names a directory without the trailing '/' (answer 301 to
 * path + "/"); -ENOENT or -ENOTDIR (404; also a directory without an index); -EACCES (403: not
 * a regular file, permission, symlink out of the root); -ELOOP; -ENAMETOOLONG (414); -EMFILE,
 * -ENFILE, -ENOMEM (503). Errors are not cached. Thread-safe.
 */
CR_MUST_CHECK int http_file_cache_get(struct http_file_cache *fc, const char *path, size_t len,
                                      const struct http_file **out);

/* Takes one more reference to f (e.g. one per queued part of a multipart body). Thread-safe. */
void http_file_cache_ref(const struct http_file *f);

/*
 * Drops a reference taken by http_file_cache_get() or http_file_cache_ref(); the last one of an
 * evicted entry closes its descriptors and frees its content copies. Has the cr_release_fn
 * signature, so it can be passed with f as arg to cr_conn_write_file(). Thread-safe.
 */
void http_file_cache_release(void *f);

/* Fills *st with the counters. Thread-safe. */
void http_file_cache_stats(struct http_file_cache *fc, struct http_file_cache_stats *st);

#endif /* CABRANK_HTTPD_FILE_CACHE_H */

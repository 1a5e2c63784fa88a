/*
 * mime.h - file extension to media type (Content-Type) table of cabrank-httpd: a built-in table
 * of the common web types, extended and overridden by /etc/mime.types when present. Built once
 * at start by the main thread; read-only afterwards, so lookups from any serving thread need no
 * lock. Lookups are case-insensitive and O(1) (an open-addressing hash table).
 *
 * Text types carry "; charset=utf-8" (text/... and the built-in text-like application types):
 * an entry of mime.types that names the same type as the built-in one without parameters
 * ("text/html html") keeps the built-in value, and any other text/... type from the file gets
 * "; charset=utf-8" appended. Unknown extensions map to "application/octet-stream".
 */
#ifndef CABRANK_HTTPD_MIME_H
#define CABRANK_HTTPD_MIME_H

#include <cabrank/common.h>

/* The type of unknown extensions. */
#define HTTP_MIME_DEFAULT "application/octet-stream"

/* Longest extension kept (longer ones in mime.types are skipped), without its NUL. */
#define HTTP_MIME_EXT_MAX 31

/* What a text type gets after it. */
#define HTTP_MIME_CHARSET "; charset=utf-8"

/* Longest type kept from mime.types (longer ones are skipped), and longest a lookup
 * returns (a text type with HTTP_MIME_CHARSET). Without the NUL. */
#define HTTP_MIME_FILE_TYPE_MAX 127
#define HTTP_MIME_TYPE_MAX      (HTTP_MIME_FILE_TYPE_MAX + sizeof(HTTP_MIME_CHARSET) - 1)

struct http_mime;

/*
 * Builds the table: the built-in types, then the file types_path (NULL: built-in only;
 * typically "/etc/mime.types") in mime.types(5) format: "type ext ext ...", '#' comments.
 * A missing or unreadable file is not an error (built-in only); a malformed line (no '/' in
 * the type, a control byte, an over-long field) is skipped. *out returns owned (free with
 * http_mime_destroy()). Returns 0 or -ENOMEM. Before start only.
 */
CR_MUST_CHECK int http_mime_create(struct http_mime **out, const char *types_path);

/* Frees the table; NULL-safe. No lookup may be running. Before start only (or after stop). */
void http_mime_destroy(struct http_mime *m);

/*
 * The type of extension ext[0..len) (without the '.', any case), or NULL when unknown.
 * The string lives as long as m. Thread-safe.
 */
const char *http_mime_by_ext(const struct http_mime *m, const char *ext, size_t len);

/*
 * The type of the file named by path[0..len): the extension after the last '.' of the last
 * segment ("/a.b/c" has none, nor has "/.profile"), or HTTP_MIME_DEFAULT. Never NULL; the
 * string lives as long as m (or forever for the default). *type_len, if not NULL, is set to
 * its length. Thread-safe.
 */
const char *http_mime_lookup(const struct http_mime *m, const char *path, size_t len,
                             size_t *type_len);

/* Number of extensions in the table (for logs and tests). Thread-safe. */
size_t http_mime_count(const struct http_mime *m);

#endif /* CABRANK_HTTPD_MIME_H */

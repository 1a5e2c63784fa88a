/*
 * http_serve_file.c - answering a GET or HEAD for a file-cache entry
 * (http_serve_file.h): the fast path for a request without conditionals,
 * ranges or a gzip choice; otherwise the plan of http_file.h (validators,
 * ranges, precompressed variant) turned into a 200, 206 (one range or
 * multipart/byteranges), 304, 412 or 416. Called by the service on the
 * connection's serving thread.
 *
 * Memory: a file body is a cr_conn_write_file segment (sendfile) holding a
 * reference to its entry, except that a body (or single range) of at most
 * INLINE_BODY_MAX bytes is copied into the head's buffer, so head and body
 * leave in one send and one packet. It is copied from the entry's content,
 * which the cache keeps for files that small, so a hot small file costs a
 * recv and a send; it is read with pread only when the entry holds no copy
 * (the cache's content budget was spent, or the file changed while the cache
 * read it). Nothing is allocated except for list fields sent on several
 * lines (combined into one value, RFC 9110 5.3).
 */
#include "http_serve_file.h"

#include "file_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The value of a list field that may be sent on several lines (first is
 * its first line), combined with ", " into a malloc'd *owned when it is
 * (rare); else the line's own value. *val NULL when absent. -ENOMEM.
 */
static int list_field(const struct http_request *req, const struct http_header *first,
                      const char **val, size_t *len, char **owned)
{
    const struct http_header *h;
    size_t total;
    char *p;

    *owned = NULL;
    *val = NULL;
    *len = 0;
    if (first == NULL)
        return 0;
    if (http_request_header_next(req, first) == NULL) {
        *val = first->value;
        *len = first->value_len;
        return 0;
    }
    total = 0;
    for (h = first; h != NULL; h = http_request_header_next(req, h))
        total += h->value_len + 2;
    p = malloc(total);
    if (p == NULL)
        return -ENOMEM;
    total = 0;
    for (h = first; h != NULL; h = http_request_header_next(req, h)) {
        if (h->value_len == 0)
            continue;
        if (total > 0) {
            memcpy(p + total, ", ", 2);
            total += 2;
        }
        memcpy(p + total, h->value, h->value_len);
        total += h->value_len;
    }
    *owned = p;
    *val = p;
    *len = total;
    return 0;
}

static void single_field(const struct http_header *h, const char **val, size_t *len)
{
    *val = h != NULL ? h->value : NULL;
    *len = h != NULL ? h->value_len : 0;
}

/* Queues len bytes of f's variant v from off, holding a reference to f for
 * the segment: the request's own for the first segment, a new one after. */
static int queue_file(struct cr_conn *c, struct reply *rp, const struct http_file *f,
                      const struct http_file_variant *v, uint64_t off, uint64_t len)
{
    if (rp->ref == f)
        rp->ref = NULL;
    else
        http_file_cache_ref(f);
    rp->body_bytes += len;
    return cr_conn_write_file(c, v->fd, (off_t)off, (size_t)len, http_file_cache_release,
                              (void *)f);
}

/* The multipart/byteranges body of plan: each part's header, then its bytes. */
static int queue_multipart(struct cr_conn *c, struct reply *rp, const struct http_file *f,
                           const struct http_file_variant *v, const struct http_file_plan *plan)
{
    size_t cap = HTTP_MULTIPART_PART_MAX(f->mime_len);
    char *p;
    size_t n;
    int err;

    for (unsigned i = 0; i < plan->ranges.n; i++) {
        const struct http_range *rg = &plan->ranges.r[i];

        p = cr_conn_reserve(c, cap);
        if (p == NULL)
            return -ENOMEM;
        n = http_multipart_part_header(p, cap, plan->boundary, f->mime, f->mime_len, rg, v->size);
        cr_conn_commit(c, n);
        rp->body_bytes += n;
        err = queue_file(c, rp, f, v, rg->first, rg->last - rg->first + 1);
        if (err < 0)
            return err;
    }
    p = cr_conn_reserve(c, HTTP_MULTIPART_TRAILER_LEN);
    if (p == NULL)
        return -ENOMEM;
    n = http_multipart_trailer(p, HTTP_MULTIPART_TRAILER_LEN, plan->boundary);
    cr_conn_commit(c, n);
    rp->body_bytes += n;
    return 0;
}

/* Whether req has none of the fields that can change the answer for f: validators,
 * Range, and Accept-Encoding where a ".gz" exists. Then the answer is a 200 with the
 * whole identity variant (If-Range without Range is ignored), decided without the
 * plan: most requests, which so skip gathering the fields and running the plan. */
static bool is_unconditional(const struct http_request *req, const struct http_file *f)
{
    return req->if_none_match == NULL && req->if_match == NULL && req->if_modified_since == NULL &&
           req->if_unmodified_since == NULL && req->range == NULL &&
           (req->accept_encoding == NULL || !f->has_gz);
}

/* Per thread: varies multipart boundaries without a shared counter. */
static __thread uint64_t tl_boundary_seq;

int http_serve_file(struct cr_conn *c, struct reply *rp, const struct http_file *f)
{
    const struct http_request *req = rp->req;
    struct http_file_request frq;
    char *owned[3] = {NULL, NULL, NULL};
    const char *ae;
    size_t ae_len;
    bool gzip = false;
    const struct http_file_variant *v;
    struct http_validators val;
    struct http_file_plan plan;
    struct resp r = {.e.vary = f->has_gz};
    char crange[HTTP_CONTENT_RANGE_MAX];
    char ctype[96];
    uint64_t off = 0;
    uint64_t len = 0;
    int err;

    if (is_unconditional(req, f)) {
        v = &f->identity;
        plan.status = 200;
        plan.content_length = v->size;
        plan.ranges.n = 0;
    } else {
        frq = (struct http_file_request){.method = rp->head ? HTTP_FILE_HEAD : HTTP_FILE_GET};
        err = list_field(req, req->if_none_match, &frq.if_none_match, &frq.if_none_match_len,
                         &owned[0]);
        if (err == 0)
            err = list_field(req, req->if_match, &frq.if_match, &frq.if_match_len, &owned[1]);
        if (err == 0)
            err = list_field(req, req->accept_encoding, &ae, &ae_len, &owned[2]);
        if (err < 0)
            goto out;
        single_field(req->if_modified_since, &frq.if_modified_since, &frq.if_modified_since_len);
        single_field(req->if_unmodified_since, &frq.if_unmodified_since,
                     &frq.if_unmodified_since_len);
        single_field(req->if_range, &frq.if_range, &frq.if_range_len);
        single_field(req->range, &frq.range, &frq.range_len);
        if (f->has_gz && f->gz.fd >= 0 && ae != NULL)
            gzip = http_accepts_gzip(ae, ae_len);
        v = gzip ? &f->gz : &f->identity;
        val = (struct http_validators){
            .etag = v->etag, .etag_len = v->etag_len, .mtime = v->mtime, .size = v->size};
        /* The second of the Date this answer will carry: the conditionals compare with it. */
        (void)http_response_date(&val.now);
        http_file_plan(&plan, &frq, &val, f->mime_len,
                       (uintptr_t)c ^ (++tl_boundary_seq << 32) ^ (uint64_t)val.now);
    }
    r.status = plan.status;
    switch (plan.status) {
    case 200:
    case 206:
        if (plan.status == 200 && v == &f->identity) {
            /* The whole identity variant: the fields the entry formatted for it. */
            r.fields = f->ok_fields;
            r.fields_len = f->ok_fields_len;
        } else {
            r.e.validators = v->validator_fields;
            r.e.validators_len = v->validator_fields_len;
            r.e.gzip = gzip;
            r.e.accept_ranges = true;
            r.e.content_length = plan.content_length;
            r.e.ctype = f->mime;
            r.e.ctype_len = f->mime_len;
        }
        if (plan.status == 206 && plan.ranges.n == 1) {
            r.e.content_range_len =
                http_content_range_format(crange, sizeof(crange), &plan.ranges.r[0], v->size);
            r.e.content_range = crange;
        } else if (plan.status == 206) {
            int n =
                snprintf(ctype, sizeof(ctype), "multipart/byteranges; boundary=%s", plan.boundary);

            r.e.ctype = ctype;
            r.e.ctype_len = n > 0 && (size_t)n < sizeof(ctype) ? (size_t)n : 0;
        }
        if (!rp->head && plan.ranges.n <= 1) {
            off = plan.status == 206 ? plan.ranges.r[0].first : 0;
            len = plan.status == 206 ? plan.ranges.r[0].last - off + 1 : v->size;
            /* A small body goes in the head's buffer: one send for both,
             * and one packet, instead of a send and a sendfile. The
             * entry's copy (our reference keeps it) saves the pread; its
             * bytes, length and validators are of one version. */
            if (len <= INLINE_BODY_MAX) {
                r.file_data = v->content != NULL ? v->content + off : NULL;
                r.file_fd = v->fd;
                r.file_off = off;
                r.file_len = (size_t)len;
            }
        }
        err = http_response_head(c, rp, &r);
        if (err < 0 || rp->head)
            break;
        if (plan.ranges.n > 1)
            err = queue_multipart(c, rp, f, v, &plan);
        else if (r.file_done < len)
            err = queue_file(c, rp, f, v, off + r.file_done, len - r.file_done);
        break;
    case 304:
        r.e.validators = v->validator_fields;
        r.e.validators_len = v->validator_fields_len;
        r.e.gzip = gzip;
        r.e.content_length = v->size;
        err = http_response_head(c, rp, &r);
        break;
    case 416:
        r.e.content_range_len = http_content_range_format(crange, sizeof(crange), NULL, v->size);
        r.e.content_range = crange;
        err = http_response_simple(c, rp, &r);
        break;
    default: /* 412 */
        err = http_response_simple(c, rp, &r);
        break;
    }
out:
    /* Only a conditional request owns copies: the usual one makes no call. */
    for (int i = 0; i < 3; i++) {
        if (owned[i] != NULL)
            free(owned[i]);
    }
    return err;
}

/*
 * http_file.c - the HTTP semantics of a static-file response (RFC 9110 8.8, 13, 14), as pure
 * functions for the HTTP service of cabrank-httpd (contract and decisions in http_file.h).
 * No state, no allocation, no locale: safe on any thread. Dates, validators,
 * conditionals, codings and the plan; byte ranges and multipart bodies are http_range.c.
 */
#include "http_file.h"
#include "http_lex.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char day_names[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const day_names_long[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                              "Thursday", "Friday", "Saturday"};
static const char month_names[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* ---------------------------------------------------------------- validators */

size_t http_etag_format(char *out, size_t cap, const struct stat *st, bool gzip)
{
    int n = snprintf(out, cap, "\"%" PRIx64 ".%lx-%" PRIx64 "%s\"", (uint64_t)st->st_mtim.tv_sec,
                     (unsigned long)st->st_mtim.tv_nsec, (uint64_t)st->st_size, gzip ? "-gz" : "");

    if (n < 0 || (size_t)n >= cap) {
        if (cap > 0)
            out[0] = '\0';
        return 0;
    }
    return (size_t)n;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    int64_t era;
    unsigned yoe;
    unsigned doy;
    unsigned doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = (unsigned)(y - era * 400);
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

/* The inverse of days_from_civil(). */
static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    int64_t era;
    unsigned doe;
    unsigned yoe;
    unsigned doy;
    unsigned mp;

    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = (unsigned)(z - era * 146097);
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static bool is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned days_in_month(int64_t y, unsigned m)
{
    static const unsigned char days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* Seconds of 0001-01-01T00:00:00Z and 10000-01-01T00:00:00Z since the epoch. */
#define DATE_MIN INT64_C(-62135596800)
#define DATE_END INT64_C(253402300800)

size_t http_date_format(char *out, int64_t t)
{
    int64_t days;
    int64_t secs;
    int64_t y;
    unsigned m;
    unsigned d;
    unsigned wday;

    if (t < DATE_MIN || t >= DATE_END) {
        out[0] = '\0';
        return 0;
    }
    days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
    secs = t - days * 86400;
    civil_from_days(days, &y, &m, &d);
    /* 1970-01-01 was a Thursday (4). */
    wday = (unsigned)(((days % 7) + 11) % 7);
    snprintf(out, HTTP_DATE_LEN + 1, "%s, %02u %s %04u %02u:%02u:%02u GMT", day_names[wday], d,
             month_names[m - 1], (unsigned)y, (unsigned)(secs / 3600), (unsigned)(secs / 60 % 60),
             (unsigned)(secs % 60));
    return HTTP_DATE_LEN;
}

/* Reads exactly n digits at s; -1 when one is not a digit. */
static int digits(const char *s, size_t n)
{
    int v = 0;

    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int month_index(const char *s)
{
    for (int i = 0; i < 12; i++) {
        if (strncasecmp(s, month_names[i], 3) == 0)
            return i + 1;
    }
    return -1;
}

static bool is_day_name(const char *s, size_t len)
{
    for (int i = 0; i < 7; i++) {
        if (len == 3 && strncasecmp(s, day_names[i], 3) == 0)
            return true;
        if (len == strlen(day_names_long[i]) && strncasecmp(s, day_names_long[i], len) == 0)
            return true;
    }
    return false;
}

/* Parses "HH:MM:SS" at s into seconds of the day; -1 when malformed. */
static int64_t parse_time(const char *s)
{
    int h = digits(s, 2);
    int mi = digits(s + 3, 2);
    int sec = digits(s + 6, 2);

    if (s[2] != ':' || s[5] != ':' || h < 0 || mi < 0 || sec < 0 || h > 23 || mi > 59 || sec > 60)
        return -1;
    return (int64_t)h * 3600 + mi * 60 + sec;
}

static int make_time(int64_t y, int m, int d, int64_t tod, int64_t *t)
{
    int64_t r;

    if (y < 1 || y > 9999 || m < 1 || d < 1 || (unsigned)d > days_in_month(y, (unsigned)m) ||
        tod < 0)
        return -EBADMSG;
    r = days_from_civil(y, (unsigned)m, (unsigned)d) * 86400 + tod;
    /* A leap second (tod 86400) on 9999-12-31 lands in year 10000, which
     * http_date_format() cannot write: every parsed date must format back. */
    if (r >= DATE_END)
        return -EBADMSG;
    *t = r;
    return 0;
}

/* The RFC 9110 5.6.7 reading of a two-digit year: not more than 50 years in the future. */
static int64_t full_year(int yy)
{
    struct timespec ts;
    int64_t now_y;
    unsigned m;
    unsigned d;
    int64_t y;

    clock_gettime(CLOCK_REALTIME, &ts);
    civil_from_days((int64_t)ts.tv_sec / 86400, &now_y, &m, &d);
    y = now_y / 100 * 100 + yy;
    if (y > now_y + 50)
        y -= 100;
    else if (y <= now_y - 50)
        y += 100;
    return y;
}

int http_date_parse(const char *s, size_t len, int64_t *t)
{
    const char *comma;
    int64_t tod;
    int d;
    int m;
    int y;

    s = trim(s, &len);
    comma = memchr(s, ',', len);
    if (comma != NULL) {
        size_t dl = (size_t)(comma - s);
        const char *p = comma + 1;
        size_t rest = len - dl - 1;

        if (!is_day_name(s, dl))
            return -EBADMSG;
        /* IMF-fixdate: ", 06 Nov 1994 08:49:37 GMT". */
        if (dl == 3 && rest == 25 && p[0] == ' ' && p[3] == ' ' && p[7] == ' ' && p[12] == ' ' &&
            memcmp(p + 21, " GMT", 4) == 0) {
            d = digits(p + 1, 2);
            m = month_index(p + 4);
            y = digits(p + 8, 4);
            tod = parse_time(p + 13);
            if (d < 0 || m < 0 || y < 0)
                return -EBADMSG;
            return make_time(y, m, d, tod, t);
        }
        /* RFC 850: ", 06-Nov-94 08:49:37 GMT". */
        if (dl > 3 && rest == 23 && p[0] == ' ' && p[3] == '-' && p[7] == '-' && p[10] == ' ' &&
            memcmp(p + 19, " GMT", 4) == 0) {
            d = digits(p + 1, 2);
            m = month_index(p + 4);
            y = digits(p + 8, 2);
            tod = parse_time(p + 11);
            if (d < 0 || m < 0 || y < 0)
                return -EBADMSG;
            return make_time(full_year(y), m, d, tod, t);
        }
        return -EBADMSG;
    }
    /* asctime: "Sun Nov  6 08:49:37 1994". */
    if (len != 24 || s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[19] != ' ' ||
        !is_day_name(s, 3))
        return -EBADMSG;
    m = month_index(s + 4);
    d = s[8] == ' ' ? digits(s + 9, 1) : digits(s + 8, 2);
    tod = parse_time(s + 11);
    y = digits(s + 20, 4);
    if (d < 0 || m < 0 || y < 0)
        return -EBADMSG;
    return make_time(y, m, d, tod, t);
}

/* ---------------------------------------------------------------- entity-tags */

/*
 * Reads one entity-tag at s[0..len): [W/] DQUOTE *etagc DQUOTE. Returns its length and sets
 * the opaque-tag (with quotes) and weakness, or 0 when malformed.
 */
static size_t scan_etag(const char *s, size_t len, const char **opaque, size_t *opaque_len,
                        bool *weak)
{
    size_t i = 0;

    *weak = false;
    if (len >= 2 && s[0] == 'W' && s[1] == '/') {
        *weak = true;
        i = 2;
    }
    if (i >= len || s[i] != '"')
        return 0;
    for (size_t j = i + 1; j < len; j++) {
        unsigned char c = (unsigned char)s[j];

        if (c == '"') {
            *opaque = s + i;
            *opaque_len = j + 1 - i;
            return j + 1;
        }
        /* etagc = %x21 / %x23-7E / obs-text */
        if (c < 0x21 || c == 0x7f)
            return 0;
    }
    return 0;
}

bool http_etag_match(const char *list, size_t len, const char *etag, size_t etag_len, bool weak)
{
    const char *want = NULL;
    size_t want_len = 0;
    bool want_weak = false;
    bool matched = false;
    size_t i = 0;

    list = trim(list, &len);
    if (len == 1 && list[0] == '*')
        return true;
    if (etag == NULL || scan_etag(etag, etag_len, &want, &want_len, &want_weak) != etag_len)
        return false;
    if (want_weak && !weak)
        return false;
    for (;;) {
        const char *op;
        size_t op_len;
        bool w;
        size_t n;

        while (i < len && (is_ows(list[i]) || list[i] == ','))
            i++;
        if (i == len)
            return matched;
        n = scan_etag(list + i, len - i, &op, &op_len, &w);
        if (n == 0)
            return false;
        /* Not returned yet: a malformed element further on still makes the list match
         * nothing. */
        if ((weak || !w) && op_len == want_len && memcmp(op, want, op_len) == 0)
            matched = true;
        i += n;
        while (i < len && is_ows(list[i]))
            i++;
        if (i < len && list[i] != ',')
            return false;
    }
}

/* ---------------------------------------------------------------- preconditions */

static bool is_get_or_head(const struct http_file_request *rq)
{
    return rq->method == HTTP_FILE_GET || rq->method == HTTP_FILE_HEAD;
}

int http_file_preconditions(const struct http_file_request *rq, const struct http_validators *v)
{
    int64_t t;

    if (rq->if_match != NULL) {
        if (!http_etag_match(rq->if_match, rq->if_match_len, v->etag, v->etag_len, false))
            return 412;
    } else if (rq->if_unmodified_since != NULL &&
               http_date_parse(rq->if_unmodified_since, rq->if_unmodified_since_len, &t) == 0) {
        if (v->mtime > t)
            return 412;
    }
    if (rq->if_none_match != NULL) {
        if (http_etag_match(rq->if_none_match, rq->if_none_match_len, v->etag, v->etag_len, true))
            return is_get_or_head(rq) ? 304 : 412;
    } else if (rq->if_modified_since != NULL && is_get_or_head(rq) &&
               http_date_parse(rq->if_modified_since, rq->if_modified_since_len, &t) == 0 &&
               t <= v->now) {
        /* A date later than our clock is invalid (RFC 9110 13.1.3): were it taken, a client
         * that made it up, or whose clock runs ahead, would keep any later change unseen. */
        if (v->mtime <= t)
            return 304;
    }
    return 200;
}

bool http_if_range_matches(const char *val, size_t len, const struct http_validators *v)
{
    int64_t t;

    val = trim(val, &len);
    if (len >= 1 && (val[0] == '"' || (len >= 2 && val[0] == 'W' && val[1] == '/'))) {
        const char *op;
        size_t op_len;
        bool weak;

        if (scan_etag(val, len, &op, &op_len, &weak) != len || weak)
            return false;
        return http_etag_match(val, len, v->etag, v->etag_len, false);
    }
    /* A date is a strong validator only once its second is over (RFC 9110 8.8.2.2). */
    return http_date_parse(val, len, &t) == 0 && t == v->mtime && v->mtime < v->now;
}

/* ---------------------------------------------------------------- the whole decision */

void http_file_plan(struct http_file_plan *p, const struct http_file_request *rq,
                    const struct http_validators *v, size_t ctype_len, uint64_t boundary_seed)
{
    /* Not a memset: the range table is some 300 bytes that only a Range
     * request fills, and every GET comes through here. */
    p->ranges.n = 0;
    p->content_length = 0;
    p->boundary[0] = '\0';
    p->status = http_file_preconditions(rq, v);
    if (p->status != 200)
        return;
    p->content_length = v->size;
    /* Range is defined for GET only (RFC 9110 14.2); If-Range without Range is ignored. */
    if (rq->method != HTTP_FILE_GET || rq->range == NULL)
        return;
    if (rq->if_range != NULL && !http_if_range_matches(rq->if_range, rq->if_range_len, v))
        return;
    switch (http_range_parse(rq->range, rq->range_len, v->size, &p->ranges)) {
    case 0:
        p->status = 206;
        if (p->ranges.n == 1) {
            p->content_length = p->ranges.r[0].last - p->ranges.r[0].first + 1;
        } else {
            p->content_length = http_multipart_length(&p->ranges, v->size, ctype_len);
            if (p->content_length == UINT64_MAX) {
                /* Too long to say in a Content-Length: ignore the Range (RFC 9110 14.2). */
                p->status = 200;
                p->content_length = v->size;
                p->ranges.n = 0;
                break;
            }
            http_multipart_boundary(p->boundary, boundary_seed);
        }
        break;
    case -ERANGE:
        p->status = 416;
        p->content_length = 0;
        break;
    default:
        /* Invalid or too many: ignored, the whole representation. */
        p->ranges.n = 0;
        break;
    }
}

/* ---------------------------------------------------------------- content coding */

/* Parses a qvalue at s[*i..len) into thousandths; -1 when malformed. */
static int scan_qvalue(const char *s, size_t len, size_t *i)
{
    int q;
    int scale = 100;

    if (*i >= len || (s[*i] != '0' && s[*i] != '1'))
        return -1;
    q = (s[(*i)++] - '0') * 1000;
    if (*i < len && s[*i] == '.') {
        (*i)++;
        for (int k = 0; k < 3 && *i < len && s[*i] >= '0' && s[*i] <= '9'; k++) {
            q += (s[(*i)++] - '0') * scale;
            scale /= 10;
        }
    }
    return q > 1000 ? -1 : q;
}

static bool is_token_char(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

bool http_accepts_gzip(const char *v, size_t len)
{
    int gzip_q = -1;
    int star_q = -1;
    size_t i = 0;

    if (v == NULL)
        return false;
    for (;;) {
        size_t start;
        size_t n;
        int q = 1000;

        while (i < len && (is_ows(v[i]) || v[i] == ','))
            i++;
        if (i == len)
            break;
        start = i;
        while (i < len && is_token_char((unsigned char)v[i]))
            i++;
        n = i - start;
        if (n == 0)
            return false;
        /* Parameters: only q is defined for Accept-Encoding; others are skipped. */
        for (;;) {
            size_t ps;

            while (i < len && is_ows(v[i]))
                i++;
            if (i == len || v[i] != ';')
                break;
            i++;
            while (i < len && is_ows(v[i]))
                i++;
            ps = i;
            while (i < len && is_token_char((unsigned char)v[i]))
                i++;
            if (i == ps || i == len || v[i] != '=')
                return false;
            i++;
            if (i - ps == 2 && (v[ps] == 'q' || v[ps] == 'Q')) {
                q = scan_qvalue(v, len, &i);
                if (q < 0)
                    return false;
            } else {
                size_t vs = i;

                while (i < len && is_token_char((unsigned char)v[i]))
                    i++;
                if (i == vs)
                    return false;
            }
        }
        if (i < len && v[i] != ',')
            return false;
        if ((n == 4 && strncasecmp(v + start, "gzip", 4) == 0) ||
            (n == 6 && strncasecmp(v + start, "x-gzip", 6) == 0)) {
            if (q > gzip_q)
                gzip_q = q;
        } else if (n == 1 && v[start] == '*') {
            star_q = q;
        }
    }
    if (gzip_q >= 0)
        return gzip_q > 0;
    return star_q > 0;
}

void http_entity_put(struct httpd_out *o, const struct http_entity *e)
{
    if (e->ctype != NULL) {
        HTTPD_OUT_LIT(o, "\r\nContent-Type: ");
        httpd_out_put(o, e->ctype, e->ctype_len);
    }
    HTTPD_OUT_LIT(o, "\r\nContent-Length: ");
    httpd_out_u64(o, e->content_length);
    if (e->validators != NULL)
        httpd_out_put(o, e->validators, e->validators_len);
    if (e->accept_ranges)
        HTTPD_OUT_LIT(o, "\r\nAccept-Ranges: bytes");
    if (e->content_range != NULL) {
        HTTPD_OUT_LIT(o, "\r\nContent-Range: ");
        httpd_out_put(o, e->content_range, e->content_range_len);
    }
    if (e->gzip)
        HTTPD_OUT_LIT(o, "\r\nContent-Encoding: gzip");
    if (e->vary)
        HTTPD_OUT_LIT(o, "\r\nVary: Accept-Encoding");
}

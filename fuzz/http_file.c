/*
 * http_file.c - libFuzzer target for the request-field parsers of apps/httpd/http_file.c:
 * http_date_parse(), http_range_parse(), http_accepts_gzip(), http_etag_match(),
 * http_if_range_matches(), http_file_preconditions() and http_file_plan() (which combine
 * them), and the multipart/byteranges layout helpers.
 *
 * Input: fields separated by '\n' (an empty or missing field is an absent header, NULL):
 *   0 config: space-separated decimals: the file size (clamped to INT64_MAX, as st_size is
 *     an off_t), its mtime (signed seconds), the multipart boundary seed and the server's
 *     clock (signed seconds; INT64_MAX when missing);
 *   1 a date, 2 Range, 3 Accept-Encoding, 4 the file's ETag (missing: http_etag_format()
 *     of the size and mtime), 5 If-Match, 6 If-None-Match, 7 If-Modified-Since,
 *   8 If-Unmodified-Since, 9 If-Range, 10 the Content-Type (missing: "text/plain").
 * The plan is checked for GET, HEAD and another method. Every field, and the whole input,
 * also goes through every parser on its own. Each is copied into a malloc'd buffer of
 * exactly its length so that ASan catches any read past it.
 *
 * Checks: each parser agrees with a slow reference model written from the contract in
 * http_file.h (dates by template and a day count of our own, ranges by exact digit-string
 * comparison, list grammars scanned whole before matching); a parsed date formats to an
 * IMF-fixdate with the right weekday that parses back to the same time; parsed ranges lie
 * within the file, ascending, disjoint and not touching; the plan's status is 200, 206, 304,
 * 412 or 416 and its ranges, boundary and Content-Length agree with the model; a multipart
 * Content-Length equals the body laid out with the header's helpers (into an exact-size
 * buffer when small, summed otherwise). Build: make BUILD=/tmp/b /tmp/b/fuzz/http_file;
 * seeds in fuzz/corpus/http_file/, dictionary fuzz/http_file.dict.
 */
#include "../apps/httpd/http_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum {
    F_CONFIG,
    F_DATE,
    F_RANGE,
    F_ACCEPT,
    F_ETAG,
    F_IF_MATCH,
    F_IF_NONE_MATCH,
    F_IF_MODIFIED_SINCE,
    F_IF_UNMODIFIED_SINCE,
    F_IF_RANGE,
    F_CTYPE,
    F_COUNT,
};

/* Seconds of 0001-01-01T00:00:00Z and 10000-01-01T00:00:00Z since the epoch. */
#define MODEL_DATE_MIN INT64_C(-62135596800)
#define MODEL_DATE_END INT64_C(253402300800)

/* Multipart bodies up to this size are laid out in a buffer; larger ones are summed. */
#define LAYOUT_MAX 65536

struct field {
    /* Exactly len bytes from malloc, or NULL when absent. */
    char *s;
    size_t len;
};

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static void trim(const char **s, size_t *len)
{
    while (*len > 0 && is_ows(**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && is_ows((*s)[*len - 1]))
        (*len)--;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* ---------------------------------------------------------------- date model */

static const char *const wday3[7] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const wday_long[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                         "Thursday", "Friday", "Saturday"};
static const char *const mon3[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Index of s[0..len) in names (case-insensitive, whole word), or -1. */
static int name_index(const char *s, size_t len, const char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        if (strlen(names[i]) == len && strncasecmp(s, names[i], len) == 0)
            return i;
    }
    return -1;
}

/* Exactly n digits at s into *v. */
static bool fixed_digits(const char *s, size_t n, int *v)
{
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return false;
        *v = *v * 10 + (s[i] - '0');
    }
    return true;
}

static bool leap(int64_t y)
{
    return y % 400 == 0 || (y % 4 == 0 && y % 100 != 0);
}

/* Days from 0001-01-01 to y-01-01, proleptic Gregorian. */
static int64_t days_before_year(int64_t y)
{
    y -= 1;
    return 365 * y + y / 4 - y / 100 + y / 400;
}

static int64_t epoch_days(int64_t y, int m, int d)
{
    static const int cum[12] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};

    return days_before_year(y) + cum[m - 1] + (m > 2 && leap(y)) + d - 1 - days_before_year(1970);
}

static int month_days(int64_t y, int m)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    return m == 2 && leap(y) ? 29 : days[m - 1];
}

/* "hh:mm:ss" at s into seconds of the day, leap second 60 allowed; -1 when malformed. */
static int64_t model_tod(const char *s)
{
    int h;
    int mi;
    int sec;

    if (!fixed_digits(s, 2, &h) || s[2] != ':' || !fixed_digits(s + 3, 2, &mi) || s[5] != ':' ||
        !fixed_digits(s + 6, 2, &sec))
        return -1;
    if (h > 23 || mi > 59 || sec > 60)
        return -1;
    return h * 3600 + mi * 60 + sec;
}

/* The year within (now - 50, now + 50] that ends in the two digits yy (RFC 9110 5.6.7). */
static int64_t window_year(int yy)
{
    time_t now = time(NULL);
    struct tm tm;
    int64_t lo;

    gmtime_r(&now, &tm);
    lo = (int64_t)tm.tm_year + 1900 - 49;
    return lo + ((yy - lo) % 100 + 100) % 100;
}

static int model_date(const char *s, size_t len, int64_t *t)
{
    const char *comma;
    int64_t y;
    int m;
    int d;
    int yv;
    int64_t tod;

    trim(&s, &len);
    comma = memchr(s, ',', len);
    if (comma == s + 3 && len == 29) {
        /* "Sun, 06 Nov 1994 08:49:37 GMT" */
        if (name_index(s, 3, wday3, 7) < 0 || s[4] != ' ' || !fixed_digits(s + 5, 2, &d) ||
            s[7] != ' ' || s[11] != ' ' || !fixed_digits(s + 12, 4, &yv) || s[16] != ' ' ||
            memcmp(s + 25, " GMT", 4) != 0)
            return -EBADMSG;
        m = name_index(s + 8, 3, mon3, 12) + 1;
        tod = model_tod(s + 17);
        y = yv;
    } else if (comma != NULL && name_index(s, (size_t)(comma - s), wday_long, 7) >= 0 &&
               len - (size_t)(comma - s) == 24) {
        /* "Sunday, 06-Nov-94 08:49:37 GMT" */
        const char *p = comma + 1;

        if (p[0] != ' ' || !fixed_digits(p + 1, 2, &d) || p[3] != '-' || p[7] != '-' ||
            !fixed_digits(p + 8, 2, &yv) || p[10] != ' ' || memcmp(p + 19, " GMT", 4) != 0)
            return -EBADMSG;
        m = name_index(p + 4, 3, mon3, 12) + 1;
        tod = model_tod(p + 11);
        y = window_year(yv);
    } else if (comma == NULL && len == 24) {
        /* "Sun Nov  6 08:49:37 1994" */
        if (name_index(s, 3, wday3, 7) < 0 || s[3] != ' ' || s[7] != ' ' || s[10] != ' ' ||
            s[19] != ' ' || !fixed_digits(s + 20, 4, &yv))
            return -EBADMSG;
        if (s[8] == ' ') {
            if (!fixed_digits(s + 9, 1, &d))
                return -EBADMSG;
        } else if (!fixed_digits(s + 8, 2, &d)) {
            return -EBADMSG;
        }
        m = name_index(s + 4, 3, mon3, 12) + 1;
        tod = model_tod(s + 11);
        y = yv;
    } else {
        return -EBADMSG;
    }
    if (m < 1 || tod < 0 || y < 1 || y > 9999 || d < 1 || d > month_days(y, m))
        return -EBADMSG;
    /* 9999-12-31 23:59:60 would be year 10000, which no Last-Modified can say. */
    if (epoch_days(y, m, d) * 86400 + tod >= MODEL_DATE_END)
        return -EBADMSG;
    *t = epoch_days(y, m, d) * 86400 + tod;
    return 0;
}

/*
 * http_date_format(t) must be the IMF-fixdate libc's gmtime_r() gives (so the weekday too,
 * which neither parser checks) and parse back to t.
 */
static void check_format(int64_t t)
{
    char out[HTTP_DATE_LEN + 1];
    char want[64];
    int64_t back;
    time_t tt = (time_t)t;
    struct tm tm;
    size_t n = http_date_format(out, t);

    if (t < MODEL_DATE_MIN || t >= MODEL_DATE_END) {
        if (n != 0 || out[0] != '\0')
            abort();
        return;
    }
    if (n != HTTP_DATE_LEN || strlen(out) != HTTP_DATE_LEN || gmtime_r(&tt, &tm) == NULL)
        abort();
    snprintf(want, sizeof(want), "%s, %02d %s %04d %02d:%02d:%02d GMT", wday3[tm.tm_wday],
             tm.tm_mday, mon3[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    if (strcmp(out, want) != 0)
        abort();
    if (model_date(out, n, &back) != 0 || back != t)
        abort();
    if (http_date_parse(out, n, &back) != 0 || back != t)
        abort();
}

static void check_date(const char *s, size_t len)
{
    int64_t t = 0;
    int64_t mt = 0;
    int rc = http_date_parse(s, len, &t);
    int mrc = model_date(s, len, &mt);

    if (rc != 0 && rc != -EBADMSG)
        abort();
    if (rc != mrc || (rc == 0 && t != mt))
        abort();
    if (rc != 0)
        return;
    /* What parses must format back (a Last-Modified the server could send). */
    if (t < MODEL_DATE_MIN || t >= MODEL_DATE_END)
        abort();
    check_format(t);
}

/* ---------------------------------------------------------------- range model */

/* 1*DIGIT at s[*i..len): its significant digits in [*start, *i), value saturated. */
static bool scan_num(const char *s, size_t len, size_t *i, size_t *start, uint64_t *v)
{
    size_t b = *i;

    *v = 0;
    while (*i < len && is_digit(s[*i])) {
        unsigned d = (unsigned)(s[*i] - '0');

        *v = *v > (UINT64_MAX - d) / 10 ? UINT64_MAX : *v * 10 + d;
        (*i)++;
    }
    *start = b;
    while (*start + 1 < *i && s[*start] == '0')
        (*start)++;
    return *i > b;
}

/* Whether the decimal a[0..an) < b[0..bn), both without leading zeros, at any length. */
static bool digits_less(const char *a, size_t an, const char *b, size_t bn)
{
    if (an != bn)
        return an < bn;
    return memcmp(a, b, an) < 0;
}

/*
 * Range per RFC 9110 14.1.1 and http_range_parse()'s contract: each comma-separated element is
 * parsed on its own, "b < a" compared on the digit strings (not on saturated values).
 */
static int model_range(const char *v, size_t len, uint64_t size, struct http_ranges *out)
{
    struct http_range rs[HTTP_RANGE_MAX];
    unsigned n = 0;
    unsigned specs = 0;
    size_t i = 6;

    out->n = 0;
    trim(&v, &len);
    if (len < 6 || strncasecmp(v, "bytes=", 6) != 0)
        return -EBADMSG;
    while (i <= len) {
        const char *e = v + i;
        size_t el;
        const char *c = memchr(e, ',', len - i);
        size_t j = 0;
        size_t fs;
        size_t ls;
        size_t fe;
        uint64_t first;
        uint64_t last;

        el = c != NULL ? (size_t)(c - e) : len - i;
        i += el + 1;
        trim(&e, &el);
        if (el == 0)
            continue;
        if (++specs > HTTP_RANGE_MAX)
            return -E2BIG;
        if (e[0] == '-') {
            uint64_t suffix;

            j = 1;
            if (!scan_num(e, el, &j, &fs, &suffix) || j != el)
                return -EBADMSG;
            if (suffix == 0 || size == 0)
                continue;
            first = suffix >= size ? 0 : size - suffix;
            last = size - 1;
        } else {
            if (!scan_num(e, el, &j, &fs, &first) || j == el || e[j] != '-')
                return -EBADMSG;
            fe = j;
            j++;
            if (j < el) {
                if (!scan_num(e, el, &j, &ls, &last) || j != el)
                    return -EBADMSG;
                if (digits_less(e + ls, j - ls, e + fs, fe - fs))
                    return -EBADMSG;
            } else {
                last = UINT64_MAX;
            }
            if (first >= size)
                continue;
            if (last >= size)
                last = size - 1;
        }
        rs[n].first = first;
        rs[n].last = last;
        n++;
    }
    if (specs == 0)
        return -EBADMSG;
    if (n == 0)
        return -ERANGE;
    /* Union: repeatedly take the lowest remaining start and extend over what reaches it. */
    while (n > 0) {
        unsigned lo = 0;
        struct http_range cur;
        bool grew = true;

        for (unsigned k = 1; k < n; k++) {
            if (rs[k].first < rs[lo].first)
                lo = k;
        }
        cur = rs[lo];
        rs[lo] = rs[--n];
        while (grew) {
            grew = false;
            for (unsigned k = 0; k < n; k++) {
                if (rs[k].first <= cur.last || rs[k].first - cur.last == 1) {
                    if (rs[k].last > cur.last)
                        cur.last = rs[k].last;
                    rs[k] = rs[--n];
                    grew = true;
                    break;
                }
            }
        }
        out->r[out->n++] = cur;
    }
    return 0;
}

static void check_ranges_shape(const struct http_ranges *rs, uint64_t size)
{
    if (rs->n < 1 || rs->n > HTTP_RANGE_MAX)
        abort();
    for (unsigned k = 0; k < rs->n; k++) {
        if (rs->r[k].first > rs->r[k].last || rs->r[k].last >= size)
            abort();
        /* Ascending, disjoint and not touching (touching ones are coalesced). */
        if (k > 0 && rs->r[k].first <= rs->r[k - 1].last + 1)
            abort();
    }
}

static void check_range(const char *s, size_t len, uint64_t size)
{
    struct http_ranges got;
    struct http_ranges want;
    int rc = http_range_parse(s, len, size, &got);
    int mrc = model_range(s, len, size, &want);

    if (rc != 0 && rc != -ERANGE && rc != -EBADMSG && rc != -E2BIG)
        abort();
    if (rc != mrc)
        abort();
    if (rc == -ERANGE && got.n != 0)
        abort();
    if (rc != 0)
        return;
    check_ranges_shape(&got, size);
    if (got.n != want.n || memcmp(got.r, want.r, got.n * sizeof(got.r[0])) != 0)
        abort();
}

/* ---------------------------------------------------------------- Accept-Encoding model */

static bool is_tchar(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool all_tchar(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!is_tchar(s[i]))
            return false;
    }
    return n > 0;
}

/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in thousandths; -1 if not. */
static int model_qvalue(const char *s, size_t n)
{
    int q;

    if (n == 0 || n > 5 || (s[0] != '0' && s[0] != '1') || (n > 1 && s[1] != '.'))
        return -1;
    q = (s[0] - '0') * 1000;
    for (size_t k = 2, scale = 100; k < n; k++, scale /= 10) {
        if (!is_digit(s[k]))
            return -1;
        q += (s[k] - '0') * (int)scale;
    }
    return q > 1000 ? -1 : q;
}

/*
 * Splits on ',' then ';' (no quoted-strings: a parameter value is a token, so a quoted one is
 * malformed and the answer is no). The best q of gzip / x-gzip decides; else the last "*".
 */
static bool model_accepts_gzip(const char *v, size_t len)
{
    int gzip_q = -1;
    int star_q = -1;
    size_t i = 0;

    if (v == NULL)
        return false;
    while (i <= len) {
        const char *e = v + i;
        const char *c = memchr(e, ',', len - i);
        size_t el = c != NULL ? (size_t)(c - e) : len - i;
        const char *name;
        size_t nl;
        int q = 1000;

        i += el + 1;
        trim(&e, &el);
        if (el == 0)
            continue;
        c = memchr(e, ';', el);
        name = e;
        nl = c != NULL ? (size_t)(c - e) : el;
        trim(&name, &nl);
        if (!all_tchar(name, nl))
            return false;
        while (c != NULL) {
            const char *p = c + 1;
            size_t pl;
            const char *eq;

            c = memchr(p, ';', (size_t)(e + el - p));
            pl = c != NULL ? (size_t)(c - p) : (size_t)(e + el - p);
            trim(&p, &pl);
            eq = memchr(p, '=', pl);
            if (eq == NULL || !all_tchar(p, (size_t)(eq - p)))
                return false;
            if (eq - p == 1 && (p[0] == 'q' || p[0] == 'Q')) {
                q = model_qvalue(eq + 1, (size_t)(p + pl - eq - 1));
                if (q < 0)
                    return false;
            } else if (!all_tchar(eq + 1, (size_t)(p + pl - eq - 1))) {
                return false;
            }
        }
        if ((nl == 4 && strncasecmp(name, "gzip", 4) == 0) ||
            (nl == 6 && strncasecmp(name, "x-gzip", 6) == 0)) {
            if (q > gzip_q)
                gzip_q = q;
        } else if (nl == 1 && name[0] == '*') {
            star_q = q;
        }
    }
    return gzip_q >= 0 ? gzip_q > 0 : star_q > 0;
}

static void check_accept(const char *s, size_t len)
{
    if (http_accepts_gzip(s, len) != model_accepts_gzip(s, len))
        abort();
}

/* ---------------------------------------------------------------- entity-tag model */

/* [W/] DQUOTE *etagc DQUOTE at s[*i..len); advances *i past it. */
static bool model_scan_etag(const char *s, size_t len, size_t *i, bool *weak, const char **op,
                            size_t *op_len)
{
    size_t j = *i;

    *weak = len - j >= 2 && s[j] == 'W' && s[j + 1] == '/';
    if (*weak)
        j += 2;
    if (j >= len || s[j] != '"')
        return false;
    *op = s + j;
    for (j++; j < len; j++) {
        unsigned char c = (unsigned char)s[j];

        if (c == '"') {
            *op_len = (size_t)(s + j + 1 - *op);
            *i = j + 1;
            return true;
        }
        if (c < 0x21 || c == 0x7f)
            return false;
    }
    return false;
}

static bool model_is_etag(const char *s, size_t len, bool *weak, const char **op, size_t *op_len)
{
    size_t i = 0;

    return model_scan_etag(s, len, &i, weak, op, op_len) && i == len;
}

/*
 * "*" or 1#entity-tag (RFC 9110 13.1.1/13.1.2): the whole list must parse before anything
 * matches, as http_file.h says "A malformed list matches nothing."
 */
static bool model_etag_match(const char *list, size_t len, const char *etag, size_t etag_len,
                             bool weak)
{
    const char *want;
    size_t want_len;
    bool want_weak;
    bool matched = false;
    size_t i = 0;

    trim(&list, &len);
    if (len == 1 && list[0] == '*')
        return true;
    if (etag == NULL || !model_is_etag(etag, etag_len, &want_weak, &want, &want_len))
        return false;
    for (;;) {
        const char *op;
        size_t op_len;
        bool w;

        while (i < len && (is_ows(list[i]) || list[i] == ','))
            i++;
        if (i == len)
            return matched;
        if (!model_scan_etag(list, len, &i, &w, &op, &op_len))
            return false;
        if ((weak || (!w && !want_weak)) && op_len == want_len && memcmp(op, want, op_len) == 0)
            matched = true;
        while (i < len && is_ows(list[i]))
            i++;
        if (i < len && list[i] != ',')
            return false;
    }
}

static void check_etag_match(const char *list, size_t len, const char *etag, size_t etag_len)
{
    for (int weak = 0; weak <= 1; weak++) {
        if (http_etag_match(list, len, etag, etag_len, weak) !=
            model_etag_match(list, len, etag, etag_len, weak))
            abort();
    }
}

/* If-Range: one strong entity-tag equal to a strong ETag, or a date equal to Last-Modified
 * whose second is before the clock's. */
static bool model_if_range(const char *s, size_t len, const struct http_validators *v)
{
    const char *op;
    size_t op_len;
    bool weak;
    bool vweak;
    int64_t t;

    trim(&s, &len);
    if (len >= 1 && (s[0] == '"' || (len >= 2 && s[0] == 'W' && s[1] == '/'))) {
        if (!model_is_etag(s, len, &weak, &op, &op_len) || weak)
            return false;
        if (v->etag == NULL || !model_is_etag(v->etag, v->etag_len, &vweak, &op, &op_len) || vweak)
            return false;
        return len == v->etag_len && memcmp(s, v->etag, len) == 0;
    }
    return model_date(s, len, &t) == 0 && t == v->mtime && t < v->now;
}

/* ---------------------------------------------------------------- the plan */

static bool is_get_or_head(enum http_file_method m)
{
    return m == HTTP_FILE_GET || m == HTTP_FILE_HEAD;
}

/* RFC 9110 13.2.2, over the models. */
static int model_preconditions(const struct http_file_request *rq, const struct http_validators *v)
{
    int64_t t;

    if (rq->if_match != NULL) {
        if (!model_etag_match(rq->if_match, rq->if_match_len, v->etag, v->etag_len, false))
            return 412;
    } else if (rq->if_unmodified_since != NULL &&
               model_date(rq->if_unmodified_since, rq->if_unmodified_since_len, &t) == 0 &&
               v->mtime > t) {
        return 412;
    }
    if (rq->if_none_match != NULL) {
        if (model_etag_match(rq->if_none_match, rq->if_none_match_len, v->etag, v->etag_len, true))
            return is_get_or_head(rq->method) ? 304 : 412;
    } else if (rq->if_modified_since != NULL && is_get_or_head(rq->method) &&
               model_date(rq->if_modified_since, rq->if_modified_since_len, &t) == 0 &&
               t <= v->now && v->mtime <= t) {
        return 304;
    }
    return 200;
}

/* Writes the part header the contract describes, for comparison (ctype may hold NULs). */
static size_t expected_part(char *out, size_t cap, const char *boundary, const char *ctype,
                            size_t ctype_len, const struct http_range *r, uint64_t size)
{
    int a = snprintf(out, cap, "\r\n--%s\r\nContent-Type: ", boundary);
    int b;

    if (a < 0 || (size_t)a + ctype_len >= cap)
        abort();
    memcpy(out + a, ctype, ctype_len);
    b = snprintf(out + a + ctype_len, cap - (size_t)a - ctype_len,
                 "\r\nContent-Range: bytes %llu-%llu/%llu\r\n\r\n", (unsigned long long)r->first,
                 (unsigned long long)r->last, (unsigned long long)size);
    if (b < 0 || (size_t)a + ctype_len + (size_t)b >= cap)
        abort();
    return (size_t)a + ctype_len + (size_t)b;
}

/*
 * The multipart body with the header's helpers: its length summed part by part, and for small
 * bodies written into a buffer of exactly p->content_length bytes (ASan catches a longer one).
 */
static void check_multipart(const struct http_file_plan *p, uint64_t size, const char *ctype,
                            size_t ctype_len)
{
    size_t hcap = HTTP_MULTIPART_PART_MAX(ctype_len);
    char *hdr = malloc(hcap);
    char *want = malloc(hcap + 1);
    char trailer[HTTP_MULTIPART_TRAILER_LEN + 1];
    char *body = NULL;
    uint64_t total = 0;
    uint64_t off = 0;

    if (hdr == NULL || want == NULL)
        abort();
    if (p->content_length <= LAYOUT_MAX) {
        body = malloc(p->content_length > 0 ? p->content_length : 1);
        if (body == NULL)
            abort();
    }
    for (unsigned k = 0; k < p->ranges.n; k++) {
        const struct http_range *r = &p->ranges.r[k];
        size_t hl = http_multipart_part_header(hdr, hcap, p->boundary, ctype, ctype_len, r, size);
        uint64_t rl = r->last - r->first + 1;

        if (hl == 0 ||
            hl != expected_part(want, hcap + 1, p->boundary, ctype, ctype_len, r, size) ||
            memcmp(hdr, want, hl) != 0)
            abort();
        /* One byte less does not fit. */
        if (http_multipart_part_header(hdr, hl - 1, p->boundary, ctype, ctype_len, r, size) != 0)
            abort();
        if (body != NULL) {
            if (off + hl + rl > p->content_length)
                abort();
            hl = http_multipart_part_header(body + off, p->content_length - off, p->boundary, ctype,
                                            ctype_len, r, size);
            if (hl == 0)
                abort();
            memset(body + off + hl, 'x', rl);
            off += hl + rl;
        }
        total += hl + rl;
    }
    if (http_multipart_trailer(trailer, sizeof(trailer), p->boundary) !=
            HTTP_MULTIPART_TRAILER_LEN ||
        memcmp(trailer, "\r\n--", 4) != 0 ||
        memcmp(trailer + 4, p->boundary, HTTP_BOUNDARY_LEN) != 0 ||
        memcmp(trailer + 4 + HTTP_BOUNDARY_LEN, "--\r\n", 4) != 0)
        abort();
    if (http_multipart_trailer(trailer, HTTP_MULTIPART_TRAILER_LEN - 1, p->boundary) != 0)
        abort();
    total += HTTP_MULTIPART_TRAILER_LEN;
    if (body != NULL) {
        if (off + HTTP_MULTIPART_TRAILER_LEN != p->content_length ||
            http_multipart_trailer(body + off, p->content_length - off, p->boundary) !=
                HTTP_MULTIPART_TRAILER_LEN)
            abort();
        off += HTTP_MULTIPART_TRAILER_LEN;
    }
    if (total != p->content_length || (body != NULL && off != total))
        abort();
    if (http_multipart_length(&p->ranges, size, ctype_len) != p->content_length)
        abort();
    free(body);
    free(want);
    free(hdr);
}

static void check_plan(const struct http_file_request *rq, const struct http_validators *v,
                       const char *ctype, size_t ctype_len, uint64_t seed)
{
    struct http_file_plan p;
    struct http_ranges want = {0};
    int status = model_preconditions(rq, v);
    int pre = http_file_preconditions(rq, v);
    int rrc = 1;

    if (pre != status || (pre != 200 && pre != 304 && pre != 412))
        abort();
    http_file_plan(&p, rq, v, ctype_len, seed);
    if (p.status != 200 && p.status != 206 && p.status != 304 && p.status != 412 && p.status != 416)
        abort();
    if (status == 200 && rq->method == HTTP_FILE_GET && rq->range != NULL &&
        (rq->if_range == NULL || model_if_range(rq->if_range, rq->if_range_len, v))) {
        rrc = model_range(rq->range, rq->range_len, v->size, &want);
        if (rrc == 0)
            status = 206;
        else if (rrc == -ERANGE)
            status = 416;
    }
    if (p.status != status)
        abort();
    if (p.status != 206) {
        uint64_t cl = p.status == 200 ? v->size : 0;

        if (p.ranges.n != 0 || p.content_length != cl || p.boundary[0] != '\0')
            abort();
        if (p.status == 416) {
            char cr[HTTP_CONTENT_RANGE_MAX];
            char exp[HTTP_CONTENT_RANGE_MAX];
            size_t n = http_content_range_format(cr, sizeof(cr), NULL, v->size);

            snprintf(exp, sizeof(exp), "bytes */%llu", (unsigned long long)v->size);
            if (n == 0 || n != strlen(exp) || strcmp(cr, exp) != 0)
                abort();
        }
        return;
    }
    check_ranges_shape(&p.ranges, v->size);
    if (p.ranges.n != want.n || memcmp(p.ranges.r, want.r, want.n * sizeof(want.r[0])) != 0)
        abort();
    if (p.ranges.n == 1) {
        const struct http_range *r = &p.ranges.r[0];
        char cr[HTTP_CONTENT_RANGE_MAX];
        char exp[HTTP_CONTENT_RANGE_MAX];
        size_t n = http_content_range_format(cr, sizeof(cr), r, v->size);

        if (p.content_length != r->last - r->first + 1 || p.boundary[0] != '\0')
            abort();
        snprintf(exp, sizeof(exp), "bytes %llu-%llu/%llu", (unsigned long long)r->first,
                 (unsigned long long)r->last, (unsigned long long)v->size);
        if (n == 0 || n != strlen(exp) || strcmp(cr, exp) != 0)
            abort();
        if (http_content_range_format(cr, n, r, v->size) != 0)
            abort();
        return;
    }
    {
        char b[HTTP_BOUNDARY_LEN + 1];

        http_multipart_boundary(b, seed);
        if (strlen(p.boundary) != HTTP_BOUNDARY_LEN || strcmp(b, p.boundary) != 0 ||
            strspn(p.boundary, "0123456789abcdef") != HTTP_BOUNDARY_LEN)
            abort();
    }
    check_multipart(&p, v->size, ctype, ctype_len);
}

/* ---------------------------------------------------------------- input */

/* A decimal at s[*i..len) after spaces, saturating; an optional '-' when neg is allowed. */
static uint64_t config_num(const char *s, size_t len, size_t *i, bool *neg)
{
    uint64_t v = 0;

    while (*i < len && s[*i] == ' ')
        (*i)++;
    *neg = *i < len && s[*i] == '-';
    if (*neg)
        (*i)++;
    while (*i < len && is_digit(s[*i])) {
        unsigned d = (unsigned)(s[*i] - '0');

        v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
        (*i)++;
    }
    /* Skip the rest of a malformed token. */
    while (*i < len && s[*i] != ' ')
        (*i)++;
    return v;
}

static struct field copy_field(const uint8_t *s, size_t len)
{
    struct field f = {NULL, 0};

    if (len == 0)
        return f;
    f.s = malloc(len);
    if (f.s == NULL)
        abort();
    memcpy(f.s, s, len);
    f.len = len;
    return f;
}

/* Every parser, on one value (a field or the whole input). */
static void check_value(const struct field *f, const struct http_validators *v)
{
    check_date(f->s, f->len);
    check_range(f->s, f->len, v->size);
    check_range(f->s, f->len, f->len);
    check_accept(f->s, f->len);
    check_etag_match(f->s, f->len, v->etag, v->etag_len);
    if (http_if_range_matches(f->s, f->len, v) != model_if_range(f->s, f->len, v))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct field f[F_COUNT] = {{NULL, 0}};
    struct field whole = copy_field(data, size);
    struct http_file_request rq = {.method = HTTP_FILE_GET};
    struct http_validators v = {.now = INT64_MAX};
    struct stat st = {0};
    char etag[HTTP_ETAG_MAX];
    char *own_etag = NULL;
    const char *ctype = "text/plain";
    size_t ctype_len = strlen(ctype);
    uint64_t seed = 0;
    size_t pos = 0;
    bool neg;

    for (int k = 0; k < F_COUNT && pos <= size; k++) {
        const uint8_t *nl = pos < size ? memchr(data + pos, '\n', size - pos) : NULL;
        size_t len = nl != NULL ? (size_t)(nl - (data + pos)) : size - pos;

        f[k] = copy_field(data + pos, len);
        pos += len + 1;
    }

    if (f[F_CONFIG].s != NULL) {
        size_t i = 0;
        uint64_t mt;

        v.size = config_num(f[F_CONFIG].s, f[F_CONFIG].len, &i, &neg);
        /* st_size is an off_t: the service never sees a larger size. */
        if (v.size > INT64_MAX)
            v.size = INT64_MAX;
        mt = config_num(f[F_CONFIG].s, f[F_CONFIG].len, &i, &neg);
        if (mt > INT64_MAX)
            mt = INT64_MAX;
        v.mtime = neg ? -(int64_t)mt : (int64_t)mt;
        seed = config_num(f[F_CONFIG].s, f[F_CONFIG].len, &i, &neg);
        while (i < f[F_CONFIG].len && f[F_CONFIG].s[i] == ' ')
            i++;
        if (i < f[F_CONFIG].len) {
            uint64_t now = config_num(f[F_CONFIG].s, f[F_CONFIG].len, &i, &neg);

            if (now > INT64_MAX)
                now = INT64_MAX;
            v.now = neg ? -(int64_t)now : (int64_t)now;
        }
    }
    check_format(v.mtime);

    st.st_mtim.tv_sec = v.mtime;
    st.st_size = (off_t)v.size;
    if (f[F_ETAG].s != NULL) {
        v.etag = f[F_ETAG].s;
        v.etag_len = f[F_ETAG].len;
    } else {
        size_t n = http_etag_format(etag, sizeof(etag), &st, false);
        char gz[HTTP_ETAG_MAX];
        size_t gn = http_etag_format(gz, sizeof(gz), &st, true);
        const char *op;
        size_t op_len;
        bool weak;

        if (n == 0 || gn == 0 || !model_is_etag(etag, n, &weak, &op, &op_len) || weak ||
            !model_is_etag(gz, gn, &weak, &op, &op_len) || weak ||
            (n == gn && !memcmp(etag, gz, n)))
            abort();
        own_etag = malloc(n);
        if (own_etag == NULL)
            abort();
        memcpy(own_etag, etag, n);
        v.etag = own_etag;
        v.etag_len = n;
        /* Our own strong ETag matches itself both ways; the -gz one does not. */
        if (!http_etag_match(own_etag, n, own_etag, n, false) ||
            !http_etag_match(own_etag, n, own_etag, n, true) ||
            http_etag_match(gz, gn, own_etag, n, true))
            abort();
    }
    if (f[F_CTYPE].s != NULL) {
        ctype = f[F_CTYPE].s;
        ctype_len = f[F_CTYPE].len;
    }

    for (int k = F_DATE; k < F_COUNT; k++) {
        if (f[k].s != NULL)
            check_value(&f[k], &v);
    }
    if (whole.s != NULL)
        check_value(&whole, &v);

    rq.range = f[F_RANGE].s;
    rq.range_len = f[F_RANGE].len;
    rq.if_match = f[F_IF_MATCH].s;
    rq.if_match_len = f[F_IF_MATCH].len;
    rq.if_none_match = f[F_IF_NONE_MATCH].s;
    rq.if_none_match_len = f[F_IF_NONE_MATCH].len;
    rq.if_modified_since = f[F_IF_MODIFIED_SINCE].s;
    rq.if_modified_since_len = f[F_IF_MODIFIED_SINCE].len;
    rq.if_unmodified_since = f[F_IF_UNMODIFIED_SINCE].s;
    rq.if_unmodified_since_len = f[F_IF_UNMODIFIED_SINCE].len;
    rq.if_range = f[F_IF_RANGE].s;
    rq.if_range_len = f[F_IF_RANGE].len;
    /* The same request with each method (Range applies to GET only). */
    for (int m = HTTP_FILE_GET; m <= HTTP_FILE_OTHER; m++) {
        rq.method = (enum http_file_method)m;
        check_plan(&rq, &v, ctype, ctype_len, seed);
    }

    free(own_etag);
    for (int k = 0; k < F_COUNT; k++)
        free(f[k].s);
    free(whole.s);
    return 0;
}

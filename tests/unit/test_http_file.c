/*
 * test_http_file.c - the HTTP semantics of a file response (apps/httpd/http_file.c): ETag and
 * IMF-fixdate formatting, HTTP-date parsing in its three formats, entity-tag comparison, the
 * RFC 9110 13.2.2 precondition order, If-Range, Range parsing (single, suffix, open, multiple,
 * unsatisfiable, invalid, too many, coalescing, numbers past 64 bits), the multipart/byteranges
 * length against a body actually laid out (and saturating), Accept-Encoding, and the whole plan.
 */
#include "../../apps/httpd/http_file.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example. */
#define T_1994 INT64_C(784111777)
#define DAY    INT64_C(86400)

/* ---------------------------------------------------------------- validators */

START_TEST(etag_is_strong_mtime_and_size_in_hex)
{
    struct stat st;
    char buf[HTTP_ETAG_MAX];

    memset(&st, 0, sizeof(st));
    st.st_mtim.tv_sec = 0x5f5e1000;
    st.st_mtim.tv_nsec = 0x1234;
    st.st_size = 0xabcdef;
    ck_assert_uint_eq(http_etag_format(buf, sizeof(buf), &st, false), 22);
    ck_assert_str_eq(buf, "\"5f5e1000.1234-abcdef\"");
    ck_assert_uint_eq(http_etag_format(buf, sizeof(buf), &st, true), 25);
    ck_assert_str_eq(buf, "\"5f5e1000.1234-abcdef-gz\"");
    ck_assert_uint_eq(http_etag_format(buf, 10, &st, false), 0);
    /* The longest one fits HTTP_ETAG_MAX. */
    st.st_mtim.tv_sec = -1;
    st.st_mtim.tv_nsec = 999999999;
    st.st_size = INT64_MAX;
    ck_assert_uint_gt(http_etag_format(buf, sizeof(buf), &st, true), 0);
}
END_TEST

START_TEST(formats_imf_fixdate)
{
    char buf[HTTP_DATE_LEN + 1];

    ck_assert_uint_eq(http_date_format(buf, T_1994), HTTP_DATE_LEN);
    ck_assert_str_eq(buf, "Sun, 06 Nov 1994 08:49:37 GMT");
    http_date_format(buf, 0);
    ck_assert_str_eq(buf, "Thu, 01 Jan 1970 00:00:00 GMT");
    http_date_format(buf, -1);
    ck_assert_str_eq(buf, "Wed, 31 Dec 1969 23:59:59 GMT");
    http_date_format(buf, 951782400); /* a leap day */
    ck_assert_str_eq(buf, "Tue, 29 Feb 2000 00:00:00 GMT");
    http_date_format(buf, INT64_C(253402300799));
    ck_assert_str_eq(buf, "Fri, 31 Dec 9999 23:59:59 GMT");
    ck_assert_uint_eq(http_date_format(buf, INT64_C(253402300800)), 0);
    ck_assert_uint_eq(http_date_format(buf, INT64_C(-62135596801)), 0);
    ck_assert_uint_eq(http_date_format(buf, INT64_MIN), 0);
}
END_TEST

START_TEST(parses_the_three_http_date_formats)
{
    static const char *const ok[] = {
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
        "Sun Nov 06 08:49:37 1994",
        "  Sun, 06 Nov 1994 08:49:37 GMT\t",
        "sun, 06 nov 1994 08:49:37 GMT",
        /* The weekday is not cross-checked. */
        "Mon, 06 Nov 1994 08:49:37 GMT",
    };
    static const char *const bad[] = {
        "",
        "Sun, 06 Nov 1994 08:49:37",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 06 Nov 1994 08:49:37 GMTx",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 31 Feb 1994 08:49:37 GMT",
        "Sun, 29 Feb 1900 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Xyz 1994 08:49:37 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 0000 08:49:37 GMT",
        "Foo, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 94",
        "Sun Nov  6 8:49:37 1994",
        "784111777",
        "Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT",
    };
    int64_t t;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        t = 0;
        ck_assert_msg(http_date_parse(ok[i], strlen(ok[i]), &t) == 0, "%s refused", ok[i]);
        ck_assert_msg(t == T_1994, "%s: %lld", ok[i], (long long)t);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(http_date_parse(bad[i], strlen(bad[i]), &t) == -EBADMSG, "%s accepted",
                      bad[i]);
    ck_assert_int_eq(http_date_parse("Tue, 29 Feb 2000 00:00:00 GMT", 29, &t), 0);
    ck_assert_int_eq(t, 951782400);
}
END_TEST

START_TEST(rfc850_two_digit_years_are_not_far_in_the_future)
{
    int64_t t;
    char buf[HTTP_DATE_LEN + 1];

    /* Years 00 and 49 are this century (until 2050 or so), 99 the last one. */
    ck_assert_int_eq(http_date_parse("Saturday, 01-Jan-00 00:00:00 GMT", 32, &t), 0);
    http_date_format(buf, t);
    ck_assert_str_eq(buf, "Sat, 01 Jan 2000 00:00:00 GMT");
    ck_assert_int_eq(http_date_parse("Friday, 31-Dec-99 23:59:59 GMT", 30, &t), 0);
    http_date_format(buf, t);
    ck_assert_str_eq(buf, "Fri, 31 Dec 1999 23:59:59 GMT");
}
END_TEST

START_TEST(leap_second_at_the_end_of_9999_is_refused)
{
    char buf[HTTP_DATE_LEN + 1];
    int64_t t;

    /* It would be 10000-01-01T00:00:00Z, which http_date_format() cannot write. */
    ck_assert_int_eq(http_date_parse("Fri, 31 Dec 9999 23:59:60 GMT", HTTP_DATE_LEN, &t), -EBADMSG);
    ck_assert_int_eq(http_date_parse("Fri Dec 31 23:59:60 9999", 24, &t), -EBADMSG);
    /* The last second that formats, and a leap second one day earlier (the next midnight). */
    ck_assert_int_eq(http_date_parse("Fri, 31 Dec 9999 23:59:59 GMT", HTTP_DATE_LEN, &t), 0);
    ck_assert_int_eq(t, INT64_C(253402300799));
    ck_assert_int_eq(http_date_parse("Thu, 30 Dec 9999 23:59:60 GMT", HTTP_DATE_LEN, &t), 0);
    ck_assert_uint_eq(http_date_format(buf, t), HTTP_DATE_LEN);
    ck_assert_str_eq(buf, "Fri, 31 Dec 9999 00:00:00 GMT");
}
END_TEST

START_TEST(format_and_parse_round_trip)
{
    uint64_t x = 88172645463325252u;

    for (int i = 0; i < 100000; i++) {
        char buf[HTTP_DATE_LEN + 1];
        int64_t t;
        int64_t back;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t = (int64_t)(x % UINT64_C(315537897600)) - INT64_C(62135596800);
        ck_assert_uint_eq(http_date_format(buf, t), HTTP_DATE_LEN);
        ck_assert_int_eq(http_date_parse(buf, HTTP_DATE_LEN, &back), 0);
        ck_assert_msg(back == t, "%s: %lld != %lld", buf, (long long)back, (long long)t);
    }
}
END_TEST

START_TEST(entity_tags_compare_weakly_or_strongly)
{
    const char *e = "\"abc\"";
    const char *we = "W/\"abc\"";

    ck_assert(http_etag_match("*", 1, e, 5, false));
    ck_assert(http_etag_match(" * ", 3, NULL, 0, false));
    ck_assert(http_etag_match("\"abc\"", 5, e, 5, false));
    ck_assert(http_etag_match("\"x\", \"abc\"", 10, e, 5, false));
    ck_assert(http_etag_match("\"x\",\"abc\" ,", 11, e, 5, false));
    ck_assert(!http_etag_match("W/\"abc\"", 7, e, 5, false));
    ck_assert(http_etag_match("W/\"abc\"", 7, e, 5, true));
    ck_assert(http_etag_match("\"abc\"", 5, we, 7, true));
    ck_assert(!http_etag_match("\"abc\"", 5, we, 7, false));
    ck_assert(!http_etag_match("\"abcd\"", 6, e, 5, true));
    ck_assert(!http_etag_match("\"ab\"", 4, e, 5, true));
    ck_assert(!http_etag_match("abc", 3, e, 5, true));
    ck_assert(!http_etag_match("\"abc", 4, e, 5, true));
    ck_assert(!http_etag_match("\"x\" \"abc\"", 9, e, 5, true));
    ck_assert(!http_etag_match("\"x\", *", 6, e, 5, true));
    ck_assert(!http_etag_match("", 0, e, 5, true));
    ck_assert(!http_etag_match("\"abc\"", 5, NULL, 0, true));
}
END_TEST

/* ---------------------------------------------------------------- preconditions */

static const char etag[] = "\"5f5e1000.0-64\"";

static struct http_validators validators(void)
{
    struct http_validators v = {.etag = etag,
                                .etag_len = sizeof(etag) - 1,
                                .mtime = T_1994,
                                .size = 100,
                                .now = T_1994 + DAY * 365 * 30};

    return v;
}

#define FIELD(rq, name, s) ((rq).name = (s), (rq).name##_len = strlen(s))

struct cond_case {
    enum http_file_method method;
    const char *if_match;
    const char *if_unmodified_since;
    const char *if_none_match;
    const char *if_modified_since;
    int status;
};

#define D_SAME   "Sun, 06 Nov 1994 08:49:37 GMT"
#define D_BEFORE "Sun, 06 Nov 1994 08:49:36 GMT"
#define D_AFTER  "Sun, 06 Nov 1994 08:49:38 GMT"
#define E_OK     "\"5f5e1000.0-64\""
#define E_OTHER  "\"other\""

static const struct cond_case cond_cases[] = {
    {HTTP_FILE_GET, NULL, NULL, NULL, NULL, 200},
    /* If-Match: strong. */
    {HTTP_FILE_GET, E_OK, NULL, NULL, NULL, 200},
    {HTTP_FILE_GET, "*", NULL, NULL, NULL, 200},
    {HTTP_FILE_GET, E_OTHER, NULL, NULL, NULL, 412},
    {HTTP_FILE_GET, "W/" E_OK, NULL, NULL, NULL, 412},
    {HTTP_FILE_GET, E_OTHER ", " E_OK, NULL, NULL, NULL, 200},
    /* If-Unmodified-Since, only without If-Match. */
    {HTTP_FILE_GET, NULL, D_SAME, NULL, NULL, 200},
    {HTTP_FILE_GET, NULL, D_AFTER, NULL, NULL, 200},
    {HTTP_FILE_GET, NULL, D_BEFORE, NULL, NULL, 412},
    {HTTP_FILE_GET, NULL, "garbage", NULL, NULL, 200},
    {HTTP_FILE_GET, E_OK, D_BEFORE, NULL, NULL, 200},
    /* If-None-Match: weak; 304 for GET/HEAD, 412 otherwise. */
    {HTTP_FILE_GET, NULL, NULL, E_OK, NULL, 304},
    {HTTP_FILE_HEAD, NULL, NULL, E_OK, NULL, 304},
    {HTTP_FILE_GET, NULL, NULL, "W/" E_OK, NULL, 304},
    {HTTP_FILE_GET, NULL, NULL, "*", NULL, 304},
    {HTTP_FILE_OTHER, NULL, NULL, E_OK, NULL, 412},
    {HTTP_FILE_GET, NULL, NULL, E_OTHER, NULL, 200},
    /* If-Modified-Since, only without If-None-Match, only GET/HEAD. */
    {HTTP_FILE_GET, NULL, NULL, NULL, D_SAME, 304},
    {HTTP_FILE_GET, NULL, NULL, NULL, D_AFTER, 304},
    {HTTP_FILE_GET, NULL, NULL, NULL, D_BEFORE, 200},
    {HTTP_FILE_HEAD, NULL, NULL, NULL, D_SAME, 304},
    {HTTP_FILE_OTHER, NULL, NULL, NULL, D_SAME, 200},
    {HTTP_FILE_GET, NULL, NULL, NULL, "yesterday", 200},
    {HTTP_FILE_GET, NULL, NULL, E_OTHER, D_SAME, 200},
    {HTTP_FILE_GET, NULL, NULL, E_OK, D_BEFORE, 304},
    /* A failed If-Match wins over a matching If-None-Match. */
    {HTTP_FILE_GET, E_OTHER, NULL, E_OK, NULL, 412},
    {HTTP_FILE_GET, NULL, D_BEFORE, NULL, D_SAME, 412},
    {HTTP_FILE_GET, E_OK, NULL, E_OK, NULL, 304},
};

START_TEST(preconditions_follow_rfc9110_order)
{
    const struct cond_case *c = &cond_cases[_i];
    struct http_file_request rq = {.method = c->method};
    struct http_validators v = validators();

    if (c->if_match)
        FIELD(rq, if_match, c->if_match);
    if (c->if_unmodified_since)
        FIELD(rq, if_unmodified_since, c->if_unmodified_since);
    if (c->if_none_match)
        FIELD(rq, if_none_match, c->if_none_match);
    if (c->if_modified_since)
        FIELD(rq, if_modified_since, c->if_modified_since);
    ck_assert_int_eq(http_file_preconditions(&rq, &v), c->status);
}
END_TEST

START_TEST(etag_list_with_a_malformed_tail_matches_nothing)
{
    static const char *const lists[] = {
        "\"abc\", garbage", "\"abc\",\"x", "\"abc\" \"x\"", "\"abc\", *", "W/\"abc\", W/",
    };
    struct http_validators v = validators();
    struct http_file_request rq = {.method = HTTP_FILE_GET};

    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        ck_assert_msg(!http_etag_match(lists[i], strlen(lists[i]), "\"abc\"", 5, true),
                      "%s matched", lists[i]);
        ck_assert_msg(!http_etag_match(lists[i], strlen(lists[i]), "\"abc\"", 5, false),
                      "%s matched", lists[i]);
    }
    /* If-Match: <the file's ETag>, garbage fails (412); If-None-Match is not a 304. */
    FIELD(rq, if_match, E_OK ", garbage");
    ck_assert_int_eq(http_file_preconditions(&rq, &v), 412);
    rq.if_match = NULL;
    FIELD(rq, if_none_match, E_OK ", garbage");
    ck_assert_int_eq(http_file_preconditions(&rq, &v), 200);
}
END_TEST

START_TEST(if_range_needs_a_strong_etag_or_the_exact_date)
{
    struct http_validators v = validators();

    ck_assert(http_if_range_matches(E_OK, strlen(E_OK), &v));
    ck_assert(http_if_range_matches(" " E_OK " ", strlen(E_OK) + 2, &v));
    ck_assert(!http_if_range_matches("W/" E_OK, strlen(E_OK) + 2, &v));
    ck_assert(!http_if_range_matches(E_OTHER, strlen(E_OTHER), &v));
    ck_assert(!http_if_range_matches(E_OK ", " E_OK, strlen(E_OK) * 2 + 2, &v));
    ck_assert(!http_if_range_matches("*", 1, &v));
    ck_assert(http_if_range_matches(D_SAME, strlen(D_SAME), &v));
    ck_assert(!http_if_range_matches(D_AFTER, strlen(D_AFTER), &v));
    ck_assert(!http_if_range_matches(D_BEFORE, strlen(D_BEFORE), &v));
    ck_assert(!http_if_range_matches("garbage", 7, &v));
    ck_assert(!http_if_range_matches("", 0, &v));
}
END_TEST

/* An If-Modified-Since date (format: seconds since the epoch) against a file of mtime m, with
 * the server's clock at now: the status for GET. */
static int ims_status(int64_t date, int64_t m, int64_t now)
{
    struct http_validators v = validators();
    struct http_file_request rq = {.method = HTTP_FILE_GET};
    char d[HTTP_DATE_LEN + 1];

    ck_assert_uint_eq(http_date_format(d, date), HTTP_DATE_LEN);
    v.mtime = m;
    v.now = now;
    FIELD(rq, if_modified_since, d);
    return http_file_preconditions(&rq, &v);
}

START_TEST(if_modified_since_later_than_the_clock_is_ignored)
{
    const int64_t now = T_1994 + DAY * 365 * 30;
    const int64_t m = now - DAY;

    /* RFC 9110 13.1.3: a date later than the server's time is invalid: a 200. */
    ck_assert_int_eq(ims_status(now + DAY, m, now), 200);
    ck_assert_int_eq(ims_status(now + 1, m, now), 200);
    ck_assert_int_eq(ims_status(INT64_C(4070908800), m, now), 200); /* 2099 */
    /* Up to the current second included, the date counts. */
    ck_assert_int_eq(ims_status(now, m, now), 304);
    ck_assert_int_eq(ims_status(m, m, now), 304);
    ck_assert_int_eq(ims_status(m - 1, m, now), 200);
    /* A file modified this very second, asked about this second. */
    ck_assert_int_eq(ims_status(now, now, now), 304);
    /* A file whose mtime is ahead of the clock: never a 304 from a date. */
    ck_assert_int_eq(ims_status(now + DAY, now + DAY, now), 200);
}
END_TEST

START_TEST(if_unmodified_since_compares_whatever_the_clock)
{
    struct http_validators v = validators();
    struct http_file_request rq = {.method = HTTP_FILE_OTHER};
    char d[HTTP_DATE_LEN + 1];

    /* RFC 9110 13.1.4 has no rule for a future date: a file not modified since passes. */
    ck_assert_uint_eq(http_date_format(d, v.now + DAY), HTTP_DATE_LEN);
    FIELD(rq, if_unmodified_since, d);
    ck_assert_int_eq(http_file_preconditions(&rq, &v), 200);
    v.mtime = v.now + 2 * DAY;
    ck_assert_int_eq(http_file_preconditions(&rq, &v), 412);
}
END_TEST

START_TEST(if_range_date_needs_its_second_to_be_over)
{
    struct http_validators v = validators();
    char d[HTTP_DATE_LEN + 1];

    /* Modified in the current second: the file may change again within it (RFC 9110
     * 8.8.2.2), so the date is weak and the whole file goes. */
    v.mtime = v.now;
    ck_assert_uint_eq(http_date_format(d, v.mtime), HTTP_DATE_LEN);
    ck_assert(!http_if_range_matches(d, HTTP_DATE_LEN, &v));
    /* An mtime ahead of the clock, sent back as it was given. */
    v.mtime = v.now + DAY;
    ck_assert_uint_eq(http_date_format(d, v.mtime), HTTP_DATE_LEN);
    ck_assert(!http_if_range_matches(d, HTTP_DATE_LEN, &v));
    /* One second later the date is strong. */
    v.mtime = v.now - 1;
    ck_assert_uint_eq(http_date_format(d, v.mtime), HTTP_DATE_LEN);
    ck_assert(http_if_range_matches(d, HTTP_DATE_LEN, &v));
}
END_TEST

/* ---------------------------------------------------------------- ranges */

struct range_case {
    const char *v;
    uint64_t size;
    int err;
    unsigned n;
    uint64_t r[4][2];
};

static const struct range_case range_cases[] = {
    {"bytes=0-499", 1000, 0, 1, {{0, 499}}},
    {"bytes=500-999", 1000, 0, 1, {{500, 999}}},
    {"bytes=-500", 1000, 0, 1, {{500, 999}}},
    {"bytes=500-", 1000, 0, 1, {{500, 999}}},
    {"bytes=0-0", 1000, 0, 1, {{0, 0}}},
    {"bytes=-1", 1000, 0, 1, {{999, 999}}},
    {"bytes=-2000", 1000, 0, 1, {{0, 999}}},
    {"bytes=0-5000", 1000, 0, 1, {{0, 999}}},
    {"bytes=0-99999999999999999999999", 1000, 0, 1, {{0, 999}}},
    {"BYTES=0-1", 1000, 0, 1, {{0, 1}}},
    {" bytes=0-1 ", 1000, 0, 1, {{0, 1}}},
    {"bytes=0-0,-1", 1000, 0, 2, {{0, 0}, {999, 999}}},
    {"bytes=0-1, 5-6 ,9-", 10, 0, 3, {{0, 1}, {5, 6}, {9, 9}}},
    {"bytes=,0-1,,2-3", 1000, 0, 1, {{0, 3}}}, /* touching ranges coalesce */
    {"bytes=0-10,5-20,21-30", 1000, 0, 1, {{0, 30}}},
    {"bytes=500-600,0-10", 1000, 0, 2, {{0, 10}, {500, 600}}},
    {"bytes=0-,0-,0-", 1000, 0, 1, {{0, 999}}},
    {"bytes=1000-,0-0", 1000, 0, 1, {{0, 0}}}, /* the unsatisfiable part is dropped */
    {"bytes=-0,5-5", 1000, 0, 1, {{5, 5}}},
    /* Unsatisfiable: 416. */
    {"bytes=1000-", 1000, -ERANGE, 0, {{0}}},
    {"bytes=1000-2000", 1000, -ERANGE, 0, {{0}}},
    {"bytes=-0", 1000, -ERANGE, 0, {{0}}},
    {"bytes=0-", 0, -ERANGE, 0, {{0}}},
    {"bytes=-5", 0, -ERANGE, 0, {{0}}},
    {"bytes=18446744073709551615-", 1000, -ERANGE, 0, {{0}}},
    /* Invalid: ignored (200). */
    {"bytes=5-4", 1000, -EBADMSG, 0, {{0}}},
    {"bytes=abc", 1000, -EBADMSG, 0, {{0}}},
    {"bytes=", 1000, -EBADMSG, 0, {{0}}},
    {"bytes=,", 1000, -EBADMSG, 0, {{0}}},
    {"bytes=-", 1000, -EBADMSG, 0, {{0}}},
    {"bytes=1", 1000, -EBADMSG, 0, {{0}}},
    {"bytes=1-2-3", 1000, -EBADMSG, 0, {{0}}},
    {"bytes=0-1;x", 1000, -EBADMSG, 0, {{0}}},
    {"bytes=0 -1", 1000, -EBADMSG, 0, {{0}}},
    {"bytes = 0-1", 1000, -EBADMSG, 0, {{0}}},
    {"items=0-1", 1000, -EBADMSG, 0, {{0}}},
    {"bytes0-1", 1000, -EBADMSG, 0, {{0}}},
    {"", 1000, -EBADMSG, 0, {{0}}},
    {"bytes=+1-2", 1000, -EBADMSG, 0, {{0}}},
    {"bytes=0x1-2", 1000, -EBADMSG, 0, {{0}}},
    /* Too many: ignored. */
    {"bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,20-20,22-22,24-24,26-26,28-28,"
     "30-30,32-32",
     1000,
     -E2BIG,
     0,
     {{0}}},
};

START_TEST(parses_ranges)
{
    const struct range_case *c = &range_cases[_i];
    struct http_ranges rs;
    int rc = http_range_parse(c->v, strlen(c->v), c->size, &rs);

    ck_assert_msg(rc == c->err, "\"%s\": got %d, want %d", c->v, rc, c->err);
    if (rc != 0)
        return;
    ck_assert_uint_eq(rs.n, c->n);
    for (unsigned i = 0; i < rs.n; i++) {
        ck_assert_uint_eq(rs.r[i].first, c->r[i][0]);
        ck_assert_uint_eq(rs.r[i].last, c->r[i][1]);
    }
}
END_TEST

START_TEST(sixteen_ranges_are_accepted)
{
    char v[256] = "bytes=";
    struct http_ranges rs;

    for (int i = 0; i < HTTP_RANGE_MAX; i++)
        snprintf(v + strlen(v), sizeof(v) - strlen(v), "%s%d-%d", i ? "," : "", i * 10, i * 10);
    ck_assert_int_eq(http_range_parse(v, strlen(v), 1000, &rs), 0);
    ck_assert_uint_eq(rs.n, HTTP_RANGE_MAX);
}
END_TEST

START_TEST(range_last_below_first_is_compared_past_uint64)
{
    static const struct {
        const char *v;
        int err;
    } cases[] = {
        /* Both saturate at UINT64_MAX; the digits still say last < first. */
        {"bytes=99999999999999999999-99999999999999999998", -EBADMSG},
        {"bytes=100000000000000000000-99999999999999999999", -EBADMSG},
        /* First above UINT64_MAX, last exactly UINT64_MAX. */
        {"bytes=18446744073709551616-18446744073709551615", -EBADMSG},
        /* Valid, and past any file: unsatisfiable. */
        {"bytes=99999999999999999998-99999999999999999999", -ERANGE},
        {"bytes=99999999999999999999-99999999999999999999", -ERANGE},
        {"bytes=18446744073709551615-18446744073709551616", -ERANGE},
        {"bytes=0099999999999999999999-99999999999999999999", -ERANGE},
        {"bytes=99999999999999999999-000999999999999999999999", -ERANGE},
        /* Last saturated, first not: last >= first. */
        {"bytes=5-99999999999999999999", 0},
    };
    struct http_validators v = validators();
    struct http_file_request rq = {.method = HTTP_FILE_GET};
    struct http_file_plan p;
    struct http_ranges rs;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = http_range_parse(cases[i].v, strlen(cases[i].v), 100, &rs);

        ck_assert_msg(rc == cases[i].err, "\"%s\": got %d, want %d", cases[i].v, rc, cases[i].err);
    }
    ck_assert_uint_eq(rs.n, 1);
    ck_assert_uint_eq(rs.r[0].first, 5);
    ck_assert_uint_eq(rs.r[0].last, 99);
    /* An invalid Range is ignored: the whole file, not 416. */
    FIELD(rq, range, "bytes=99999999999999999999-99999999999999999998");
    http_file_plan(&p, &rq, &v, 10, 1);
    ck_assert_int_eq(p.status, 200);
    ck_assert_uint_eq(p.content_length, 100);
}
END_TEST

START_TEST(formats_content_range)
{
    char buf[HTTP_CONTENT_RANGE_MAX];
    struct http_range r = {.first = 0, .last = 499};
    struct http_range big = {.first = UINT64_MAX - 1, .last = UINT64_MAX - 1};

    ck_assert_uint_eq(http_content_range_format(buf, sizeof(buf), &r, 1234), 16);
    ck_assert_str_eq(buf, "bytes 0-499/1234");
    http_content_range_format(buf, sizeof(buf), NULL, 1234);
    ck_assert_str_eq(buf, "bytes */1234");
    ck_assert_uint_gt(http_content_range_format(buf, sizeof(buf), &big, UINT64_MAX), 0);
    ck_assert_uint_eq(http_content_range_format(buf, 8, &r, 1234), 0);
}
END_TEST

/* ---------------------------------------------------------------- multipart */

/* Lays the multipart body out for real; returns its length. */
static size_t lay_out(char *out, size_t cap, const struct http_ranges *rs, const char *body,
                      uint64_t size, const char *boundary, const char *ctype)
{
    size_t o = 0;

    for (unsigned i = 0; i < rs->n; i++) {
        size_t n = http_multipart_part_header(out + o, cap - o, boundary, ctype, strlen(ctype),
                                              &rs->r[i], size);
        size_t len = rs->r[i].last - rs->r[i].first + 1;

        ck_assert_uint_gt(n, 0);
        ck_assert_uint_le(n, HTTP_MULTIPART_PART_MAX(strlen(ctype)));
        o += n;
        ck_assert_uint_le(o + len, cap);
        memcpy(out + o, body + rs->r[i].first, len);
        o += len;
    }
    o += http_multipart_trailer(out + o, cap - o, boundary);
    return o;
}

START_TEST(multipart_length_is_exact)
{
    static char body[20000];
    static char out[40000];
    const char *ctype = "text/html; charset=utf-8";
    const char *specs[] = {"bytes=0-0,-1", "bytes=0-9,20-29,100-", "bytes=1-1,3-3,5-5,7-7,9-9",
                           "bytes=0-99,9000-9999,19990-"};
    char boundary[HTTP_BOUNDARY_LEN + 1];

    for (size_t i = 0; i < sizeof(body); i++)
        body[i] = (char)('a' + i % 26);
    http_multipart_boundary(boundary, 42);
    ck_assert_uint_eq(strlen(boundary), HTTP_BOUNDARY_LEN);
    for (size_t k = 0; k < sizeof(specs) / sizeof(specs[0]); k++) {
        struct http_ranges rs;
        size_t n;

        ck_assert_int_eq(http_range_parse(specs[k], strlen(specs[k]), sizeof(body), &rs), 0);
        ck_assert_uint_gt(rs.n, 1);
        n = lay_out(out, sizeof(out), &rs, body, sizeof(body), boundary, ctype);
        ck_assert_uint_eq(http_multipart_length(&rs, sizeof(body), strlen(ctype)), n);
    }
}
END_TEST

START_TEST(multipart_length_saturates_instead_of_wrapping)
{
    struct http_ranges rs = {.n = 2, .r = {{0, 0}, {2, UINT64_MAX - 1}}};
    struct http_validators v = validators();
    struct http_file_request rq = {.method = HTTP_FILE_GET};
    struct http_file_plan p;

    ck_assert_uint_eq(http_multipart_length(&rs, UINT64_MAX, 10), UINT64_MAX);
    ck_assert_uint_eq(http_multipart_length(&rs, UINT64_MAX, SIZE_MAX), UINT64_MAX);
    rs.r[1].last = 2;
    ck_assert_uint_eq(http_multipart_length(&rs, 3, SIZE_MAX), UINT64_MAX);
    /* The largest off_t still gets its exact length. */
    rs.r[1].last = INT64_MAX - 1;
    ck_assert_uint_lt(http_multipart_length(&rs, INT64_MAX, 10), UINT64_MAX);
    /* A plan that cannot state its multipart length ignores the Range. */
    v.size = UINT64_MAX;
    FIELD(rq, range, "bytes=0-0,2-");
    http_file_plan(&p, &rq, &v, 10, 1);
    ck_assert_int_eq(p.status, 200);
    ck_assert_uint_eq(p.content_length, UINT64_MAX);
    ck_assert_uint_eq(p.ranges.n, 0);
    ck_assert_str_eq(p.boundary, "");
}
END_TEST

START_TEST(multipart_part_header_and_trailer_text)
{
    char out[256];
    struct http_range r = {.first = 10, .last = 19};
    const char *b = "0123456789abcdef0123";
    size_t n = http_multipart_part_header(out, sizeof(out), b, "image/png", 9, &r, 100);

    out[n] = '\0';
    ck_assert_str_eq(out, "\r\n--0123456789abcdef0123\r\nContent-Type: image/png\r\n"
                          "Content-Range: bytes 10-19/100\r\n\r\n");
    ck_assert_uint_eq(http_multipart_part_header(out, n - 1, b, "image/png", 9, &r, 100), 0);
    n = http_multipart_trailer(out, sizeof(out), b);
    ck_assert_uint_eq(n, HTTP_MULTIPART_TRAILER_LEN);
    out[n] = '\0';
    ck_assert_str_eq(out, "\r\n--0123456789abcdef0123--\r\n");
    ck_assert_uint_eq(http_multipart_trailer(out, n - 1, b), 0);
}
END_TEST

START_TEST(boundaries_differ_by_seed)
{
    char a[HTTP_BOUNDARY_LEN + 1];
    char b[HTTP_BOUNDARY_LEN + 1];

    http_multipart_boundary(a, 1);
    http_multipart_boundary(b, 2);
    ck_assert_str_ne(a, b);
    ck_assert_uint_eq(strspn(a, "0123456789abcdef"), HTTP_BOUNDARY_LEN);
}
END_TEST

/* ---------------------------------------------------------------- content coding */

START_TEST(accept_encoding_decides_gzip)
{
    static const struct {
        const char *v;
        bool gzip;
    } cases[] = {
        {"gzip", true},
        {"GZIP", true},
        {"x-gzip", true},
        {"gzip, deflate, br", true},
        {"br, gzip;q=0.5", true},
        {"gzip ; q=0.5", true},
        {"gzip;Q=1.0", true},
        {"gzip;q=0.001", true},
        {"gzip;q=1", true},
        {"*", true},
        {"deflate, *;q=0.1", true},
        {"gzip;q=0", false},
        {"gzip;q=0.0", false},
        {"gzip;q=0.000", false},
        {"gzip;q=0, *", false},
        {"*, gzip;q=0", false},
        {"*;q=0", false},
        {"identity", false},
        {"deflate, br", false},
        {"", false},
        {"gzipx", false},
        {"gzip;q=2", false},
        {"gzip;q=1.5", false},
        {"gzip;q=", false},
        {"gzip;", false},
        {"gzip;q=0.5x", false},
        {"gzip deflate", false},
        {"gzip;level=9", true},
        {",, gzip ,", true},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(http_accepts_gzip(cases[i].v, strlen(cases[i].v)) == cases[i].gzip,
                      "\"%s\" should %saccept gzip", cases[i].v, cases[i].gzip ? "" : "not ");
    ck_assert(!http_accepts_gzip(NULL, 0));
}
END_TEST

/* ---------------------------------------------------------------- plans */

START_TEST(plan_gives_each_status_and_length)
{
    struct http_validators v = validators();
    struct http_file_plan p;
    struct http_file_request rq = {.method = HTTP_FILE_GET};
    size_t ct = strlen("text/plain; charset=utf-8");

    http_file_plan(&p, &rq, &v, ct, 1);
    ck_assert_int_eq(p.status, 200);
    ck_assert_uint_eq(p.content_length, 100);

    FIELD(rq, range, "bytes=10-19");
    http_file_plan(&p, &rq, &v, ct, 1);
    ck_assert_int_eq(p.status, 206);
    ck_assert_uint_eq(p.ranges.n, 1);
    ck_assert_uint_eq(p.content_length, 10);
    ck_assert_str_eq(p.boundary, "");

    FIELD(rq, range, "bytes=0-0,-1");
    http_file_plan(&p, &rq, &v, ct, 1);
    ck_assert_int_eq(p.status, 206);
    ck_assert_uint_eq(p.ranges.n, 2);
    ck_assert_uint_eq(strlen(p.boundary), HTTP_BOUNDARY_LEN);
    ck_assert_uint_eq(p.content_length, http_multipart_length(&p.ranges, 100, ct));

    FIELD(rq, range, "bytes=100-");
    http_file_plan(&p, &rq, &v, ct, 1);
    ck_assert_int_eq(p.status, 416);
    ck_assert_uint_eq(p.content_length, 0);

    FIELD(rq, range, "bytes=oops");
    http_file_plan(&p, &rq, &v, ct, 1);
    ck_assert_int_eq(p.status, 200);
    ck_assert_uint_eq(p.content_length, 100);
    ck_assert_uint_eq(p.ranges.n, 0);

    /* If-Range that does not match: the whole file. */
    FIELD(rq, range, "bytes=10-19");
    FIELD(rq, if_range, E_OTHER);
    http_file_plan(&p, &rq, &v, ct, 1);
    ck_assert_int_eq(p.status, 200);
    ck_assert_uint_eq(p.content_length, 100);
    FIELD(rq, if_range, E_OK);
    http_file_plan(&p, &rq, &v, ct, 1);
    ck_assert_int_eq(p.status, 206);
    FIELD(rq, if_range, D_SAME);
    http_file_plan(&p, &rq, &v, ct, 1);
    ck_assert_int_eq(p.status, 206);

    /* HEAD ignores Range. */
    rq.method = HTTP_FILE_HEAD;
    http_file_plan(&p, &rq, &v, ct, 1);
    ck_assert_int_eq(p.status, 200);
    ck_assert_uint_eq(p.content_length, 100);

    /* Preconditions come first. */
    rq.method = HTTP_FILE_GET;
    FIELD(rq, if_none_match, E_OK);
    http_file_plan(&p, &rq, &v, ct, 1);
    ck_assert_int_eq(p.status, 304);
    ck_assert_uint_eq(p.content_length, 0);
    rq.if_none_match = NULL;
    FIELD(rq, if_match, E_OTHER);
    http_file_plan(&p, &rq, &v, ct, 1);
    ck_assert_int_eq(p.status, 412);
}
END_TEST

/* Every entity field, in the head's order; absent ones left out; a small buffer cut, not
 * overrun. */
START_TEST(entity_fields_are_written_in_order_and_cut_at_the_end)
{
    const struct http_entity all = {
        .ctype = "text/plain",
        .ctype_len = 10,
        .content_length = 1234,
        .validators = "\r\nETag: \"x\"",
        .validators_len = 11,
        .accept_ranges = true,
        .content_range = "bytes 0-1/1234",
        .content_range_len = 14,
        .gzip = true,
        .vary = true,
    };
    const struct http_entity bare = {.content_length = 0};
    char buf[512];
    struct httpd_out o = {.p = buf, .end = buf + sizeof(buf)};

    http_entity_put(&o, &all);
    *o.p = '\0';
    ck_assert_str_eq(buf, "\r\nContent-Type: text/plain\r\nContent-Length: 1234\r\nETag: \"x\""
                          "\r\nAccept-Ranges: bytes\r\nContent-Range: bytes 0-1/1234"
                          "\r\nContent-Encoding: gzip\r\nVary: Accept-Encoding");
    o = (struct httpd_out){.p = buf, .end = buf + sizeof(buf)};
    http_entity_put(&o, &bare);
    *o.p = '\0';
    ck_assert_str_eq(buf, "\r\nContent-Length: 0");
    memset(buf, '#', sizeof(buf));
    o = (struct httpd_out){.p = buf, .end = buf + 20};
    http_entity_put(&o, &all);
    ck_assert_ptr_eq(o.p, buf + 20);
    ck_assert_mem_eq(buf, "\r\nContent-Type: text", 20);
    ck_assert_int_eq(buf[20], '#');
}
END_TEST

Suite *http_file_suite(void);
Suite *http_file_suite(void)
{
    Suite *s = suite_create("http_file");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, etag_is_strong_mtime_and_size_in_hex);
    tcase_add_test(tc, formats_imf_fixdate);
    tcase_add_test(tc, parses_the_three_http_date_formats);
    tcase_add_test(tc, rfc850_two_digit_years_are_not_far_in_the_future);
    tcase_add_test(tc, leap_second_at_the_end_of_9999_is_refused);
    tcase_add_test(tc, format_and_parse_round_trip);
    tcase_add_test(tc, entity_tags_compare_weakly_or_strongly);
    tcase_add_loop_test(tc, preconditions_follow_rfc9110_order, 0,
                        (int)(sizeof(cond_cases) / sizeof(cond_cases[0])));
    tcase_add_test(tc, etag_list_with_a_malformed_tail_matches_nothing);
    tcase_add_test(tc, if_range_needs_a_strong_etag_or_the_exact_date);
    tcase_add_test(tc, if_modified_since_later_than_the_clock_is_ignored);
    tcase_add_test(tc, if_unmodified_since_compares_whatever_the_clock);
    tcase_add_test(tc, if_range_date_needs_its_second_to_be_over);
    tcase_add_loop_test(tc, parses_ranges, 0, (int)(sizeof(range_cases) / sizeof(range_cases[0])));
    tcase_add_test(tc, sixteen_ranges_are_accepted);
    tcase_add_test(tc, range_last_below_first_is_compared_past_uint64);
    tcase_add_test(tc, formats_content_range);
    tcase_add_test(tc, multipart_length_is_exact);
    tcase_add_test(tc, multipart_length_saturates_instead_of_wrapping);
    tcase_add_test(tc, multipart_part_header_and_trailer_text);
    tcase_add_test(tc, boundaries_differ_by_seed);
    tcase_add_test(tc, accept_encoding_decides_gzip);
    tcase_add_test(tc, plan_gives_each_status_and_length);
    tcase_add_test(tc, entity_fields_are_written_in_order_and_cut_at_the_end);
    suite_add_tcase(s, tc);
    return s;
}

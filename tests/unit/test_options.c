/*
 * test_options.c - The programs' table-driven options (apps/common/options.c):
 * each kind into fields of its size, ranges at their bounds, seconds with
 * fractions, flags with and without yes/no, choices and the list an unknown
 * one gets, "--name=value" against "--name value", a missing value, an
 * unknown option, --help/--version handed back, special options through the
 * callback, and --help's two columns with continuation lines.
 */
#include "../../apps/common/options.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cfg {
    int threads;
    unsigned max;
    uint64_t big;
    uint64_t timeout_ms;
    uint64_t short_ms;
    uint64_t delay_us;
    bool verbose;
    const char *root;
    const char *color;
    const char *listen[4];
    unsigned nlisten;
};

static const char *const *colors(void)
{
    static const char *const list[] = {"red", "green", "blue", NULL};

    return list;
}

/* Repeatable, refuses "bad", counts the calls in *arg. */
static int special(void *obj, const struct opts_def *d, const char *v, void *arg,
                   struct opts_err *e)
{
    struct cfg *c = obj;

    ck_assert_str_eq(d->name, "listen");
    if (arg != NULL)
        ++*(int *)arg;
    if (strcmp(v, "bad") == 0)
        return opts_fail(e, "bad address '%s'", v);
    if (c->nlisten == 4)
        return opts_fail(e, "at most 4 --listen");
    c->listen[c->nlisten++] = v;
    return 0;
}

#define F(f) OPTS_FIELD(struct cfg, f)
static const struct opts_def defs[] = {
    {.name = "threads",
     .kind = OPTS_NUM,
     F(threads),
     .min = 1,
     .max = 4096,
     .arg = "N",
     .help = "worker threads"},
    {.name = "max", .kind = OPTS_NUM, F(max), .min = 0, .max = UINT32_MAX, .arg = "N", .help = "m"},
    {.name = "big", .kind = OPTS_NUM, F(big), .min = 0, .max = UINT64_MAX, .arg = "N", .help = "b"},
    {.name = "timeout",
     .kind = OPTS_SECONDS,
     .scope = 7,
     F(timeout_ms),
     .arg = "SECS",
     .help = "idle\nthen closed\n(default 5)"},
    {.name = "short", .kind = OPTS_SECONDS, F(short_ms), .max = 10, .arg = "SECS", .help = "s"},
    {OPTS_DEF_SECONDS_US("delay", struct cfg, delay_us, 1, "d")},
    {.name = "verbose", .kind = OPTS_FLAG, F(verbose), .help = "say more"},
    {.name = "root", .kind = OPTS_STRING, F(root), .arg = "DIR", .help = "document root"},
    {.name = "color",
     .kind = OPTS_CHOICE,
     F(color),
     .choices = colors,
     .help_lists = true,
     .arg = "NAME",
     .help = "(default red)"},
    {.name = "listen", .kind = OPTS_SPECIAL, .arg = "ADDR", .help = "repeatable"},
    {.name = "a-very-long-option-name-indeed",
     .kind = OPTS_STRING,
     F(root),
     .arg = "X",
     .help = "wide"},
};

static const struct opts_table table = {
    .defs = defs,
    .ndefs = sizeof(defs) / sizeof(defs[0]),
    .special = special,
    .width = 24,
    .version = true,
};

/* opts_parse over the words of args (NULL-terminated), into *c (zeroed). */
static int parse(struct cfg *c, struct opts_err *e, const char *const *args)
{
    char *argv[32] = {"prog"};
    int argc = 1;

    memset(c, 0, sizeof(*c));
    memset(e, 0, sizeof(*e));
    while (args[argc - 1] != NULL) {
        ck_assert_int_lt(argc, 31);
        argv[argc] = (char *)args[argc - 1];
        argc++;
    }
    return opts_parse(&table, c, argc, argv, NULL, e);
}

#define PARSE(c, e, ...) parse(c, e, (const char *const[]){__VA_ARGS__, NULL})

START_TEST(numbers_go_into_fields_of_their_size_within_range)
{
    struct cfg c;
    struct opts_err e;

    ck_assert_int_eq(
        PARSE(&c, &e, "--threads", "4096", "--max=4294967295", "--big", "18446744073709551615"), 0);
    ck_assert_int_eq(c.threads, 4096);
    ck_assert_uint_eq(c.max, UINT32_MAX);
    ck_assert_uint_eq(c.big, UINT64_MAX);
    ck_assert_int_eq(PARSE(&c, &e, "--threads=1"), 0);
    ck_assert_int_eq(c.threads, 1);

    ck_assert_int_eq(PARSE(&c, &e, "--threads", "0"), -EINVAL);
    ck_assert_str_eq(e.msg, "--threads: '0' is not a number in 1..4096");
    ck_assert_int_eq(c.threads, 0);
    ck_assert_int_eq(PARSE(&c, &e, "--threads", "4097"), -EINVAL);
    ck_assert_int_eq(PARSE(&c, &e, "--big", "18446744073709551616"), -EINVAL);
    ck_assert_int_eq(PARSE(&c, &e, "--threads", "4x"), -EINVAL);
    ck_assert_int_eq(PARSE(&c, &e, "--threads", "many"), -EINVAL);
    ck_assert_str_eq(e.msg, "--threads wants a number, not 'many'");
    ck_assert_int_eq(PARSE(&c, &e, "--threads", "-1"), -EINVAL);
    ck_assert_int_eq(PARSE(&c, &e, "--threads", " 2"), -EINVAL);
}
END_TEST

START_TEST(seconds_take_fractions_into_milliseconds)
{
    struct cfg c;
    struct opts_err e;

    ck_assert_int_eq(PARSE(&c, &e, "--timeout", "2.5"), 0);
    ck_assert_uint_eq(c.timeout_ms, 2500);
    ck_assert_int_eq(PARSE(&c, &e, "--timeout=.25"), 0);
    ck_assert_uint_eq(c.timeout_ms, 250);
    /* Below a millisecond is one, never 0 (the services' "default"). */
    ck_assert_int_eq(PARSE(&c, &e, "--timeout", "0.0001"), 0);
    ck_assert_uint_eq(c.timeout_ms, 1);
    ck_assert_int_eq(PARSE(&c, &e, "--timeout", "31536000"), 0);
    ck_assert_uint_eq(c.timeout_ms, 31536000000ull);
    ck_assert_int_eq(PARSE(&c, &e, "--timeout", "31536001"), -EINVAL);

    ck_assert_int_eq(PARSE(&c, &e, "--short", "10"), 0);
    ck_assert_uint_eq(c.short_ms, 10000);
    ck_assert_int_eq(PARSE(&c, &e, "--short", "10.5"), -EINVAL);

    ck_assert_int_eq(PARSE(&c, &e, "--timeout", "0"), -EINVAL);
    ck_assert_str_eq(e.msg, "--timeout: '0' is not a positive number of seconds");
    ck_assert_int_eq(PARSE(&c, &e, "--timeout", "5s"), -EINVAL);
    ck_assert_int_eq(PARSE(&c, &e, "--timeout", "-1"), -EINVAL);
    ck_assert_str_eq(e.msg, "--timeout wants seconds, not '-1'");
    ck_assert_int_eq(PARSE(&c, &e, "--timeout", "inf"), -EINVAL);
    ck_assert_int_eq(PARSE(&c, &e, "--timeout", "nan"), -EINVAL);
}
END_TEST

START_TEST(seconds_us_take_fractions_into_microseconds_and_zero)
{
    struct cfg c;
    struct opts_err e;

    ck_assert_int_eq(PARSE(&c, &e, "--delay", "0.0005"), 0);
    ck_assert_uint_eq(c.delay_us, 500);
    ck_assert_int_eq(PARSE(&c, &e, "--delay=1"), 0);
    ck_assert_uint_eq(c.delay_us, 1000000);
    /* 0 is a value here (no delay), not the default. */
    ck_assert_int_eq(PARSE(&c, &e, "--delay", "0"), 0);
    ck_assert_uint_eq(c.delay_us, 0);
    ck_assert_int_eq(PARSE(&c, &e, "--delay", "1.5"), -EINVAL);
    ck_assert_str_eq(e.msg, "--delay: '1.5' is more than 1 seconds");
    ck_assert_int_eq(PARSE(&c, &e, "--delay", "-0"), -EINVAL);
    ck_assert_int_eq(PARSE(&c, &e, "--delay", "1ms"), -EINVAL);
    ck_assert_int_eq(PARSE(&c, &e, "--delay", "nan"), -EINVAL);
}
END_TEST

START_TEST(flags_take_no_value_or_yes_no)
{
    struct cfg c;
    struct opts_err e;

    ck_assert_int_eq(PARSE(&c, &e, "--verbose"), 0);
    ck_assert(c.verbose);
    ck_assert_int_eq(PARSE(&c, &e, "--verbose=no"), 0);
    ck_assert(!c.verbose);
    ck_assert_int_eq(PARSE(&c, &e, "--verbose=yes", "--verbose=false"), 0);
    ck_assert(!c.verbose);
    ck_assert_int_eq(PARSE(&c, &e, "--verbose=true"), 0);
    ck_assert(c.verbose);
    ck_assert_int_eq(PARSE(&c, &e, "--verbose=0", "--verbose=1"), 0);
    ck_assert(c.verbose);
    ck_assert_int_eq(PARSE(&c, &e, "--verbose=maybe"), -EINVAL);
    ck_assert_str_eq(e.msg, "--verbose takes no value, or yes/no (got 'maybe')");
    /* A flag does not swallow the next word: that one is an option of its own. */
    ck_assert_int_eq(PARSE(&c, &e, "--verbose", "no"), -EINVAL);
    ck_assert_str_eq(e.msg, "unknown option 'no'");
}
END_TEST

START_TEST(strings_and_choices)
{
    struct cfg c;
    struct opts_err e;

    ck_assert_int_eq(PARSE(&c, &e, "--root", "/srv", "--color=green"), 0);
    ck_assert_str_eq(c.root, "/srv");
    ck_assert_str_eq(c.color, "green");
    ck_assert_int_eq(PARSE(&c, &e, "--root="), -EINVAL);
    ck_assert_str_eq(e.msg, "--root needs a value");
    ck_assert_int_eq(PARSE(&c, &e, "--color", "pink"), -EINVAL);
    ck_assert_str_eq(e.msg, "unknown --color 'pink' (red, green, blue)");
    ck_assert_ptr_null(c.color);
}
END_TEST

START_TEST(name_equals_value_and_name_space_value)
{
    struct cfg c;
    struct opts_err e;

    /* The value after '=' may itself hold '=' or start with "--". */
    ck_assert_int_eq(PARSE(&c, &e, "--root=a=b"), 0);
    ck_assert_str_eq(c.root, "a=b");
    ck_assert_int_eq(PARSE(&c, &e, "--root", "--threads"), 0);
    ck_assert_str_eq(c.root, "--threads");
    ck_assert_int_eq(c.threads, 0);
    /* The last one wins. */
    ck_assert_int_eq(PARSE(&c, &e, "--threads", "2", "--threads=3"), 0);
    ck_assert_int_eq(c.threads, 3);
}
END_TEST

START_TEST(missing_value_and_unknown_option)
{
    struct cfg c;
    struct opts_err e;

    ck_assert_int_eq(PARSE(&c, &e, "--threads"), -EINVAL);
    ck_assert_str_eq(e.msg, "--threads needs a value");
    ck_assert_int_eq(PARSE(&c, &e, "--bogus"), -EINVAL);
    ck_assert_str_eq(e.msg, "unknown option '--bogus'");
    ck_assert_int_eq(PARSE(&c, &e, "--bogus=1"), -EINVAL);
    ck_assert_str_eq(e.msg, "unknown option '--bogus=1'");
    /* A prefix of a name is not the option. */
    ck_assert_int_eq(PARSE(&c, &e, "--thread", "2"), -EINVAL);
    ck_assert_int_eq(PARSE(&c, &e, "threads"), -EINVAL);
    ck_assert_str_eq(e.msg, "unknown option 'threads'");
    ck_assert_int_eq(PARSE(&c, &e, "-t"), -EINVAL);
}
END_TEST

START_TEST(help_and_version_go_back_to_the_caller)
{
    struct opts_table nover = table;
    char *argv[] = {"prog", "--version"};
    struct cfg c;
    struct opts_err e;

    ck_assert_int_eq(PARSE(&c, &e, "--threads", "2", "--help", "--bogus"), OPTS_HELP);
    ck_assert_int_eq(PARSE(&c, &e, "-h"), OPTS_HELP);
    ck_assert_int_eq(PARSE(&c, &e, "--version"), OPTS_VERSION);
    nover.version = false;
    ck_assert_int_eq(opts_parse(&nover, &c, 2, argv, NULL, &e), -EINVAL);
    ck_assert_str_eq(e.msg, "unknown option '--version'");
}
END_TEST

START_TEST(special_options_reach_the_callback)
{
    char *argv[] = {"prog", "--listen", "a", "--listen=b", "--listen", "bad"};
    struct cfg c;
    struct opts_err e;
    int calls = 0;

    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(opts_parse(&table, &c, 6, argv, &calls, &e), -EINVAL);
    ck_assert_int_eq(calls, 3);
    ck_assert_uint_eq(c.nlisten, 2);
    ck_assert_str_eq(c.listen[0], "a");
    ck_assert_str_eq(c.listen[1], "b");
    ck_assert_str_eq(e.msg, "bad address 'bad'");
    ck_assert_int_eq(PARSE(&c, &e, "--listen"), -EINVAL);
    ck_assert_str_eq(e.msg, "--listen needs a value");
}
END_TEST

START_TEST(opts_set_and_find_serve_a_config_file)
{
    const struct opts_def *d = opts_find(&table, "timeoutXYZ", 7);
    struct cfg c = {0};
    struct opts_err e;

    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d->scope, 7);
    ck_assert_ptr_null(opts_find(&table, "timeo", 5));
    ck_assert_int_eq(opts_set(&table, &c, d, "3", NULL, &e), 0);
    ck_assert_uint_eq(c.timeout_ms, 3000);
    ck_assert_int_eq(opts_set(&table, &c, d, NULL, NULL, &e), -EINVAL);
    ck_assert_str_eq(e.msg, "--timeout needs a value");
    ck_assert_uint_eq(c.timeout_ms, 3000);
}
END_TEST

START_TEST(help_has_two_columns_and_continues_under_the_help)
{
    static const char want[] = "  --threads N              worker threads\n"
                               "  --max N                  m\n"
                               "  --big N                  b\n"
                               "  --timeout SECS           idle\n"
                               "                           then closed\n"
                               "                           (default 5)\n"
                               "  --short SECS             s\n"
                               "  --delay SECS             d\n"
                               "  --verbose                say more\n"
                               "  --root DIR               document root\n"
                               "  --color NAME             red, green, blue (default red)\n"
                               "  --listen ADDR            repeatable\n"
                               "  --a-very-long-option-name-indeed X  wide\n"
                               "  --help                   this text\n"
                               "  --version                the version\n";
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    ck_assert_ptr_nonnull(f);
    opts_print_help(f, &table);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_str_eq(buf, want);
    free(buf);
}
END_TEST

/* The same options with the texts around them, for a main. */
static const struct opts_table main_table = {
    OPTS_TABLE(defs, special, 24),
    .prog = "prog",
    .usage = "usage: prog [options]\n",
    .footer = "Signals: none.\n",
};

START_TEST(help_puts_usage_before_and_footer_after)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    ck_assert_ptr_nonnull(f);
    opts_print_help(f, &main_table);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_msg(strncmp(buf, "usage: prog [options]\n  --threads N ", 36) == 0, "%s", buf);
    ck_assert_msg(strstr(buf, "  --help                   this text\nSignals: none.\n") != NULL &&
                      buf[len - 1] == '\n' && strstr(buf, "--version") == NULL,
                  "%s", buf);
    free(buf);
}
END_TEST

/* opts_parse_or_exit in the forked test: these exit with their status. */
START_TEST(parse_or_exit_exits_0_for_help)
{
    char *argv[] = {"prog", "--threads", "2", "--help"};
    struct cfg c = {0};

    ck_assert_ptr_nonnull(freopen("/dev/null", "w", stdout));
    opts_parse_or_exit(&main_table, &c, 4, argv, NULL);
    ck_abort_msg("--help returned");
}
END_TEST

START_TEST(parse_or_exit_exits_2_for_a_bad_flag)
{
    char *argv[] = {"prog", "--threads", "many"};
    struct cfg c = {0};

    ck_assert_ptr_nonnull(freopen("/dev/null", "w", stderr));
    opts_parse_or_exit(&main_table, &c, 3, argv, NULL);
    ck_abort_msg("a bad flag returned");
}
END_TEST

START_TEST(parse_or_exit_returns_with_the_options_set)
{
    char *argv[] = {"prog", "--threads", "2", "--verbose"};
    struct cfg c = {0};

    opts_parse_or_exit(&main_table, &c, 4, argv, NULL);
    ck_assert_int_eq(c.threads, 2);
    ck_assert(c.verbose);
}
END_TEST

START_TEST(log_level_names_the_levels)
{
    enum cr_log_level level = CR_LOG_INFO;
    struct opts_err e;

    ck_assert_int_eq(opts_set_log_level("debug", &level, &e), 0);
    ck_assert_int_eq(level, CR_LOG_DEBUG);
    ck_assert_int_eq(opts_set_log_level("loud", &level, &e), -EINVAL);
    ck_assert_str_eq(e.msg, "unknown log level 'loud' (error, warn, info, debug)");
    ck_assert_int_eq(level, CR_LOG_DEBUG);
}
END_TEST

START_TEST(join_cuts_a_list_that_does_not_fit)
{
    char buf[12];

    ck_assert_str_eq(opts_join(colors(), buf, sizeof(buf)), "red, green");
    ck_assert_str_eq(opts_join(colors(), buf, 4), "red");
}
END_TEST

Suite *options_suite(void);
Suite *options_suite(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("parse");

    tcase_add_test(tc, numbers_go_into_fields_of_their_size_within_range);
    tcase_add_test(tc, seconds_take_fractions_into_milliseconds);
    tcase_add_test(tc, seconds_us_take_fractions_into_microseconds_and_zero);
    tcase_add_test(tc, flags_take_no_value_or_yes_no);
    tcase_add_test(tc, strings_and_choices);
    tcase_add_test(tc, name_equals_value_and_name_space_value);
    tcase_add_test(tc, missing_value_and_unknown_option);
    tcase_add_test(tc, help_and_version_go_back_to_the_caller);
    tcase_add_test(tc, special_options_reach_the_callback);
    tcase_add_test(tc, opts_set_and_find_serve_a_config_file);
    tcase_add_test(tc, help_has_two_columns_and_continues_under_the_help);
    tcase_add_test(tc, help_puts_usage_before_and_footer_after);
    tcase_add_exit_test(tc, parse_or_exit_exits_0_for_help, 0);
    tcase_add_exit_test(tc, parse_or_exit_exits_2_for_a_bad_flag, OPTS_EXIT_USAGE);
    tcase_add_test(tc, parse_or_exit_returns_with_the_options_set);
    tcase_add_test(tc, log_level_names_the_levels);
    tcase_add_test(tc, join_cuts_a_list_that_does_not_fit);
    suite_add_tcase(s, tc);
    return s;
}

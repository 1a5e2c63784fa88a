/*
 * test_u64_table.c - u64_table.h, the intrusive table keyed by 64-bit
 * integers that the session manager, the bound pool and the OLTP gateway
 * share: insert, find, remove, growth and its bound, collisions in one
 * chain, duplicate keys, the walk (with removal as it goes), and how keys
 * that are not random spread over the buckets.
 */
#include <cabrank/u64_table.h>

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#define TEST_TIMEOUT 10

struct item {
    int tag;
    struct cr_u64_node node;
};

static struct item *item_of(struct cr_u64_node *n)
{
    return n == NULL ? NULL : cr_u64_table_entry(n, struct item, node);
}

static struct item *find(const struct cr_u64_table *t, uint64_t key)
{
    return item_of(cr_u64_table_find(t, key));
}

/* The longest chain, read from the table's buckets. */
static size_t longest_chain(const struct cr_u64_table *t)
{
    size_t most = 0;

    for (size_t b = 0; b < ((size_t)1 << t->bits); b++) {
        size_t len = 0;

        for (struct cr_u64_node *n = t->buckets[b]; n != NULL; n = n->next)
            len++;
        if (len > most)
            most = len;
    }
    return most;
}

START_TEST(init_refuses_bad_sizes)
{
    struct cr_u64_table t;

    ck_assert_int_eq(cr_u64_table_init(&t, 0, 4), -EINVAL);
    ck_assert_int_eq(cr_u64_table_init(&t, 5, 4), -EINVAL);
    ck_assert_int_eq(cr_u64_table_init(&t, 4, CR_U64_TABLE_MAX_BITS + 1), -EINVAL);
    cr_u64_table_fini(&t); /* a refused init leaves a table fini takes */
    ck_assert_int_eq(cr_u64_table_init(&t, 4, CR_U64_TABLE_MAX_BITS), 0);
    ck_assert_uint_eq(cr_u64_table_count(&t), 0);
    cr_u64_table_fini(&t);
}
END_TEST

START_TEST(finds_what_was_inserted_and_not_what_was_removed)
{
    struct cr_u64_table t;
    struct item a = {.tag = 1, .node.key = 7};
    struct item b = {.tag = 2, .node.key = 0};
    struct item c = {.tag = 3, .node.key = UINT64_MAX};

    ck_assert_int_eq(cr_u64_table_init(&t, 3, 3), 0);
    ck_assert_ptr_null(find(&t, 7));
    cr_u64_table_insert(&t, &a.node);
    cr_u64_table_insert(&t, &b.node);
    cr_u64_table_insert(&t, &c.node);
    ck_assert_uint_eq(cr_u64_table_count(&t), 3);
    ck_assert_ptr_eq(find(&t, 7), &a);
    ck_assert_ptr_eq(find(&t, 0), &b);
    ck_assert_ptr_eq(find(&t, UINT64_MAX), &c);
    ck_assert_ptr_null(find(&t, 8));

    cr_u64_table_remove(&t, &b.node);
    ck_assert_uint_eq(cr_u64_table_count(&t), 2);
    ck_assert_ptr_null(find(&t, 0));
    ck_assert_ptr_eq(find(&t, 7), &a);
    ck_assert_ptr_eq(find(&t, UINT64_MAX), &c);
    /* Removed, it may go in again. */
    cr_u64_table_insert(&t, &b.node);
    ck_assert_ptr_eq(find(&t, 0), &b);
    cr_u64_table_fini(&t);
}
END_TEST

/* Two buckets and a hundred keys: long chains, removal from their heads,
 * middles and tails, and every other key still found. */
START_TEST(collisions_share_a_chain)
{
    enum { N = 100 };
    struct cr_u64_table t;
    struct item *it = calloc(N, sizeof(*it));

    ck_assert_ptr_nonnull(it);
    ck_assert_int_eq(cr_u64_table_init(&t, 1, 1), 0);
    for (int i = 0; i < N; i++) {
        it[i].tag = i;
        it[i].node.key = (uint64_t)i * 1000003u;
        cr_u64_table_insert(&t, &it[i].node);
    }
    ck_assert_uint_eq(t.bits, 1); /* fixed: no growth */
    ck_assert_uint_ge(longest_chain(&t), N / 2);
    for (int i = 0; i < N; i++)
        ck_assert_ptr_eq(find(&t, it[i].node.key), &it[i]);
    for (int i = 0; i < N; i += 3)
        cr_u64_table_remove(&t, &it[i].node);
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0)
            ck_assert_ptr_null(find(&t, (uint64_t)i * 1000003u));
        else
            ck_assert_ptr_eq(find(&t, it[i].node.key), &it[i]);
    }
    ck_assert_uint_eq(cr_u64_table_count(&t), N - (N + 2) / 3);
    cr_u64_table_fini(&t);
    free(it);
}
END_TEST

/* A key inserted twice: find gives the later node, and after its removal
 * the earlier one. */
START_TEST(duplicate_keys_find_the_latest)
{
    struct cr_u64_table t;
    struct item a = {.tag = 1, .node.key = 42};
    struct item b = {.tag = 2, .node.key = 42};

    ck_assert_int_eq(cr_u64_table_init(&t, 2, 2), 0);
    cr_u64_table_insert(&t, &a.node);
    cr_u64_table_insert(&t, &b.node);
    ck_assert_ptr_eq(find(&t, 42), &b);
    cr_u64_table_remove(&t, &b.node);
    ck_assert_ptr_eq(find(&t, 42), &a);
    cr_u64_table_remove(&t, &a.node);
    ck_assert_ptr_null(find(&t, 42));
    cr_u64_table_fini(&t);
}
END_TEST

/* The table doubles when it holds as many nodes as buckets, up to max_bits,
 * and keeps every node findable across the moves. */
START_TEST(grows_to_its_bound_and_keeps_every_node)
{
    enum { N = 5000 };
    struct cr_u64_table t;
    struct item *it = calloc(N, sizeof(*it));

    ck_assert_ptr_nonnull(it);
    ck_assert_int_eq(cr_u64_table_init(&t, 2, 10), 0);
    for (int i = 0; i < N; i++) {
        it[i].node.key = (uint64_t)i;
        cr_u64_table_insert(&t, &it[i].node);
        /* Below the bound there are always at least as many buckets as nodes. */
        if (t.bits < 10)
            ck_assert_uint_ge((size_t)1 << t.bits, cr_u64_table_count(&t));
    }
    ck_assert_uint_eq(t.bits, 10);
    ck_assert_uint_eq(cr_u64_table_count(&t), N);
    for (int i = 0; i < N; i++)
        ck_assert_ptr_eq(find(&t, (uint64_t)i), &it[i]);
    cr_u64_table_fini(&t);
    free(it);
}
END_TEST

/* The walk meets every node once, lets the caller remove (and free) the node
 * it was given, and ends on an empty table at once. */
START_TEST(walk_visits_each_node_once_and_allows_removing_it)
{
    enum { N = 300 };
    struct cr_u64_table t;
    struct cr_u64_table_iter iter = {0};
    unsigned char seen[N] = {0};
    struct cr_u64_node *n;
    size_t visited = 0;

    ck_assert_int_eq(cr_u64_table_init(&t, 3, 12), 0);
    ck_assert_ptr_null(cr_u64_table_next(&t, &iter));
    for (int i = 0; i < N; i++) {
        struct item *x = malloc(sizeof(*x));

        ck_assert_ptr_nonnull(x);
        x->tag = i;
        x->node.key = UINT64_C(0xABCD000000000000) + (uint64_t)i;
        cr_u64_table_insert(&t, &x->node);
    }
    iter = (struct cr_u64_table_iter){0};
    while ((n = cr_u64_table_next(&t, &iter)) != NULL) {
        struct item *x = item_of(n);

        ck_assert_int_eq(seen[x->tag], 0);
        seen[x->tag] = 1;
        visited++;
        if (x->tag % 2 == 0) {
            cr_u64_table_remove(&t, n);
            free(x);
        }
    }
    ck_assert_uint_eq(visited, N);
    ck_assert_uint_eq(cr_u64_table_count(&t), N / 2);
    /* A second walk sees the odd ones only, and frees them. */
    visited = 0;
    iter = (struct cr_u64_table_iter){0};
    while ((n = cr_u64_table_next(&t, &iter)) != NULL) {
        struct item *x = item_of(n);

        ck_assert_int_eq(x->tag % 2, 1);
        visited++;
        cr_u64_table_remove(&t, n);
        free(x);
    }
    ck_assert_uint_eq(visited, N / 2);
    ck_assert_uint_eq(cr_u64_table_count(&t), 0);
    cr_u64_table_fini(&t);
}
END_TEST

/* Keys that are not random spread over the buckets: sequential ids (the bound
 * pool's) and ids that share their low 16 bits (a session shard's). */
START_TEST(sequential_and_shard_keys_spread)
{
    enum { N = 1024 };
    struct cr_u64_table t;
    struct item *it = calloc(N, sizeof(*it));

    ck_assert_ptr_nonnull(it);
    ck_assert_int_eq(cr_u64_table_init(&t, 10, 10), 0);
    for (int i = 0; i < N; i++) {
        it[i].node.key = (uint64_t)i + 1;
        cr_u64_table_insert(&t, &it[i].node);
    }
    ck_assert_uint_le(longest_chain(&t), 4);
    for (int i = 0; i < N; i++)
        cr_u64_table_remove(&t, &it[i].node);
    for (int i = 0; i < N; i++) {
        it[i].node.key = ((uint64_t)i << 16) | 0x2a;
        cr_u64_table_insert(&t, &it[i].node);
    }
    ck_assert_uint_le(longest_chain(&t), 4);
    cr_u64_table_fini(&t);
    free(it);
}
END_TEST

Suite *u64_table_suite(void);

Suite *u64_table_suite(void)
{
    Suite *s = suite_create("u64_table");
    TCase *tc = tcase_create("u64_table");

    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_test(tc, init_refuses_bad_sizes);
    tcase_add_test(tc, finds_what_was_inserted_and_not_what_was_removed);
    tcase_add_test(tc, collisions_share_a_chain);
    tcase_add_test(tc, duplicate_keys_find_the_latest);
    tcase_add_test(tc, grows_to_its_bound_and_keeps_every_node);
    tcase_add_test(tc, walk_visits_each_node_once_and_allows_removing_it);
    tcase_add_test(tc, sequential_and_shard_keys_spread);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * u64_table.c - the intrusive chained hash table keyed by 64-bit integers
 * (cabrank/u64_table.h). Called by session.c, bound_pool.c and the OLTP
 * gateway, each under its own lock; the table has no lock and no thread of
 * its own. Owns the bucket array only; the nodes belong to the callers.
 *
 * Invariants: every node sits in the chain of bucket_of(its key), count is the
 * number of nodes, and 2^bits buckets with 1 <= bits <= max_bits.
 */
#include <cabrank/u64_table.h>

#include <assert.h>
#include <stdlib.h>

static size_t bucket_count(const struct cr_u64_table *t)
{
    return (size_t)1 << t->bits;
}

/* Fibonacci hashing: the multiply by 2^64 / phi mixes every bit of the key
 * into the top bits, so sequential ids and ids that share their low bits
 * (a session shard's) spread as well as random ones. */
static struct cr_u64_node **bucket_of(const struct cr_u64_table *t, uint64_t key)
{
    return &t->buckets[(key * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - t->bits)];
}

int cr_u64_table_init(struct cr_u64_table *t, unsigned bits, unsigned max_bits)
{
    *t = (struct cr_u64_table){.bits = bits, .max_bits = max_bits};
    if (bits == 0 || bits > max_bits || max_bits > CR_U64_TABLE_MAX_BITS)
        return -EINVAL;
    t->buckets = calloc(bucket_count(t), sizeof(*t->buckets));
    if (t->buckets == NULL)
        return -ENOMEM;
    return 0;
}

void cr_u64_table_fini(struct cr_u64_table *t)
{
    free(t->buckets);
    t->buckets = NULL;
    t->count = 0;
}

struct cr_u64_node *cr_u64_table_find(const struct cr_u64_table *t, uint64_t key)
{
    for (struct cr_u64_node *n = *bucket_of(t, key); n != NULL; n = n->next) {
        if (n->key == key)
            return n;
    }
    return NULL;
}

/* Doubles the bucket array; on allocation failure the chains just grow
 * longer, which is slower but correct, so it is not an error. */
static void grow(struct cr_u64_table *t)
{
    struct cr_u64_node **old = t->buckets;
    size_t old_n = bucket_count(t);
    struct cr_u64_node **nb = calloc(old_n * 2, sizeof(*nb));

    if (nb == NULL)
        return;
    t->buckets = nb;
    t->bits++;
    for (size_t i = 0; i < old_n; i++) {
        struct cr_u64_node *n = old[i];

        while (n != NULL) {
            struct cr_u64_node *next = n->next;
            struct cr_u64_node **b = bucket_of(t, n->key);

            n->next = *b;
            *b = n;
            n = next;
        }
    }
    free(old);
}

void cr_u64_table_insert(struct cr_u64_table *t, struct cr_u64_node *n)
{
    struct cr_u64_node **b;

    if (t->count >= bucket_count(t) && t->bits < t->max_bits)
        grow(t);
    b = bucket_of(t, n->key);
    n->next = *b;
    *b = n;
    t->count++;
}

void cr_u64_table_remove(struct cr_u64_table *t, struct cr_u64_node *n)
{
    struct cr_u64_node **pp = bucket_of(t, n->key);

    while (*pp != n) {
        assert(*pp != NULL);
        pp = &(*pp)->next;
    }
    *pp = n->next;
    n->next = NULL;
    t->count--;
}

size_t cr_u64_table_count(const struct cr_u64_table *t)
{
    return t->count;
}

struct cr_u64_node *cr_u64_table_next(const struct cr_u64_table *t, struct cr_u64_table_iter *it)
{
    struct cr_u64_node *n;

    /* next is read before the node is returned, so the caller may remove
     * that node; the bucket index keeps the place between calls. */
    while (it->next == NULL && it->bucket < bucket_count(t))
        it->next = t->buckets[it->bucket++];
    n = it->next;
    if (n != NULL)
        it->next = n->next;
    return n;
}

/*
 * u64_table.h - an intrusive chained hash table keyed by 64-bit integers: the
 * one table behind the session manager's shards, the bound pool's request ids
 * and the OLTP gateway's session pins. The caller embeds a struct cr_u64_node
 * in its own struct (container_of gets it back), sets the key and inserts it;
 * the table allocates only its bucket array, never a node, so insert cannot
 * fail. Keys need not be random: a Fibonacci multiply spreads sequential ids.
 *
 * No locking: the caller guards the table with its own lock (every function
 * is "Caller holds the table's lock"), so each user keeps its locking as it
 * was. No tombstones either: a removed node leaves its chain at once.
 */
#ifndef CABRANK_U64_TABLE_H
#define CABRANK_U64_TABLE_H

#include <cabrank/common.h>

/* The most bucket bits a table takes: 2^40 chains, more than memory holds. */
#define CR_U64_TABLE_MAX_BITS 40

/* Embedded in the caller's struct. key is set by the caller before insert and
 * not changed while the node is in a table; next belongs to the table. */
struct cr_u64_node {
    struct cr_u64_node *next;
    uint64_t key;
};

/* Embedded in the caller's struct; fields private to the table. */
struct cr_u64_table {
    struct cr_u64_node **buckets;
    unsigned bits;     /* 2^bits buckets */
    unsigned max_bits; /* growth stops here; == bits: a fixed table */
    size_t count;
};

/* Where a table's walk stands (see cr_u64_table_next); zero-initialise it. */
struct cr_u64_table_iter {
    size_t bucket;
    struct cr_u64_node *next;
};

/*
 * Sets up an empty table of 2^bits buckets that doubles, while it has fewer
 * than 2^max_bits, whenever an insert finds as many nodes as buckets.
 * 0, -EINVAL (bits 0, or bits > max_bits > CR_U64_TABLE_MAX_BITS), -ENOMEM.
 */
CR_MUST_CHECK int cr_u64_table_init(struct cr_u64_table *t, unsigned bits, unsigned max_bits);

/* Frees the bucket array; the nodes still in it belong to the caller, who
 * walks them off first if they need freeing. Safe on a zeroed table. */
void cr_u64_table_fini(struct cr_u64_table *t);

/* The node with key (the one inserted last, if the caller inserted several),
 * or NULL. */
struct cr_u64_node *cr_u64_table_find(const struct cr_u64_table *t, uint64_t key);

/* Adds n (n->key set, n not in a table). Duplicate keys are not checked: the
 * caller finds first where it must not have them. When growth is due and its
 * allocation fails, the chains just grow longer, which is slower but correct. */
void cr_u64_table_insert(struct cr_u64_table *t, struct cr_u64_node *n);

/* Takes n, which must be in t, out of it. */
void cr_u64_table_remove(struct cr_u64_table *t, struct cr_u64_node *n);

/* Nodes in the table. */
size_t cr_u64_table_count(const struct cr_u64_table *t);

/*
 * The walk: the next node after it, NULL at the end. The caller may remove
 * (and free) the node just returned, but must not insert or remove any other
 * node while the walk goes on.
 */
struct cr_u64_node *cr_u64_table_next(const struct cr_u64_table *t, struct cr_u64_table_iter *it);

/* The struct of type that embeds node as member. */
#define cr_u64_table_entry(node, type, member)                                                     \
    ((type *)(void *)((char *)(node)-offsetof(type, member)))

#endif /* CABRANK_U64_TABLE_H */

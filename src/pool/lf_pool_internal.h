/*
 * lf_pool_internal.h - what tests need of a cr_lf_pool beyond lf_pool.h.
 * Library-internal.
 */
#ifndef CABRANK_LF_POOL_INTERNAL_H
#define CABRANK_LF_POOL_INTERNAL_H

#include <cabrank/lf_pool.h>

#include <stdint.h>

/* How often the deferred-promotion watchdog has looked at a reactor (woken
 * by its timer). Any thread; for tests. */
uint64_t cr__lf_pool_looks(const struct cr_lf_pool *p);

/* How many events threads back from a deferred turn took from their
 * reactor's fetched batch without rejoining the group (take_deferred in
 * lf_pool.c). Any thread; for tests. */
uint64_t cr__lf_pool_retakes(const struct cr_lf_pool *p);

#endif /* CABRANK_LF_POOL_INTERNAL_H */

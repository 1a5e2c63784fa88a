/*
 * common.h - definitions every cabrank header shares: the must-check attribute
 * and the error convention. Included by every public header.
 *
 * Errors: fallible functions return int, 0 on success or a negative errno
 * (-EAGAIN means "try later"); byte counts are ssize_t.
 */
#ifndef CABRANK_COMMON_H
#define CABRANK_COMMON_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CR_MUST_CHECK __attribute__((warn_unused_result))

#define CR_UNUSED(x) ((void)(x))

#endif /* CABRANK_COMMON_H */

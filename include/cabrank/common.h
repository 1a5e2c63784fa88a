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

/* CR_TSAN is 1 in a ThreadSanitizer build and CR_ASAN in an AddressSanitizer
 * one (GCC's macros or clang's feature tests), for the few places that must
 * tell a sanitizer what it cannot see, or keep the calls it intercepts. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CR_TSAN 1
#endif
#if __has_feature(address_sanitizer)
#define CR_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(CR_TSAN)
#define CR_TSAN 1
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(CR_ASAN)
#define CR_ASAN 1
#endif

#endif /* CABRANK_COMMON_H */

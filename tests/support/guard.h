/*
 * guard.h - input placed against a PROT_NONE page, so a parser that reads
 * one byte past what it was given crashes the test (picohttpparser's
 * test.c does the same). One mapping per test process, grown on demand.
 * For Check suites: failures are ck_asserts.
 */
#ifndef CR_TEST_GUARD_H
#define CR_TEST_GUARD_H

#include <stddef.h>

/* Room for len bytes that end right before the PROT_NONE page. */
void *cr_test_guard_room(size_t len);

/* A copy of data[0..len) ending right before the PROT_NONE page. */
const void *cr_test_guard_put(const void *data, size_t len);

/* The start of the room and its size in *room: the bytes before the
 * PROT_NONE page, for a test that checks nothing before a pointer was
 * written either. */
unsigned char *cr_test_guard_base(size_t *room);

/* Unmaps the page (a test's teardown). */
void cr_test_guard_release(void);

#endif /* CR_TEST_GUARD_H */

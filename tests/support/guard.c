/*
 * guard.c - input against a PROT_NONE page for parser tests (guard.h).
 */
#include "guard.h"

#include <check.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct {
    char *map;
    size_t map_len;
    size_t room; /* bytes before the PROT_NONE page */
} guard;

void *cr_test_guard_room(size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    if (guard.map == NULL || guard.room < len) {
        if (guard.map != NULL)
            ck_assert_int_eq(munmap(guard.map, guard.map_len), 0);
        guard.room = (len + page - 1) / page * page;
        if (guard.room == 0)
            guard.room = page;
        guard.map_len = guard.room + page;
        guard.map =
            mmap(NULL, guard.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ck_assert_ptr_ne(guard.map, MAP_FAILED);
        ck_assert_int_eq(mprotect(guard.map + guard.room, page, PROT_NONE), 0);
    }
    return guard.map + guard.room - len;
}

const void *cr_test_guard_put(const void *data, size_t len)
{
    void *p = cr_test_guard_room(len);

    memmove(p, data, len);
    return p;
}

unsigned char *cr_test_guard_base(size_t *room)
{
    *room = guard.room;
    return (unsigned char *)guard.map;
}

void cr_test_guard_release(void)
{
    if (guard.map != NULL)
        munmap(guard.map, guard.map_len);
    guard.map = NULL;
}

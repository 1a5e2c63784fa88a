/*
 * scratch.c - removing a scratch directory tree (scratch.h), the document roots and data
 * directories the tests and tools/pgo_train create under /tmp. Not thread-safe (nftw has no
 * argument for the error, so it is kept in a static); callers clean up from one thread.
 */
#include "scratch.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>

static int rmtree_err;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) < 0 && rmtree_err == 0)
        rmtree_err = -errno;
    return 0; /* on with the rest */
}

int cr_test_rmtree(const char *dir)
{
    /* Test processes are single-threaded where they clean up; nftw has no
     * argument to carry the error in. */
    rmtree_err = 0;
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0)
        return -errno;
    return rmtree_err;
}

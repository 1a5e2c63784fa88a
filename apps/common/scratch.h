/*
 * scratch.h - removing a scratch directory tree that a test or tools/pgo_train made.
 */
#ifndef CABRANK_APPS_SCRATCH_H
#define CABRANK_APPS_SCRATCH_H

/* Removes the tree at dir, not following symlinks. 0, or -errno of the
 * first entry that could not be removed (the rest are still tried). */
int cr_test_rmtree(const char *dir);

#endif /* CABRANK_APPS_SCRATCH_H */

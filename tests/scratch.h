/* A scratch directory under /tmp for the files a test writes, and its
 * removal with everything in it (files a test made unreadable included). */
#ifndef LB_SCRATCH_H
#define LB_SCRATCH_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Makes /tmp/<name>.XXXXXX and writes its path into dir. 0 or -1. */
static inline int scratch_make(char *dir, size_t len, const char *name)
{
    snprintf(dir, len, "/tmp/%s.XXXXXX", name);
    return mkdtemp(dir) ? 0 : -1;
}

static inline int scratch_remove_one(const char *path, const struct stat *sb, int flag,
                                     struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag != FTW_SL && flag != FTW_SLN) /* never follow a link out of the tree */
        chmod(path, 0700);
    return remove(path);
}

static inline void scratch_remove(const char *dir)
{
    nftw(dir, scratch_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A test's state that starts with its scratch directory, as in
 *   typedef struct fixture { char dir[SCRATCH_DIR_LEN]; ... } fixture;
 * zeroed but for the directory, which exists. NULL when either fails. */
#define SCRATCH_DIR_LEN 256

static inline void *scratch_fixture(size_t size, const char *name)
{
    char *f = calloc(1, size);
    if (f && scratch_make(f, SCRATCH_DIR_LEN, name) != 0) {
        free(f);
        f = NULL;
    }
    return f;
}

/* Removes the directory and frees the state. */
static inline void scratch_fixture_free(void *f)
{
    scratch_remove(f);
    free(f);
}

/* Defines the cmocka setup() and teardown() of a test whose state is a
 * `type` as above, its directory /tmp/<name>.XXXXXX. */
#define SCRATCH_SETUP_TEARDOWN(type, name)                                                      \
    static int setup(void **state)                                                               \
    {                                                                                            \
        *state = scratch_fixture(sizeof(type), name);                                            \
        return *state ? 0 : -1;                                                                  \
    }                                                                                            \
    static int teardown(void **state)                                                            \
    {                                                                                            \
        scratch_fixture_free(*state);                                                            \
        return 0;                                                                                \
    }

#endif

/* One `./bench count`, shared by its command line (count.c), the parent
 * that runs valgrind (count_parent.c) and the child it runs under
 * callgrind (count_child.c). */
#ifndef LB_COUNT_RUN_H
#define LB_COUNT_RUN_H

#include "workloads/workload.h"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND_H 1
#endif
#endif

#define MAX_ITEMS 16
#define ITEM_LEN 40

typedef struct count_options {
    char items[MAX_ITEMS][ITEM_LEN];
    int n_items;
    int steps, batch, eval_images;
    workload work;
    const char *data_dir, *out_dir, *blas_core, *valgrind;
    const char *child_meta; /* set in the child: where to write what it ran */
} count_options;

/* The index of item `name` in o's list, or -1. */
int item_index(const count_options *o, const char *name);

/* The hidden `--child` mode, under callgrind: counts o's items and writes
 * what it ran to o->child_meta. Exit status as count_main's. */
int child_main(const count_options *o);

/* Runs this program again as the child under valgrind and writes
 * counts.csv from its dumps. Exit status as count_main's. */
int parent_main(const count_options *o);

#endif

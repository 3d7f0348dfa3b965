/* Prints the batch sizes a cuda engine plans for before its graph capture
 * (backends/cuda/plan_sizes.h), for tests/test_gpu_check.sh, which needs no
 * GPU to run it:
 *     cuda_plan_sizes BATCH TRAIN_COUNT TEST_COUNT   ->  "128 96 16" */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/cuda/plan_sizes.h"

static int read_count(const char *s, int *out)
{
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 1L << 30)
        return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    int batch, train, test;
    if (argc != 4 || read_count(argv[1], &batch) || read_count(argv[2], &train) ||
        read_count(argv[3], &test) || batch < 1) {
        fprintf(stderr, "usage: cuda_plan_sizes BATCH TRAIN_COUNT TEST_COUNT "
                        "(BATCH 1 or more, counts 0 or more)\n");
        return 2;
    }
    int sizes[CUDA_PLAN_SIZES_MAX];
    const int count = cuda_plan_sizes(batch, train, test, sizes);
    for (int i = 0; i < count; i++)
        printf("%s%d", i ? " " : "", sizes[i]);
    printf("\n");
    return 0;
}

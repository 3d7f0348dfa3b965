/* The batch sizes a cuda engine plans for (plan_sizes.h). */
#include "backends/cuda/plan_sizes.h"

static int add_size(int sizes[CUDA_PLAN_SIZES_MAX], int count, int n)
{
    for (int i = 0; i < count; i++)
        if (sizes[i] == n)
            return count;
    sizes[count] = n;
    return count + 1;
}

int cuda_plan_sizes(int batch, int train_count, int test_count, int sizes[CUDA_PLAN_SIZES_MAX])
{
    if (batch < 1)
        return 0;
    int count = add_size(sizes, 0, batch);
    const int set_counts[2] = {train_count, test_count};
    for (int k = 0; k < 2; k++)
        if (set_counts[k] > 0 && set_counts[k] % batch)
            count = add_size(sizes, count, set_counts[k] % batch);
    return count;
}

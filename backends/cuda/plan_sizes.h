/* Which batch sizes a cuda engine builds cuDNN plans for before it captures
 * its graph: those a run over its bound data sets meets. Plain C, no CUDA,
 * so that a test without a GPU checks the choice (tests/cuda_plan_sizes.c,
 * run by tests/test_gpu_check.sh). */
#ifndef LB_CUDA_PLAN_SIZES_H
#define LB_CUDA_PLAN_SIZES_H

/* the full batch and the short last batches of two sets */
#define CUDA_PLAN_SIZES_MAX 3

/* The batch sizes of a run in batches of `batch` over a training set of
 * train_count images and a test set of test_count (0: none bound): `batch`
 * first, then each set's short last batch (count mod batch; the whole set
 * when it is smaller than a batch), each size once. Writes them into
 * sizes[] and returns how many (1 to CUDA_PLAN_SIZES_MAX); 0 when batch is
 * below 1. */
int cuda_plan_sizes(int batch, int train_count, int test_count, int sizes[CUDA_PLAN_SIZES_MAX]);

#endif

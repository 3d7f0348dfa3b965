/* The roofline chart's data: every layer's forward and backward pass of
 * every profiled row (--profile-layers) as a point, its arithmetic
 * intensity (operations per byte it must move at least) against the rate
 * it reached, under the ceilings measured in the same run: the peak of the
 * row's arithmetic at its thread count (system.json cpu_peaks, or the
 * row's own peak_gflops) and the memory bandwidth (memory_bandwidth).
 *
 * Operations: a multiply-add counts 2 (the workload's FLOPs); pooling and
 * ReLU, which multiply nothing, count one operation per comparison, so
 * that they sit on the chart where their bytes put them. Bytes: what the
 * pass must read and write at least (inputs, outputs and their gradients,
 * parameters once a batch), each in the size it is kept in: on the CPU,
 * bf16 and fp16 round only the products' operands (the weights a product
 * reads) to 2 bytes, while activations, the gradients between layers and
 * the sums stay fp32, so a pool or a ReLU moves as many bytes as in fp32. */
#ifndef LB_ROOFLINE_H
#define LB_ROOFLINE_H

#include <stddef.h>

#include "workloads/workload.h"

typedef struct layer_traffic {
    double ops, bytes; /* per batch */
} layer_traffic;

/* Bytes per element: of activations and their gradients (and of the
 * parameter gradients, summed as they are), and of the products' weight
 * operands. */
typedef struct element_sizes {
    int activation, operand;
} element_sizes;

/* A row's element sizes from its precision's name (fp64: 8 and 8; bf16
 * and fp16: 4 and 2; else 4 and 4). */
element_sizes roofline_element_sizes(const char *precision);

/* Layer i of w, forward (backward = 0) or backward, for a batch of batch
 * images with elements of the sizes given. */
layer_traffic roofline_traffic(const workload *w, int i, int backward, int batch,
                               element_sizes sizes);

/* Writes dir/roofline.dat (the points) and dir/roofline-ceilings.dat (a
 * line per row: its label, peak GFLOP/s, bandwidth GB/s) for the profiled
 * rows named in `profiled` (labels, space-separated). 1 when there is a
 * point to draw, 0 when none (why in msg), -1 on a write error. */
int roofline_write_data(const char *dir, const char *profiled, char *msg, size_t msg_len);

#endif

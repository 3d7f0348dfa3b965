/* What the harness hands every backend: the initial parameters made from
 * the seed, and each epoch's batch order. Same seed, same floats, same
 * order, on every backend and every machine. */
#ifndef LB_INIT_H
#define LB_INIT_H

#include <stdint.h>

#include "workloads/workload.h"

/* SplitMix64: tiny, fast, and the same sequence everywhere. */
typedef struct rng {
    uint64_t state;
} rng;

uint64_t rng_next(rng *r);
double rng_uniform(rng *r); /* [0, 1) */
double rng_normal(rng *r);  /* mean 0, standard deviation 1 */

/* Xavier as DL4J's WeightInit.XAVIER: weights drawn from a normal with
 * variance 2 / (fan_in + fan_out), biases zero. For a convolution,
 * fan_in = in_c * k * k and fan_out = out_c * k * k. */
void init_params(const workload *w, uint64_t seed, float *params);

/* Training-set order for `epoch` (counting from 0): a Fisher-Yates shuffle
 * seeded from (seed, epoch), or 0..n-1 when shuffle is 0. */
void epoch_order(uint64_t seed, int epoch, int n, int shuffle, int32_t *order);

#endif

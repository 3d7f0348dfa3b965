/* The data-parallel coordinator, written once over any engine that offers
 * the data-parallel table of backends/engine.h (compute_gradients,
 * apply_update, buffer). It is itself an engine: the harness drives it
 * through the same contract as any backend.
 *
 * R replicas start from the same parameters. Two modes:
 *
 *   synchronous (averaging_frequency 0): each step's batch of B images is
 *     split into R slices of B/R (the first B mod R replicas take one image
 *     more); every replica computes the mean-loss gradient of its slice, the
 *     gradients are all-reduced weighted by each slice's share of B, and
 *     every replica applies the same update. The training equals one
 *     replica with batch B, up to floating-point summation order.
 *
 *   parameter averaging (averaging_frequency k > 0, DL4J's ParallelWrapper):
 *     each replica trains on whole batches of its own (batch t goes to
 *     replica t mod R) with its own optimiser, and every k steps of each
 *     replica the parameters, and with average_optimizer_state the
 *     optimiser state too (DL4J's averageUpdaters), are replaced by their
 *     mean over the replicas. Each step's reported loss is that batch's
 *     loss on its replica, so an epoch's mean loss is the mean over the
 *     replicas' scores (DL4J's reportScoreAfterAveraging). Parameters are
 *     also averaged before evaluation and before they are read back, as
 *     DL4J averages at the end of fit().
 *
 * Replicas live in threads of this process (one per replica; an in-process
 * or NCCL communicator) or one per MPI rank (when started by mpirun; an MPI
 * communicator, or NCCL bootstrapped over MPI for GPU engines). */
#ifndef LB_COORDINATOR_H
#define LB_COORDINATOR_H

#include <stddef.h>

#include "backends/engine.h"

#define DP_MAX_REPLICAS 64

typedef struct dp_options {
    /* Replicas in this process; 0 with spread_over_gpus: one per visible
     * GPU. Under mpirun every rank holds one replica and this must be 1. */
    int replicas;
    int averaging_frequency;     /* 0: synchronous gradient all-reduce */
    int average_optimizer_state; /* averaging mode: average the optimiser state too */
    /* Replica i on GPU i mod (visible GPUs), reduced by NCCL when the GPUs
     * are distinct; otherwise every replica on engine_config.device. */
    int spread_over_gpus;
} dp_options;

/* A backend that trains `inner` data-parallel with options o, under `name`
 * (NULL: inner's name); the same one each time for the same (inner,
 * options, name), alive until the program ends. NULL when out of memory.
 * Its probe loads and probes inner. */
const backend *dp_wrap(const backend *inner, const dp_options *o, const char *name);

/* For a backend made by dp_wrap or the multi-gpu backend: the name of the
 * engine it replicates, whose one-replica speed is its scaling baseline.
 * NULL for any other backend. */
const char *dp_base_name(const backend *b);

/* For a backend made by dp_wrap: the backend it replicates (else NULL). */
const backend *dp_inner(const backend *b);

/* The `multi-gpu` backend (every visible GPU, synchronous), defined here
 * and listed by backends/registry.c. */
extern const backend multi_gpu_backend;

#endif

/* The model-parallel coordinator: one network split over N worker engines,
 * written once over the stage entries of backends/engine.h
 * (stage_forward, stage_backward, apply_update), so that it runs over any
 * backend that offers them (naive, blas, cuda). Like the data-parallel
 * coordinator it is itself an engine, so the harness drives it through the
 * same contract, and a data-parallel wrapper around it makes hybrid
 * training (G groups of N model-parallel workers).
 *
 * Two splits, as in the multi-GPU CNN frameworks:
 *
 *   by layers: worker k holds a contiguous run of layers (a stage), cut
 *     where the largest stage's work is smallest and, among cuts within 2%
 *     of that, where the fewest activations cross (LeNet on 2 workers: the
 *     convolution stack, then the dense layers). The batch goes through as
 *     M micro-batches: stage k forwards micro-batch m while stage k + 1
 *     forwards m - 1, then the backward passes run in reverse (the GPipe
 *     schedule); the update uses the gradient of the whole batch.
 *
 *   within layers (filters): every worker holds a share of each
 *     convolution's filters and of each dense layer's units (and the pools
 *     and ReLUs after them); the outputs are gathered where the next layer
 *     needs all of them, and the input gradients, each worker's partial
 *     sum, are added up on the way back.
 *
 * Activations cross between workers through buffers in this process (one
 * thread per worker), or, under mpirun, as MPI messages between ranks (one
 * worker per rank: sends and receives by layers, an all-gather and an
 * all-reduce within layers). A stage engine takes and gives host floats, so
 * engines on GPUs exchange through host memory. Training is the same as
 * one engine with the same batch, up to floating-point summation order;
 * over ranks it is bitwise the same as in one process. */
#ifndef LB_MODEL_H
#define LB_MODEL_H

#include "backends/engine.h"

#define MP_MAX_WORKERS 16
#define MP_MAX_MICRO_BATCHES 64

typedef enum mp_split { MP_SPLIT_LAYERS, MP_SPLIT_FILTERS } mp_split;

typedef struct mp_options {
    mp_split split;
    int workers;       /* 1 .. MP_MAX_WORKERS */
    int micro_batches; /* 1 .. MP_MAX_MICRO_BATCHES */
    /* Batches prepared ahead of the first stage (uint8 to float) on
     * threads of their own; 0: prepared by the first stage's worker. */
    int prefetch;
} mp_options;

/* "layers" or "filters". */
const char *mp_split_name(mp_split s);

/* A backend that trains `inner` model-parallel with options o, under
 * `name` (NULL: one made from inner's name and the options); the same one
 * each time for the same (inner, options, name), alive until the program
 * ends. NULL when out of memory. */
const backend *mp_wrap(const backend *inner, const mp_options *o, const char *name);

/* For a backend made by mp_wrap: its options (else NULL). */
const mp_options *mp_options_of(const backend *b);

/* For an engine made by an mp_wrap backend: what worker i holds (its
 * engines' memory_use and the exchange buffers it needs), 0; -1 when i is
 * not one of its workers. The engine's memory_use entry gives the largest
 * worker's. */
int mp_worker_memory(engine *e, int i, memory_use *out);

/* Where the by-layers split cuts w for `workers` stages: cut[k] is the
 * first layer of stage k (cut[0] = 0, cut[workers] = n_layers). 0, or -1
 * when w has fewer layers than workers. */
int mp_layer_cuts(const workload *w, int workers, int *cut);

#endif

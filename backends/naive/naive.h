/* The naive engine's state, shared by naive.c (the backend table, compiled
 * once) and train.c (the layers' driving, written over `real` and compiled
 * for float and for double). The buffers are void pointers because their
 * type is the engine's precision: train.c reads them as real. */
#ifndef LB_NAIVE_H
#define LB_NAIVE_H

#include "backends/common/host_engine.h"
#include "backends/engine.h"

typedef struct naive_engine naive_engine;

struct naive_engine {
    host_engine h; /* first, so that the host_* entries find it */

    /* act[0] is the input batch, act[i + 1] the output of layer i, each
     * batch_size x (numbers per image): the current slot's of slot_act
     * (slots x (n_layers + 1) buffers; one slot unless the engine is a
     * model-parallel stage). d_a and d_b hold the gradient flowing back, in
     * turn. */
    void *act[WORKLOAD_MAX_LAYERS + 1];
    void **slot_act;
    int slots;
    void *d_a, *d_b;
    void *scratch;
};

static inline naive_engine *naive_of(engine *e) { return (naive_engine *)e; }

extern const backend naive_backend;

/* train.c, one per precision: the buffers above for h's workload and batch
 * size (0, or -1 when out of memory), and the layers' entries. */
int naive_allocate_f32(naive_engine *e);
int naive_allocate_f64(naive_engine *e);
extern const host_layers *const naive_layers_f32, *const naive_layers_f64;

#endif

/* The onednn engine's parts (see onednn.h): onednn.c (what the library
 * runs on, create and destroy, running the chains, the table),
 * onednn_memory.c (creating memories and primitives, each recorded for
 * destroy) and onednn_chains.c (the chains of primitives create builds).
 *
 * oneDNN is to the CPU what cuDNN is to the GPU, so the engine describes
 * each layer and lets the library pick its algorithm and memory layout.
 *
 * Every primitive is created once, in create, for the engine's batch size:
 * one chain for training (forward_training, then backward data and
 * backward weights) and one for scoring (forward_inference). A smaller
 * batch (an epoch's last, the test set's last) runs through the same
 * primitives with its images padded to the full batch: the padded rows
 * get a zero loss gradient, so they add exactly nothing to any gradient.
 *
 * Layouts: each primitive is created with dnnl_format_tag_any for its
 * source, weights and destination (the first layer's source too), and a
 * layer's source is the previous layer's destination as the library laid
 * it out, so activations flow from layer to layer without reorders. The
 * flat parameter vector (workloads/workload.h) and the data are the only
 * places a layout is imposed: weights are reordered from it before each
 * pass, weight gradients back into it after, the images into the first
 * layer, the logits out of the last and their gradient back in.
 *
 * bf16 (a CPU with AVX512_BF16 or AMX, as oneDNN sees it): activations,
 * their gradients and the primitives' weights in bf16, bias and weight
 * gradients in fp32, fp32 master weights and optimiser state in the host
 * buffers. */
#ifndef LB_ONEDNN_IMPL_H
#define LB_ONEDNN_IMPL_H

#include <dnnl.h>
#include <dnnl_debug.h>
#include <omp.h>

#include "backends/common/host_engine.h"
#include "backends/onednn/onednn.h"

enum { MAX_OBJECTS = 32 * WORKLOAD_MAX_LAYERS, MAX_ARGS = 6 };

/* One primitive with its arguments, bound at create; prim NULL: nothing
 * to run. */
typedef struct op {
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[MAX_ARGS];
} op;

/* A layer in one chain. */
typedef struct pass_layer {
    const_dnnl_primitive_desc_t pd; /* the forward's, a hint for the backward */
    dnnl_memory_t src, dst, workspace;
    dnnl_memory_t weights;    /* in the primitive's layout */
    op to_weights;            /* from the flat parameters, when their layout differs */
    op forward;
} pass_layer;

/* A chain of forward primitives over the engine's batch. */
typedef struct chain {
    pass_layer layer[WORKLOAD_MAX_LAYERS];
    op to_input;  /* the host's NCHW floats into the first layer's source */
    op to_logits; /* the last layer's output into the host's floats */
} chain;

/* A layer's backward pass (training chain only). */
typedef struct back_layer {
    dnnl_memory_t diff_src; /* NULL for the first layer */
    dnnl_memory_t weights;  /* what backward data reads (the forward's when alike) */
    op to_weights;
    op backward_data, backward_weights;
    /* the source and output gradient as the weight gradient's fp32 fallback
     * reads them (see weights_from_f32) */
    op to_weights_src, to_weights_diff_dst;
    int weights_in_f32; /* that fallback is taken */
    op to_grads; /* the weight gradient into the flat vector, when its layout differs */
} back_layer;

typedef struct onednn_engine onednn_engine;

struct onednn_engine {
    host_engine h; /* first, so that the host_* entries find it */
    int threads;
    dnnl_data_type_t dt; /* activations and the primitives' weights */
    dnnl_engine_t cpu;
    dnnl_stream_t stream;
    float *input;    /* [B][C][H][W]: the images of a pass */
    float *logits;   /* [B][classes] */
    float *d_logits; /* [B][classes] */
    chain train, infer;
    back_layer back[WORKLOAD_MAX_LAYERS];
    op to_diff_logits;
    dnnl_memory_t diff_logits; /* the last layer's output gradient */
    char impls[512];           /* which implementation each forward runs */
    /* everything created, for destroy */
    dnnl_memory_t mems[MAX_OBJECTS];
    dnnl_primitive_t prims[MAX_OBJECTS];
    dnnl_primitive_desc_t pds[MAX_OBJECTS];
    int n_mems, n_prims, n_pds;
};

/* Every oneDNN call is checked; the message says where and what. */
#define DNNL_CHECK(h, call)                                                                    \
    do {                                                                                       \
        const dnnl_status_t status_ = (call);                                                  \
        if (status_ != dnnl_success)                                                           \
            return host_fail(h, "%s:%d: %s: %s", __FILE__, __LINE__, #call,                    \
                             dnnl_status2str(status_));                                        \
    } while (0)


/* oneDNN's OpenMP regions take the calling thread's team size. */
static inline onednn_engine *onednn_of(engine *e) { return (onednn_engine *)e; }

static inline void enter(const onednn_engine *e) { omp_set_num_threads(e->threads); }

/* The parts' functions, external under onednn_ names (bind is also the
 * C library's). */
#define new_memory onednn_new_memory
#define new_primitive onednn_new_primitive
#define bind onednn_bind
#define keep_pd onednn_keep_pd
#define describe_op onednn_describe_op
#define md_of onednn_md_of
#define memory_md onednn_memory_md
#define new_reorder onednn_new_reorder
#define plain_md onednn_plain_md
#define any_md onednn_any_md
#define host_to_primitive onednn_host_to_primitive
#define primitive_to_host onednn_primitive_to_host
#define output_to_host onednn_output_to_host
#define build_chain onednn_build_chain
#define build_backward_chain onednn_build_backward_chain
#define note_implementations onednn_note_implementations

/* onednn_memory.c: each returns 0, or -1 after host_fail. */
/* A memory of md over handle (NULL: the library allocates it); bytes it
 * allocates are added to *counter when given. */
int new_memory(onednn_engine *e, dnnl_memory_t *m, const dnnl_memory_desc_t *md, void *handle,
               size_t *counter);
int new_primitive(onednn_engine *e, op *o, const_dnnl_primitive_desc_t pd);
/* Adds an argument to o. */
void bind(op *o, int arg, dnnl_memory_t m);
/* Keeps pd until destroy. */
int keep_pd(onednn_engine *e, dnnl_primitive_desc_t pd);
/* The primitive descriptor of an operation, kept until destroy (the
 * forward's is the backward's hint). */
int describe_op(onednn_engine *e, dnnl_primitive_desc_t *pd, const_dnnl_op_desc_t desc,
                const_dnnl_primitive_desc_t hint);
const dnnl_memory_desc_t *md_of(const_dnnl_primitive_desc_t pd, dnnl_query_t what);
const dnnl_memory_desc_t *memory_md(dnnl_memory_t m);
/* A reorder from one memory to another. */
int new_reorder(onednn_engine *e, op *o, dnnl_memory_t from, dnnl_memory_t to);
/* A plain (row-major) descriptor: nchw, oihw, nc, oi, x by ndims; any_md
 * leaves the layout to the primitive. */
int plain_md(onednn_engine *e, dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims,
             dnnl_data_type_t dt);
int any_md(onednn_engine *e, dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims,
           dnnl_data_type_t dt);
/* Memory `want` for a primitive that reads the host's floats at `host`,
 * through a reorder (*to) when the layouts differ. */
int host_to_primitive(onednn_engine *e, dnnl_memory_t *mem, op *to, const dnnl_memory_desc_t *want,
                      float *host, size_t *counter);
/* The other way: a primitive's output `from` into host floats. */
int primitive_to_host(onednn_engine *e, op *to, dnnl_memory_t from, float *host);
/* Like primitive_to_host, but writing the host floats directly when the
 * layouts agree (*mem then is the host's memory). */
int output_to_host(onednn_engine *e, dnnl_memory_t *mem, op *to, const dnnl_memory_desc_t *md,
                   float *host, size_t *counter);

/* onednn_chains.c */
/* Chain c's forward primitives for prop (training or inference), and the
 * logits' way out to the host. */
int build_chain(onednn_engine *e, chain *c, dnnl_prop_kind_t prop);
/* The training chain's backward primitives, last layer first. */
int build_backward_chain(onednn_engine *e);
/* "conv1 jit:avx512_core, pool1 ..." from the training chain, into impls. */
void note_implementations(onednn_engine *e);

#endif

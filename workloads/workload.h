/* What is trained: a workload is a list of layers with shapes, a flat
 * parameter layout and default hyper-parameters. Pure data and shape
 * arithmetic; the maths lives in backends/. */
#ifndef LB_WORKLOAD_H
#define LB_WORKLOAD_H

#include <stddef.h>

#define WORKLOAD_MAX_LAYERS 16
#define WORKLOAD_MAX_CLASSES 16

enum layer_kind {
    LAYER_CONV,    /* valid convolution, square kernel, no padding */
    LAYER_MAXPOOL, /* square window */
    LAYER_DENSE,   /* fully connected; input is flattened C,H,W */
    LAYER_RELU,
};

typedef struct shape3 {
    int c, h, w;
} shape3;

static inline int shape3_size(shape3 s) { return s.c * s.h * s.w; }

typedef struct layer {
    enum layer_kind kind;
    const char *name;   /* "conv1", "pool1", ... */
    int kernel, stride; /* conv and max-pool */
    int units;          /* conv: output channels; dense: output units */
    shape3 in, out;     /* resolved by workload_get */
    /* Parameter tensors inside the flat parameter vector (conv and dense
     * only). Conv weights are [out_c][in_c][k][k]; dense weights are
     * [out][in] (the PyTorch and cuDNN layouts). Biases follow weights. */
    size_t weight_offset, weight_count;
    size_t bias_offset, bias_count;
    /* Where the tensors come from in the whole network's flat vector: the
     * same as weight_offset and bias_offset in a whole workload; in a stage
     * (workload_stage) the offsets of its share in the parent's. */
    size_t parent_weight_offset, parent_bias_offset;
} layer;

typedef struct workload {
    const char *name;
    const char *description;
    shape3 input;
    int classes;
    /* 1 for a part of a larger network (workload_stage): its input and
     * output are activations of that network, and the loss is computed
     * elsewhere (classes is 0 unless the output is the whole logits). */
    int is_stage;
    size_t parent_param_count; /* the whole network's param_count */
    int n_layers;
    layer layers[WORKLOAD_MAX_LAYERS];
    size_t param_count;
    /* Multiply-adds count as two FLOPs. Training = forward + backward to
     * weights + backward to data (not needed for the first layer). */
    double forward_flops_per_image;
    double train_flops_per_image;
    /* Defaults (the DL4J LeNet example). */
    int default_batch_size;
    int default_epochs;
    double default_lr;
    double default_momentum;
    double default_weight_decay;
    unsigned long long default_seed;
} workload;

/* Fills *out and returns 0, or returns -1 for an unknown name. */
int workload_get(const char *name, workload *out);

/* Model parallelism: layers [first, last) of w as a workload of their own,
 * with the input shape of layer `first`, into *out. With parts > 1 it is
 * part `part` of a split within layers: the first layer with parameters
 * (a convolution or dense layer) keeps output channels or units
 * [units * part / parts, units * (part + 1) / parts), the layers after it
 * work on that share (pools and ReLUs are per channel), layers before it
 * run whole, and no second layer with parameters may follow. Every
 * parameter tensor records where its share lies in w's flat vector
 * (parent_weight_offset, parent_bias_offset). Returns NULL, or why the
 * stage cannot be made. */
const char *workload_stage(const workload *w, int first, int last, int part, int parts,
                           workload *out);

/* NULL when the layer list is one every backend can train (1 to
 * WORKLOAD_MAX_LAYERS layers, one logit per class at the end, kernels and
 * strides that fit their inputs); otherwise why not, in a few words. */
const char *workload_check(const workload *w);

/* The workloads' names as a list for messages, "lenet, mlp", cut short to
 * fit len. */
/* Copies a stage's parameters out of (or into) the whole network's flat
 * vector: stage[i] <-> parent[parent offsets]. */
void workload_stage_params_from(const workload *stage, float *stage_params,
                                const float *parent_params);
void workload_stage_params_to(const workload *stage, const float *stage_params,
                              float *parent_params);

void workload_names(char *buf, size_t len);

/* Largest activation (floats per image) over the inputs and outputs of all
 * layers: lets backends size their scratch buffers once. */
int workload_max_activation(const workload *w);

/* Number of parameter tensors (weights and biases) and their names, e.g.
 * "conv1.weight": the order of the flat parameter vector. */
int workload_tensor_count(const workload *w);
void workload_tensor_info(const workload *w, int index, char *name, size_t name_len,
                          size_t *offset, size_t *count, int dims[4], int *ndims);

#endif

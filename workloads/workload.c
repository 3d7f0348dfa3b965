#include "workloads/workload.h"

#include <stdio.h>
#include <string.h>

/* A layer as written in a definition: kind, name, and its own sizes. */
typedef struct layer_spec {
    enum layer_kind kind;
    const char *name;
    int kernel, stride, units;
} layer_spec;

typedef struct workload_spec {
    const char *name;
    const char *description;
    shape3 input;
    int classes;
    const layer_spec *layers;
    int n_layers;
    int batch_size, epochs;
    double lr, momentum, weight_decay;
    unsigned long long seed;
} workload_spec;

/* LeNet as in the DL4J and Caffe MNIST examples (no activation after the
 * convolutions). 431,080 parameters. */
static const layer_spec lenet_layers[] = {
    {LAYER_CONV, "conv1", 5, 1, 20},
    {LAYER_MAXPOOL, "pool1", 2, 2, 0},
    {LAYER_CONV, "conv2", 5, 1, 50},
    {LAYER_MAXPOOL, "pool2", 2, 2, 0},
    {LAYER_DENSE, "fc1", 0, 0, 500},
    {LAYER_RELU, "relu1", 0, 0, 0},
    {LAYER_DENSE, "fc2", 0, 0, 10},
};

/* The MLP of the PyTorch and TensorFlow MNIST tutorials. 79,510 parameters. */
static const layer_spec mlp_layers[] = {
    {LAYER_DENSE, "fc1", 0, 0, 100},
    {LAYER_RELU, "relu1", 0, 0, 0},
    {LAYER_DENSE, "fc2", 0, 0, 10},
};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const workload_spec specs[] = {
    {"lenet", "LeNet-5 (conv20-pool-conv50-pool-fc500-relu-fc10)", {1, 28, 28}, 10,
     lenet_layers, COUNT(lenet_layers), 128, 10, 0.01, 0.9, 5e-4, 123},
    {"mlp", "MLP (784-100 relu-10)", {1, 28, 28}, 10, mlp_layers, COUNT(mlp_layers), 128,
     10, 0.01, 0.9, 5e-4, 123},
};

void workload_names(char *buf, size_t len)
{
    size_t used = 0;
    if (len)
        buf[0] = 0;
    for (int i = 0; i < COUNT(specs) && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", specs[i].name);
}

static void resolve(const workload_spec *s, workload *w)
{
    memset(w, 0, sizeof *w);
    w->name = s->name;
    w->description = s->description;
    w->input = s->input;
    w->classes = s->classes;
    w->n_layers = s->n_layers;
    w->default_batch_size = s->batch_size;
    w->default_epochs = s->epochs;
    w->default_lr = s->lr;
    w->default_momentum = s->momentum;
    w->default_weight_decay = s->weight_decay;
    w->default_seed = s->seed;

    shape3 cur = s->input;
    size_t offset = 0;
    int first_param_layer = 1;
    for (int i = 0; i < s->n_layers; i++) {
        const layer_spec *ls = &s->layers[i];
        layer *l = &w->layers[i];
        l->kind = ls->kind;
        l->name = ls->name;
        l->kernel = ls->kernel;
        l->stride = ls->stride;
        l->units = ls->units;
        l->in = cur;
        double fwd = 0;
        switch (ls->kind) {
        case LAYER_CONV:
            l->out = (shape3){ls->units, (cur.h - ls->kernel) / ls->stride + 1,
                              (cur.w - ls->kernel) / ls->stride + 1};
            l->weight_count = (size_t)ls->units * cur.c * ls->kernel * ls->kernel;
            l->bias_count = (size_t)ls->units;
            fwd = 2.0 * l->out.c * l->out.h * l->out.w * cur.c * ls->kernel * ls->kernel;
            break;
        case LAYER_MAXPOOL:
            l->out = (shape3){cur.c, (cur.h - ls->kernel) / ls->stride + 1,
                              (cur.w - ls->kernel) / ls->stride + 1};
            break;
        case LAYER_DENSE:
            l->out = (shape3){ls->units, 1, 1};
            l->weight_count = (size_t)ls->units * shape3_size(cur);
            l->bias_count = (size_t)ls->units;
            fwd = 2.0 * ls->units * shape3_size(cur);
            break;
        case LAYER_RELU:
            l->out = cur;
            break;
        }
        if (l->weight_count) {
            l->weight_offset = l->parent_weight_offset = offset;
            offset += l->weight_count;
            l->bias_offset = l->parent_bias_offset = offset;
            offset += l->bias_count;
            w->forward_flops_per_image += fwd;
            /* backward to weights always; backward to data except first */
            w->train_flops_per_image += fwd * (first_param_layer ? 2 : 3);
            first_param_layer = 0;
        }
        cur = l->out;
    }
    w->param_count = w->parent_param_count = offset;
}

int workload_get(const char *name, workload *out)
{
    for (int i = 0; i < COUNT(specs); i++) {
        if (strcmp(specs[i].name, name) == 0) {
            resolve(&specs[i], out);
            return 0;
        }
    }
    return -1;
}

static int has_params(const layer *l) { return l->kind == LAYER_CONV || l->kind == LAYER_DENSE; }

const char *workload_stage(const workload *w, int first, int last, int part, int parts,
                           workload *out)
{
    if (first < 0 || last > w->n_layers || first >= last)
        return "stage outside the network's layers";
    if (parts < 1 || part < 0 || part >= parts)
        return "bad part of a split within layers";
    layer_spec layers[WORKLOAD_MAX_LAYERS];
    int split_at = -1; /* the layer whose units are shared out */
    for (int i = first; i < last; i++) {
        const layer *l = &w->layers[i];
        layers[i - first] = (layer_spec){l->kind, l->name, l->kernel, l->stride, l->units};
        if (parts > 1 && has_params(l)) {
            if (split_at >= 0)
                return "a split within layers takes one layer with parameters per stage";
            if (l->units < parts)
                return "a layer has fewer channels or units than there are workers";
            split_at = i;
            layers[i - first].units =
                l->units * (part + 1) / parts - l->units * part / parts;
        }
    }
    const workload_spec spec = {
        .name = w->name, .description = w->description, .input = w->layers[first].in,
        .layers = layers, .n_layers = last - first, .batch_size = w->default_batch_size,
        .epochs = w->default_epochs, .lr = w->default_lr, .momentum = w->default_momentum,
        .weight_decay = w->default_weight_decay, .seed = w->default_seed};
    resolve(&spec, out);
    out->is_stage = first > 0 || last < w->n_layers || parts > 1;
    out->classes = last == w->n_layers && parts == 1 ? w->classes : 0;
    out->parent_param_count = w->param_count;
    for (int i = first; i < last; i++) {
        const layer *whole = &w->layers[i];
        layer *l = &out->layers[i - first];
        if (!has_params(whole))
            continue;
        const size_t lo = i == split_at ? (size_t)(whole->units * part / parts) : 0;
        l->parent_weight_offset = whole->weight_offset + lo * (whole->weight_count / whole->units);
        l->parent_bias_offset = whole->bias_offset + lo;
    }
    return NULL;
}

static void stage_copy(const workload *stage, float *stage_params, float *parent_params,
                       int to_parent)
{
    for (int i = 0; i < stage->n_layers; i++) {
        const layer *l = &stage->layers[i];
        if (!l->weight_count)
            continue;
        float *s[2] = {stage_params + l->weight_offset, stage_params + l->bias_offset};
        float *p[2] = {parent_params + l->parent_weight_offset,
                       parent_params + l->parent_bias_offset};
        const size_t n[2] = {l->weight_count, l->bias_count};
        for (int t = 0; t < 2; t++)
            memcpy(to_parent ? p[t] : s[t], to_parent ? s[t] : p[t], n[t] * sizeof(float));
    }
}

void workload_stage_params_from(const workload *stage, float *stage_params,
                                const float *parent_params)
{
    stage_copy(stage, stage_params, (float *)parent_params, 0);
}

void workload_stage_params_to(const workload *stage, const float *stage_params,
                              float *parent_params)
{
    stage_copy(stage, (float *)stage_params, parent_params, 1);
}

const char *workload_check(const workload *w)
{
    if (w->n_layers < 1 || w->n_layers > WORKLOAD_MAX_LAYERS)
        return "workload has no layers or too many";
    if (!w->is_stage && (w->classes < 1 || w->classes > WORKLOAD_MAX_CLASSES ||
                         shape3_size(w->layers[w->n_layers - 1].out) != w->classes))
        return "workload's last layer does not give one logit per class";
    for (int i = 0; i < w->n_layers; i++) {
        const layer *l = &w->layers[i];
        if ((l->kind == LAYER_CONV || l->kind == LAYER_MAXPOOL) &&
            (l->kernel < 1 || l->stride < 1 || l->kernel > l->in.h || l->kernel > l->in.w))
            return "convolution or pool with a bad kernel or stride";
    }
    return NULL;
}

int workload_max_activation(const workload *w)
{
    int m = shape3_size(w->input);
    for (int i = 0; i < w->n_layers; i++) {
        int s = shape3_size(w->layers[i].out);
        if (s > m)
            m = s;
    }
    return m;
}

int workload_tensor_count(const workload *w)
{
    int n = 0;
    for (int i = 0; i < w->n_layers; i++)
        if (w->layers[i].weight_count)
            n += 2;
    return n;
}

void workload_tensor_info(const workload *w, int index, char *name, size_t name_len,
                          size_t *offset, size_t *count, int dims[4], int *ndims)
{
    int n = 0;
    for (int i = 0; i < w->n_layers; i++) {
        const layer *l = &w->layers[i];
        if (!l->weight_count)
            continue;
        if (n == index || n + 1 == index) {
            int is_bias = (n + 1 == index);
            snprintf(name, name_len, "%s.%s", l->name, is_bias ? "bias" : "weight");
            *offset = is_bias ? l->bias_offset : l->weight_offset;
            *count = is_bias ? l->bias_count : l->weight_count;
            if (is_bias) {
                dims[0] = l->units;
                *ndims = 1;
            } else if (l->kind == LAYER_CONV) {
                dims[0] = l->units;
                dims[1] = l->in.c;
                dims[2] = l->kernel;
                dims[3] = l->kernel;
                *ndims = 4;
            } else {
                dims[0] = l->units;
                dims[1] = shape3_size(l->in);
                *ndims = 2;
            }
            return;
        }
        n += 2;
    }
}

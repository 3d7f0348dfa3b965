#include "harness/run/init.h"

#include <math.h>

uint64_t rng_next(rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

double rng_normal(rng *r)
{
    /* Box-Muller; 1 - u keeps the logarithm's argument above zero. */
    double u1 = 1.0 - rng_uniform(r), u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void init_params(const workload *w, uint64_t seed, float *params)
{
    rng r = {seed};
    for (int i = 0; i < w->n_layers; i++) {
        const layer *l = &w->layers[i];
        if (!l->weight_count)
            continue;
        double fan_in, fan_out;
        if (l->kind == LAYER_CONV) {
            fan_in = (double)l->in.c * l->kernel * l->kernel;
            fan_out = (double)l->units * l->kernel * l->kernel;
        } else {
            fan_in = shape3_size(l->in);
            fan_out = l->units;
        }
        double sd = sqrt(2.0 / (fan_in + fan_out));
        for (size_t k = 0; k < l->weight_count; k++)
            params[l->weight_offset + k] = (float)(sd * rng_normal(&r));
        for (size_t k = 0; k < l->bias_count; k++)
            params[l->bias_offset + k] = 0.0f;
    }
}

void epoch_order(uint64_t seed, int epoch, int n, int shuffle, int32_t *order)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    if (!shuffle)
        return;
    rng r = {seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(epoch + 1))};
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng_next(&r) % (uint64_t)(i + 1));
        int32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

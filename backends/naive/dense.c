/* Fully connected layer: out[B][O] = in[B][I] weight[O][I]^T + bias[O].
 * The forward pass works on the transposes (outT = weight * inT) so that its
 * innermost loop runs over the batch; the backward passes need no
 * transposes. */
#include <string.h>

#include "backends/naive/layers.h"

size_t dense_scratch_count(int B, int I, int O) { return (size_t)B * (I + O); }

void dense_forward(real *out, const real *in, const real *weight, const real *bias, int B,
                   int I, int O, real *scratch)
{
    real *inT = scratch;                 /* [I][B] */
    real *outT = scratch + (size_t)I * B; /* [O][B] */
    transpose(inT, in, B, I);
    for (int o = 0; o < O; o++)
        for (int b = 0; b < B; b++)
            outT[(size_t)o * B + b] = bias[o];
    matmul_nn(outT, weight, inT, O, B, I);
    transpose(out, outT, O, B);
}

void dense_backward_data(real *d_in, const real *d_out, const real *weight, int B, int I,
                         int O)
{
    /* d_in[b][i] = sum_o d_out[b][o] weight[o][i] */
    memset(d_in, 0, sizeof(real) * (size_t)B * I);
    matmul_nn(d_in, d_out, weight, B, I, O);
}

void dense_backward_weights(real *d_weight, const real *d_out, const real *in, int B, int I,
                            int O)
{
    /* d_weight[o][i] += sum_b d_out[b][o] in[b][i] */
    matmul_tn(d_weight, d_out, in, O, I, B);
}

void dense_backward_bias(real *d_bias, const real *d_out, int B, int O)
{
    for (int b = 0; b < B; b++)
        for (int o = 0; o < O; o++)
            d_bias[o] += d_out[(size_t)b * O + o];
}

/* Valid convolution, square kernel, any stride, NCHW. Each image is unfolded
 * into columns (im2col) so the heavy work is one matrix loop:
 *   forward:      out[K][P]    = weight[K][R] * col[R][P]
 *   to weights:   d_weight[K][R] += d_out[K][P] * colT[P][R]
 *   to data:      d_col[R][P]  = weight^T[R][K] * d_out[K][P], folded back
 * with R = C * kernel * kernel rows (c, ki, kj) and P = OH * OW positions. */
#include <string.h>

#include "backends/naive/layers.h"

size_t conv_scratch_count(int C, int H, int W, int kernel, int stride)
{
    return (size_t)C * kernel * kernel * conv_out_size(H, kernel, stride) *
           conv_out_size(W, kernel, stride);
}

/* The walk of im2col and col2im_add: col[(c, ki, kj)][(oy, ox)] against
 * in[c][oy * stride + ki][ox * stride + kj], copied into col, or added
 * back into in when fold_back (a constant where this is inlined; in is
 * written only then). */
static inline void unfold(real *col, real *in, int C, int H, int W, int kernel, int stride,
                          int fold_back)
{
    const int OH = conv_out_size(H, kernel, stride), OW = conv_out_size(W, kernel, stride);
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < kernel; ki++)
            for (int kj = 0; kj < kernel; kj++)
                for (int oy = 0; oy < OH; oy++) {
                    real *image = in + ((size_t)c * H + oy * stride + ki) * W + kj;
                    for (int ox = 0; ox < OW; ox++)
                        if (fold_back)
                            image[ox * stride] += *col++;
                        else
                            *col++ = image[ox * stride];
                }
}

static void im2col(real *col, const real *in, int C, int H, int W, int kernel, int stride)
{
    unfold(col, (real *)in, C, H, W, kernel, stride, 0);
}

/* The same numbers transposed: colT[(oy, ox)][(c, ki, kj)]. */
static void im2col_t(real *colT, const real *in, int C, int H, int W, int kernel,
                     int stride)
{
    const int OH = conv_out_size(H, kernel, stride), OW = conv_out_size(W, kernel, stride);
    for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox++)
            for (int c = 0; c < C; c++)
                for (int ki = 0; ki < kernel; ki++) {
                    const real *src =
                        in + ((size_t)c * H + oy * stride + ki) * W + ox * stride;
                    for (int kj = 0; kj < kernel; kj++)
                        *colT++ = src[kj];
                }
}

static void col2im_add(real *in, const real *col, int C, int H, int W, int kernel,
                       int stride)
{
    unfold((real *)col, in, C, H, W, kernel, stride, 1);
}

void conv_forward(real *out, const real *in, const real *weight, const real *bias, int B,
                  int C, int H, int W, int K, int kernel, int stride, real *scratch)
{
    const int OH = conv_out_size(H, kernel, stride), OW = conv_out_size(W, kernel, stride);
    const int P = OH * OW, R = C * kernel * kernel;
    for (int b = 0; b < B; b++) {
        real *o = out + (size_t)b * K * P;
        im2col(scratch, in + (size_t)b * C * H * W, C, H, W, kernel, stride);
        for (int k = 0; k < K; k++)
            for (int p = 0; p < P; p++)
                o[(size_t)k * P + p] = bias[k];
        matmul_nn(o, weight, scratch, K, P, R);
    }
}

void conv_backward_data(real *d_in, const real *d_out, const real *weight, int B, int C,
                        int H, int W, int K, int kernel, int stride, real *scratch)
{
    const int OH = conv_out_size(H, kernel, stride), OW = conv_out_size(W, kernel, stride);
    const int P = OH * OW, R = C * kernel * kernel;
    memset(d_in, 0, sizeof(real) * (size_t)B * C * H * W);
    for (int b = 0; b < B; b++) {
        memset(scratch, 0, sizeof(real) * (size_t)R * P);
        matmul_tn(scratch, weight, d_out + (size_t)b * K * P, R, P, K);
        col2im_add(d_in + (size_t)b * C * H * W, scratch, C, H, W, kernel, stride);
    }
}

void conv_backward_weights(real *d_weight, const real *d_out, const real *in, int B, int C,
                           int H, int W, int K, int kernel, int stride, real *scratch)
{
    const int OH = conv_out_size(H, kernel, stride), OW = conv_out_size(W, kernel, stride);
    const int P = OH * OW, R = C * kernel * kernel;
    for (int b = 0; b < B; b++) {
        im2col_t(scratch, in + (size_t)b * C * H * W, C, H, W, kernel, stride);
        matmul_nn(d_weight, d_out + (size_t)b * K * P, scratch, K, R, P);
    }
}

void conv_backward_bias(real *d_bias, const real *d_out, int B, int K, int OH, int OW)
{
    const int P = OH * OW;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < K; k++) {
            const real *g = d_out + ((size_t)b * K + k) * P;
            real sum = 0;
            for (int p = 0; p < P; p++)
                sum += g[p];
            d_bias[k] += sum;
        }
}

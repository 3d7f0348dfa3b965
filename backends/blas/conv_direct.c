/* Direct convolutions for the blas backend (see conv_direct.h).
 *
 * Built with -ffp-contract=fast (module.mk): each multiply-add is one FMA
 * where the CPU has them. The vectors are GCC's generic vector type, so the
 * compiler picks the instructions for the target it builds for; nothing
 * here depends on the machine it is built on. */
#include "backends/blas/conv_direct.h"

#include <string.h>

typedef float v8 __attribute__((vector_size(32)));

static inline v8 load8(const float *p)
{
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store8(float *p, v8 v) { memcpy(p, &v, sizeof v); }

static inline v8 splat8(float x) { return (v8){x, x, x, x, x, x, x, x}; }

static inline float sum8(v8 v)
{
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

int blas_conv_direct_suits(int C, int kernel, int stride)
{
    return stride == 1 && C * kernel * kernel + 1 < 128;
}

/* Output rows y of channels k and k + 1 (k alone when two == 0). */
static void forward_row(float *out, const float *in, const float *weight_bias, int B, int C,
                        int H, int W, int K, int kernel, int k, int y)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    const size_t row = (size_t)OW * B, plane_in = (size_t)H * W * B,
                 plane_out = (size_t)OH * row;
    const int two = k + 1 < K;
    const float *w0 = weight_bias + (size_t)k * (R + 1), *w1 = two ? w0 + R + 1 : w0;
    float *o0 = out + (size_t)k * plane_out + (size_t)y * row, *o1 = o0 + plane_out;
    size_t j = 0;
    /* 32 floats of two channels' rows in registers, over every input */
    for (; j + 32 <= row; j += 32) {
        v8 a0 = splat8(w0[R]), a1 = a0, a2 = a0, a3 = a0;
        v8 b0 = splat8(w1[R]), b1 = b0, b2 = b0, b3 = b0;
        for (int c = 0; c < C; c++)
            for (int ki = 0; ki < kernel; ki++) {
                const float *src = in + c * plane_in + ((size_t)(y + ki) * W) * B + j;
                const int r0 = (c * kernel + ki) * kernel;
                for (int kj = 0; kj < kernel; kj++) {
                    const float *s = src + (size_t)kj * B;
                    const v8 s0 = load8(s), s1 = load8(s + 8), s2 = load8(s + 16),
                             s3 = load8(s + 24);
                    const v8 wa = splat8(w0[r0 + kj]), wb = splat8(w1[r0 + kj]);
                    a0 += wa * s0, a1 += wa * s1, a2 += wa * s2, a3 += wa * s3;
                    b0 += wb * s0, b1 += wb * s1, b2 += wb * s2, b3 += wb * s3;
                }
            }
        store8(o0 + j, a0), store8(o0 + j + 8, a1), store8(o0 + j + 16, a2),
            store8(o0 + j + 24, a3);
        if (two)
            store8(o1 + j, b0), store8(o1 + j + 8, b1), store8(o1 + j + 16, b2),
                store8(o1 + j + 24, b3);
    }
    for (; j < row; j++) {
        float s0 = w0[R], s1 = w1[R];
        for (int c = 0; c < C; c++)
            for (int ki = 0; ki < kernel; ki++)
                for (int kj = 0; kj < kernel; kj++) {
                    const float v = in[c * plane_in + ((size_t)(y + ki) * W + kj) * B + j];
                    const int r = (c * kernel + ki) * kernel + kj;
                    s0 += w0[r] * v, s1 += w1[r] * v;
                }
        o0[j] = s0;
        if (two)
            o1[j] = s1;
    }
}

void blas_conv_direct_forward(float *out, const float *in, const float *weight_bias, int B,
                              int C, int H, int W, int K, int kernel, int threads)
{
    const int OH = H - kernel + 1, pairs = (K + 1) / 2;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int p = 0; p < pairs; p++)
        for (int y = 0; y < OH; y++)
            forward_row(out, in, weight_bias, B, C, H, W, K, kernel, 2 * p, y);
}

/* Gradients of channels k, k + 1 for the taps (c, ki, 0..KW): each input
 * row segment loaded once for both channels and every kj. KW is a
 * constant where it is inlined, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void
params_taps(float *d_weight_bias, const float *d_out, const float *in, int B, int C, int H,
            int W, int K, int KW, int k, int c, int ki)
{
    enum { MAX_KW = 8 };
    const int OH = H - KW + 1, OW = W - KW + 1, R = C * KW * KW;
    const size_t row = (size_t)OW * B, plane_in = (size_t)H * W * B,
                 plane_out = (size_t)OH * row;
    const int two = k + 1 < K;
    const float *g0 = d_out + (size_t)k * plane_out, *g1 = two ? g0 + plane_out : g0;
    /* each output row's sums in registers (a), added to the totals (s)
     * row by row: sums of a row's length, not of the whole plane */
    v8 a0[MAX_KW], a1[MAX_KW], s0[MAX_KW], s1[MAX_KW];
    float t0[MAX_KW], t1[MAX_KW];
    for (int kj = 0; kj < KW; kj++)
        s0[kj] = s1[kj] = splat8(0.0f), t0[kj] = t1[kj] = 0.0f;
    for (int y = 0; y < OH; y++) {
        for (int kj = 0; kj < KW; kj++)
            a0[kj] = a1[kj] = splat8(0.0f);
        const float *src = in + c * plane_in + (size_t)(y + ki) * W * B;
        const float *d0 = g0 + (size_t)y * row, *d1 = g1 + (size_t)y * row;
        size_t j = 0;
        for (; j + 8 <= row; j += 8) {
            const v8 e0 = load8(d0 + j), e1 = load8(d1 + j);
            for (int kj = 0; kj < KW; kj++) {
                const v8 s = load8(src + (size_t)kj * B + j);
                a0[kj] += e0 * s, a1[kj] += e1 * s;
            }
        }
        for (int kj = 0; kj < KW; kj++)
            s0[kj] += a0[kj], s1[kj] += a1[kj];
        for (; j < row; j++)
            for (int kj = 0; kj < KW; kj++) {
                const float s = src[(size_t)kj * B + j];
                t0[kj] += d0[j] * s, t1[kj] += d1[j] * s;
            }
    }
    const int r0 = (c * KW + ki) * KW;
    for (int kj = 0; kj < KW; kj++) {
        d_weight_bias[(size_t)k * (R + 1) + r0 + kj] = sum8(s0[kj]) + t0[kj];
        if (two)
            d_weight_bias[(size_t)(k + 1) * (R + 1) + r0 + kj] = sum8(s1[kj]) + t1[kj];
    }
}

void blas_conv_direct_backward_params(float *d_weight_bias, const float *d_out,
                                      const float *in, int B, int C, int H, int W, int K,
                                      int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    for (int k = 0; k < K; k += 2)
        for (int c = 0; c < C; c++)
            for (int ki = 0; ki < kernel; ki++) {
                if (kernel == 5)
                    params_taps(d_weight_bias, d_out, in, B, C, H, W, K, 5, k, c, ki);
                else if (kernel == 3)
                    params_taps(d_weight_bias, d_out, in, B, C, H, W, K, 3, k, c, ki);
                else if (kernel <= 8)
                    params_taps(d_weight_bias, d_out, in, B, C, H, W, K, kernel, k, c, ki);
            }
    /* kernels above 8 wide, one tap at a time */
    if (kernel > 8)
        for (int k = 0; k < K; k++)
            for (int r = 0; r < R; r++) {
                const int c = r / (kernel * kernel), ki = r / kernel % kernel,
                          kj = r % kernel;
                float sum = 0.0f;
                for (int y = 0; y < OH; y++)
                    for (size_t j = 0; j < (size_t)OW * B; j++)
                        sum += d_out[((size_t)k * OH + y) * OW * B + j] *
                               in[((size_t)(c * H + y + ki) * W + kj) * B + j];
                d_weight_bias[(size_t)k * (R + 1) + r] = sum;
            }
    /* the biases: each channel's gradients summed */
    const size_t plane_out = (size_t)OH * OW * B;
    for (int k = 0; k < K; k++) {
        const float *g = d_out + (size_t)k * plane_out;
        const size_t row = (size_t)OW * B;
        v8 total = splat8(0.0f);
        float tail = 0.0f;
        for (int y = 0; y < OH; y++) {
            v8 acc = splat8(0.0f);
            size_t j = 0;
            for (; j + 8 <= row; j += 8)
                acc += load8(g + (size_t)y * row + j);
            total += acc;
            for (; j < row; j++)
                tail += g[(size_t)y * row + j];
        }
        d_weight_bias[(size_t)k * (R + 1) + R] = sum8(total) + tail;
    }
}

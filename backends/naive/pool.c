/* Max-pool over square windows, NCHW. */
#include <string.h>

#include "backends/naive/layers.h"

/* Offset inside one channel of the first largest input of window (oy, ox). */
static int window_argmax(const real *in, int W, int kernel, int stride, int oy, int ox)
{
    int best = oy * stride * W + ox * stride;
    real best_value = in[best];
    for (int ki = 0; ki < kernel; ki++)
        for (int kj = 0; kj < kernel; kj++) {
            const int at = (oy * stride + ki) * W + ox * stride + kj;
            const real v = in[at];
            /* selects rather than branches: the compiler emits conditional
             * moves, which random data cannot mispredict */
            best = v > best_value ? at : best;
            best_value = v > best_value ? v : best_value;
        }
    return best;
}

void maxpool_forward(real *out, const real *in, int B, int C, int H, int W, int kernel,
                     int stride)
{
    const int OH = (H - kernel) / stride + 1, OW = (W - kernel) / stride + 1;
    for (int bc = 0; bc < B * C; bc++) {
        const real *x = in + (size_t)bc * H * W;
        real *y = out + (size_t)bc * OH * OW;
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++)
                y[oy * OW + ox] = x[window_argmax(x, W, kernel, stride, oy, ox)];
    }
}

void maxpool_backward(real *d_in, const real *d_out, const real *in, int B, int C, int H,
                      int W, int kernel, int stride)
{
    const int OH = (H - kernel) / stride + 1, OW = (W - kernel) / stride + 1;
    memset(d_in, 0, sizeof(real) * (size_t)B * C * H * W);
    for (int bc = 0; bc < B * C; bc++) {
        const real *x = in + (size_t)bc * H * W;
        const real *dy = d_out + (size_t)bc * OH * OW;
        real *dx = d_in + (size_t)bc * H * W;
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++)
                dx[window_argmax(x, W, kernel, stride, oy, ox)] += dy[oy * OW + ox];
    }
}

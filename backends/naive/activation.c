/* ReLU, through the shared per-element functions. */
#include "backends/common/elementwise.h"
#include "backends/naive/layers.h"

void relu_forward(real *out, const real *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = lb_relu(in[i]);
}

void relu_backward(real *d_in, const real *d_out, const real *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d_in[i] = lb_relu_backward(out[i], d_out[i]);
}

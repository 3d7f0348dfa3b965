/* Softmax cross-entropy, through the shared per-image function. */
#include "backends/common/elementwise.h"
#include "backends/naive/layers.h"

double softmax_xent(real *d_logits, real *losses, const real *logits, const int *labels,
                    int B, int classes, real scale)
{
    double sum = 0.0;
    for (int b = 0; b < B; b++) {
        real l = lb_softmax_xent(logits + (size_t)b * classes, classes, labels[b], scale,
                                  d_logits ? d_logits + (size_t)b * classes : NULL);
        if (losses)
            losses[b] = l;
        sum += l;
    }
    return sum;
}

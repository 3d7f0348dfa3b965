/* The onednn backend: every layer a oneDNN primitive (convolution, max
 * pooling, inner product, ReLU; forward training, backward data and
 * backward weights), the softmax cross-entropy and the optimiser update in
 * the shared host code. Built as the module $(BUILD)/modules/onednn.so.
 *
 * The two functions below are for tests/test_onednn.c, which links the
 * engine in: they copy a layer's activation or input gradient, as the last
 * compute_gradients left it, out of oneDNN's layout into NCHW floats (a
 * dense layer's [batch][units]) for the engine's whole batch. */
#ifndef LB_ONEDNN_H
#define LB_ONEDNN_H

#include "backends/engine.h"

extern const backend onednn_backend;

/* Layer i's output; 0, or -1 with the reason in error(). */
int onednn_engine_activation(engine *e, int i, float *out);
/* The gradient of the loss with respect to layer i's input (i >= 1). */
int onednn_engine_input_gradient(engine *e, int i, float *out);

#endif

/* Prints the reason the cuda engine's check macro (CK_CUDNN, through
 * cudnn_reason in backends/cuda/engine_impl.h) gives for a cuDNN call that
 * fails, for tests/test_gpu_check.sh: a tensor descriptor of negative size,
 * which cuDNN refuses without a GPU, so the reason is seen on any machine
 * with cuDNN. Expected: the status name, then cuDNN's own message. */
#include <stdio.h>

#include "backends/cuda/engine_impl.h"

int main(void)
{
    cudnnTensorDescriptor_t d;
    if (cudnnCreateTensorDescriptor(&d) != CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "cuda_reason: cannot create a tensor descriptor\n");
        return 2;
    }
    cudnnStatus_t s = cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, -1, 1, 1, 1);
    cudnnDestroyTensorDescriptor(d);
    if (s == CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "cuda_reason: cuDNN took a negative size\n");
        return 2;
    }
    printf("%s\n", cudnn_reason(s));
    return 0;
}

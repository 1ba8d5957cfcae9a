/* GELU with the tanh approximation (GPT-2's "gelu_new"), the formula of
 * kernels/cpu/gelu.c. Elementwise, one thread per element in a grid-stride
 * loop; the backward reads both inputs before it writes, so it may run in
 * place (dinp == dout). */
#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define THREADS 256
#define MAX_BLOCKS (1u << 20) /* grid-stride loops cover the rest */

namespace {

unsigned grid_for(size_t n) {
    unsigned b = tg_blocks(n, THREADS);
    return b < MAX_BLOCKS ? b : MAX_BLOCKS;
}

template <typename T>
__global__ void gelu_forward_kernel(T *out, const T *inp, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = tg_load(inp, i);
        tg_store(out, i, 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x))));
    }
}

template <typename T>
__global__ void gelu_backward_kernel(T *dinp, const T *inp, const T *dout, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = tg_load(inp, i);
        float g = tg_load(dout, i);
        float u = GELU_K * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        tg_store(dinp, i, g * (0.5f * (1.0f + th) + 0.5f * x * sech2 * du));
    }
}

template <typename T>
void gelu_forward(cudaStream_t stream, void *out, const void *inp, size_t n) {
    gelu_forward_kernel<T><<<grid_for(n), THREADS, 0, stream>>>((T *)out, (const T *)inp, n);
    CUDA_LAUNCHED("gelu_forward_kernel");
}

template <typename T>
void gelu_backward(cudaStream_t stream, void *dinp, const void *inp, const void *dout, size_t n) {
    gelu_backward_kernel<T><<<grid_for(n), THREADS, 0, stream>>>((T *)dinp, (const T *)inp, (const T *)dout, n);
    CUDA_LAUNCHED("gelu_backward_kernel");
}

} // namespace

void cuda_gelu_forward(tg_o o, void *out, const void *inp, size_t n) {
    if (n == 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) gelu_forward<__nv_bfloat16>(stream, out, inp, n);
    else gelu_forward<float>(stream, out, inp, n);
}

void cuda_gelu_backward(tg_o o, void *dinp, const void *inp, const void *dout, size_t n) {
    if (n == 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) gelu_backward<__nv_bfloat16>(stream, dinp, inp, dout, n);
    else gelu_backward<float>(stream, dinp, inp, dout, n);
}

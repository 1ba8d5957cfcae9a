/* AdamW over the parameter spans in one launch (kernels/cuda/spans.cuh:
 * a grid of slices per span, blockIdx.y the span), and the casts between
 * the float32 master weights and the activation-type working copy. AdamW
 * reads the step's clip factor and finiteness from device memory
 * (tg_step_stats, step_stats.cu), so the host never waits for the norm; it
 * follows kernels/cpu/optimizer.c (torch's order) with explicitly rounded
 * operations (__fmul_rn, ...) so that nothing is fused and the float32
 * result matches the CPU's bit for bit. */
#include <math.h>

#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/spans.cuh"

#define THREADS 256
#define MAX_BLOCKS (1u << 20) /* grid-stride loops cover the rest */
#define ADAMW_SLICE ((size_t)THREADS * 16) /* elements per block and span, at least */
#define ADAMW_MAX_BLOCKS 4096u

namespace {

unsigned grid_for(size_t n) {
    unsigned b = tg_blocks(n, THREADS);
    return b < MAX_BLOCKS ? b : MAX_BLOCKS;
}

/* torch.optim.AdamW on the spans' elements: decay, moments, then
 * p -= step_size * m / (sqrt(v) / bc2_sqrt + eps), on the gradient times
 * the clip factor; nothing unless the step's loss and norm were finite.
 * The step's learning rate and bias corrections come from stats (so the
 * launch is the same every step); step_size and bc2_sqrt are correctly
 * rounded, as the CPU's. work: the new p in the activation type (p then
 * indexed as the moments), or NULL when work is p itself. */
template <typename T>
__global__ void adamw_kernel(float *p, T *work, const float *g, float *m, float *v, tg_spans spans, tg_adamw_args a,
                             const tg_step_stats *stats) {
    if (!stats->finite) return;
    const float clip = stats->clip, lr = stats->in.lr;
    const float step_size = __fdiv_rn(lr, stats->in.bc1), bc2_sqrt = __fsqrt_rn(stats->in.bc2);
    const tg_span &sp = spans.span[blockIdx.y];
    const float weight_decay = sp.decay ? a.weight_decay : 0.0f;
    size_t first, last;
    span_slice(sp, &first, &last);
    span_for_each(sp, first, last, [&](size_t i, size_t k) {
        const size_t pk = work ? k : i; /* the master is packed as the moments beside a working copy */
        const float gi = __fmul_rn(g[i], clip);
        const float pi = __fmul_rn(p[pk], __fsub_rn(1.0f, __fmul_rn(lr, weight_decay)));
        const float mi = __fadd_rn(__fmul_rn(a.beta1, m[k]), __fmul_rn(__fsub_rn(1.0f, a.beta1), gi));
        const float vi = __fadd_rn(__fmul_rn(a.beta2, v[k]), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, a.beta2), gi), gi));
        m[k] = mi;
        v[k] = vi;
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), a.eps);
        const float pn = __fsub_rn(pi, __fdiv_rn(__fmul_rn(step_size, mi), denom));
        p[pk] = pn;
        if (work) tg_store(work, i, pn);
    });
}

template <typename D, typename S>
__global__ void convert_kernel(D *dst, const S *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        tg_store(dst, i, tg_load(src, i));
}

} // namespace

void cuda_adamw(tg_o o, float *p, void *work, const float *g, float *m, float *v, const tg_spans *spans,
                const tg_adamw_args *a, const tg_step_stats *s) {
    if (spans->n <= 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    const dim3 grid(span_blocks(spans, ADAMW_SLICE, ADAMW_MAX_BLOCKS), (unsigned)spans->n);
    if (o->act == TG_BF16) {
        __nv_bfloat16 *w = work != (void *)p ? (__nv_bfloat16 *)work : NULL;
        adamw_kernel<<<grid, THREADS, 0, stream>>>(p, w, g, m, v, *spans, *a, s);
    } else {
        float *w = work != (void *)p ? (float *)work : NULL;
        adamw_kernel<<<grid, THREADS, 0, stream>>>(p, w, g, m, v, *spans, *a, s);
    }
    CUDA_LAUNCHED("adamw_kernel");
}

void cuda_cast_params(tg_o o, void *dst, const float *src, size_t n) {
    if (n == 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) {
        convert_kernel<<<grid_for(n), THREADS, 0, stream>>>((__nv_bfloat16 *)dst, src, n);
        CUDA_LAUNCHED("convert_kernel (cast_params)");
    } else if (dst != (const void *)src) {
        CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    }
}

void cuda_to_float(tg_o o, float *dst, const void *src, size_t n) {
    if (n == 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) {
        convert_kernel<<<grid_for(n), THREADS, 0, stream>>>(dst, (const __nv_bfloat16 *)src, n);
        CUDA_LAUNCHED("convert_kernel (to_float)");
    } else if ((const void *)dst != src) {
        CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    }
}

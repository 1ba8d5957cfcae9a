/* AdamW over the parameter spans in one launch (kernels/cuda/spans.cuh:
 * each span its own count of slices, span_grid), and the casts between
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
#include "kernels/cuda/vec.cuh"

#define THREADS 256
#define MAX_BLOCKS (1u << 20) /* grid-stride loops cover the rest */
#define ADAMW_SLICE ((size_t)THREADS * 16) /* elements per block and span, at least */
#define ADAMW_MAX_BLOCKS 4096u

namespace {

unsigned grid_for(size_t n) {
    unsigned b = tg_blocks(n, THREADS);
    return b < MAX_BLOCKS ? b : MAX_BLOCKS;
}

/* AdamW's constants for one span's elements in one step. */
struct adamw_consts {
    float clip, lr, step_size, bc2_sqrt, weight_decay, beta1, beta2, eps;
};

/* torch.optim.AdamW on one element: decay, moments (m, v updated), then
 * returns p - step_size * m / (sqrt(v) / bc2_sqrt + eps), on the gradient g
 * times the clip factor, every operation explicitly rounded. */
static __device__ __forceinline__ float adamw_element(float g, float p, float &m, float &v, const adamw_consts &a) {
    const float gi = __fmul_rn(g, a.clip);
    const float pi = __fmul_rn(p, __fsub_rn(1.0f, __fmul_rn(a.lr, a.weight_decay)));
    m = __fadd_rn(__fmul_rn(a.beta1, m), __fmul_rn(__fsub_rn(1.0f, a.beta1), gi));
    v = __fadd_rn(__fmul_rn(a.beta2, v), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, a.beta2), gi), gi));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), a.bc2_sqrt), a.eps);
    return __fsub_rn(pi, __fdiv_rn(__fmul_rn(a.step_size, m), denom));
}

/* Four new parameters into the working copy from w (4 floats: one 16-byte
 * store; 4 bf16: one 8-byte store, w then 8-byte aligned). */
static __device__ __forceinline__ void store4(float *w, const vec_pack<float> &x) { vec_store(w, x); }
static __device__ __forceinline__ void store4(__nv_bfloat16 *w, const vec_pack<float> &x) {
    alignas(8) __nv_bfloat16 h[4];
#pragma unroll
    for (int e = 0; e < 4; e++) h[e] = __float2bfloat16_rn(x.e[e]);
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint2 *>(w) = *reinterpret_cast<const uint2 *>(h);
#else /* the emulation: a misaligned 8-byte store faults on the device */
    if (((uintptr_t)w & 7u) != 0) {
        fprintf(stderr, "emu: ERROR adamw store4: misaligned 8-byte store (%p)\n", (void *)w);
        abort();
    }
    memcpy(w, h, sizeof h);
#endif
}

/* torch.optim.AdamW on the spans' elements (adamw_element), nothing unless
 * the step's loss and norm were finite. The step's learning rate and bias
 * corrections come from stats (so the launch is the same every step);
 * step_size and bc2_sqrt are correctly rounded, as the CPU's. work: the
 * new p in the activation type (p then indexed as the moments), or NULL
 * when work is p itself. by4: every pointer allows 16-byte accesses, so
 * aligned quadruples move as vectors (span_for_each_by4: the same
 * arithmetic per element, so the same bits). One element per thread at a
 * time kept 16 bytes of loads in flight per thread, and reached about 73%
 * of the memory bandwidth on an H200 at 1.2B parameters; a quadruple keeps
 * 64. */
template <typename T>
__global__ void adamw_kernel(float *p, T *work, const float *g, float *m, float *v, tg_spans spans, span_grid grid,
                             tg_adamw_args args, const tg_step_stats *stats, bool by4) {
    if (!stats->finite) return;
    size_t first, last;
    const tg_span &sp = spans.span[span_grid_slice(grid, spans, &first, &last)];
    const float lr = stats->in.lr;
    const adamw_consts a = {stats->clip,  lr,         __fdiv_rn(lr, stats->in.bc1), __fsqrt_rn(stats->in.bc2),
                            sp.decay ? args.weight_decay : 0.0f, args.beta1, args.beta2, args.eps};
    span_for_each_by4(
        sp, first, last, by4,
        [&](size_t i, size_t k) {
            const size_t pk = work ? k : i; /* the master is packed as the moments beside a working copy */
            float mi = m[k], vi = v[k];
            const float pn = adamw_element(g[i], p[pk], mi, vi, a);
            m[k] = mi;
            v[k] = vi;
            p[pk] = pn;
            if (work) tg_store(work, i, pn);
        },
        [&](size_t i, size_t k) {
            const size_t pk = work ? k : i;
            const vec_pack<float> g4 = vec_load(g + i);
            vec_pack<float> p4 = vec_load(p + pk), m4 = vec_load(m + k), v4 = vec_load(v + k);
#pragma unroll
            for (int e = 0; e < 4; e++) p4.e[e] = adamw_element(g4.e[e], p4.e[e], m4.e[e], v4.e[e], a);
            vec_store(m + k, m4);
            vec_store(v + k, v4);
            vec_store(p + pk, p4);
            if (work) store4(work + i, p4);
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
    const span_grid blocks = span_grid_of(spans, ADAMW_SLICE, ADAMW_MAX_BLOCKS);
    const unsigned grid = blocks.first[spans->n];
    const bool by4 = vec_aligned(p, work, g, m) && vec_aligned(v);
    if (o->act == TG_BF16) {
        __nv_bfloat16 *w = work != (void *)p ? (__nv_bfloat16 *)work : NULL;
        adamw_kernel<<<grid, THREADS, 0, stream>>>(p, w, g, m, v, *spans, blocks, *a, s, by4);
    } else {
        float *w = work != (void *)p ? (float *)work : NULL;
        adamw_kernel<<<grid, THREADS, 0, stream>>>(p, w, g, m, v, *spans, blocks, *a, s, by4);
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

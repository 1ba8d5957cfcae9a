/* Optimizer-side vector ops on float32 master state, and the casts between
 * the master weights and the activation-type working copy.
 * sum_squares: each block sums a fixed slice of x in double (threads, then a
 * fixed shared-memory tree) into a partial in ctx scratch; one block adds the
 * partials the same way and the result is copied to the host. The slicing
 * depends only on n, so the sum is the same on every run.
 * scale, adamw, casts: elementwise, one thread per element in a grid-stride
 * loop. AdamW follows kernels/cpu/vector.c's cpu_adamw (torch's order) with
 * explicitly rounded operations (__fmul_rn, ...) so that nothing is fused
 * and the float32 result matches the CPU's bit for bit. */
#include <math.h>

#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/reduce.cuh"

#define THREADS 256
#define MAX_BLOCKS (1u << 20) /* grid-stride loops cover the rest */
#define SUMSQ_THREADS 256     /* a power of two (tree reduction) */
#define SUMSQ_MIN_SLICE ((size_t)4096)
#define SUMSQ_MAX_BLOCKS ((size_t)4096)

namespace {

unsigned grid_for(size_t n) {
    unsigned b = tg_blocks(n, THREADS);
    return b < MAX_BLOCKS ? b : MAX_BLOCKS;
}

/* partial[block] = sum of x[i]^2 over the block's slice [block * slice, +slice). */
__global__ void sum_squares_partials_kernel(double *partial, const float *x, size_t n, size_t slice) {
    __shared__ double vals[SUMSQ_THREADS];
    size_t start = (size_t)blockIdx.x * slice;
    size_t end = start + slice < n ? start + slice : n;
    double acc = 0.0;
    for (size_t i = start + threadIdx.x; i < end; i += SUMSQ_THREADS) {
        double v = (double)x[i];
        acc += v * v;
    }
    vals[threadIdx.x] = acc;
    tg_reduce::block_tree_sum<SUMSQ_THREADS>(vals);
    if (threadIdx.x == 0) partial[blockIdx.x] = vals[0];
}

/* One block: *result = sum of partial[0..count). */
__global__ void sum_squares_finish_kernel(double *result, const double *partial, int count) {
    __shared__ double vals[SUMSQ_THREADS];
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += SUMSQ_THREADS) acc += partial[i];
    vals[threadIdx.x] = acc;
    tg_reduce::block_tree_sum<SUMSQ_THREADS>(vals);
    if (threadIdx.x == 0) *result = vals[0];
}

__global__ void scale_kernel(float *x, float s, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) x[i] *= s;
}

/* torch.optim.AdamW: decay, moments, then
 * p -= step_size * m / (sqrt(v) / bc2_sqrt + eps). work: the new p in the
 * activation type, or NULL when work is p itself. */
template <typename T>
__global__ void adamw_kernel(float *p, T *work, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                             float eps, float weight_decay, float step_size, float bc2_sqrt) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i];
        float pi = __fmul_rn(p[i], __fsub_rn(1.0f, __fmul_rn(lr, weight_decay)));
        float mi = __fadd_rn(__fmul_rn(beta1, m[i]), __fmul_rn(__fsub_rn(1.0f, beta1), gi));
        float vi = __fadd_rn(__fmul_rn(beta2, v[i]), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, beta2), gi), gi));
        m[i] = mi;
        v[i] = vi;
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        float pn = __fsub_rn(pi, __fdiv_rn(__fmul_rn(step_size, mi), denom));
        p[i] = pn;
        if (work) tg_store(work, i, pn);
    }
}

template <typename D, typename S>
__global__ void convert_kernel(D *dst, const S *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        tg_store(dst, i, tg_load(src, i));
}

template <typename T>
void adamw(cudaStream_t stream, float *p, void *work, const float *g, float *m, float *v, size_t n, float lr, float beta1,
           float beta2, float eps, float weight_decay, float step_size, float bc2_sqrt) {
    T *w = work != (void *)p ? (T *)work : NULL;
    adamw_kernel<T><<<grid_for(n), THREADS, 0, stream>>>(p, w, g, m, v, n, lr, beta1, beta2, eps, weight_decay, step_size,
                                                         bc2_sqrt);
    CUDA_LAUNCHED("adamw_kernel");
}

} // namespace

double cuda_sum_squares(tg_o o, const float *x, size_t n) {
    if (n == 0) return 0.0;
    cuda_ctx *ctx = cuda_ctx_of(o);
    /* Slices of at least SUMSQ_MIN_SLICE elements, at most SUMSQ_MAX_BLOCKS of them. */
    size_t slice = (n + SUMSQ_MAX_BLOCKS - 1) / SUMSQ_MAX_BLOCKS;
    if (slice < SUMSQ_MIN_SLICE) slice = SUMSQ_MIN_SLICE;
    int blocks = (int)((n + slice - 1) / slice);
    double *result = (double *)ctx->scratch;
    double *partial = result + 1;
    sum_squares_partials_kernel<<<blocks, SUMSQ_THREADS, 0, ctx->stream>>>(partial, x, n, slice);
    CUDA_LAUNCHED("sum_squares_partials_kernel");
    sum_squares_finish_kernel<<<1, SUMSQ_THREADS, 0, ctx->stream>>>(result, partial, blocks);
    CUDA_LAUNCHED("sum_squares_finish_kernel");
    double host = 0.0;
    CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof host, cudaMemcpyDeviceToHost, ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    return host;
}

void cuda_scale(tg_o o, float *x, float s, size_t n) {
    if (n == 0) return;
    scale_kernel<<<grid_for(n), THREADS, 0, cuda_ctx_of(o)->stream>>>(x, s, n);
    CUDA_LAUNCHED("scale_kernel");
}

void cuda_adamw(tg_o o, float *p, void *work, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, float bc1, float bc2) {
    if (n == 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    const float step_size = lr / bc1, bc2_sqrt = sqrtf(bc2); /* as cpu_adamw, on the host */
    if (o->act == TG_BF16)
        adamw<__nv_bfloat16>(stream, p, work, g, m, v, n, lr, beta1, beta2, eps, weight_decay, step_size, bc2_sqrt);
    else adamw<float>(stream, p, work, g, m, v, n, lr, beta1, beta2, eps, weight_decay, step_size, bc2_sqrt);
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

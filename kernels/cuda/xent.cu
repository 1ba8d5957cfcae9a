/* Vocab-parallel softmax cross-entropy in three passes, as kernels/cpu/xent.c
 * (see kernels/ops.h): rowmax, then (sum of exponentials, target logit), then
 * the losses and the logits' gradient written over the logits; and at TP = 1
 * the fused form: each thread keeps a running max and a sum rescaled to it
 * over its columns (16-byte packs where the row allows), the block combines
 * them, and a second read writes the gradient.
 * One block per row; each thread walks the row's columns with stride
 * blockDim.x, then the block combines the threads' partials in a fixed
 * order (warp butterflies, then over the warps), so results are
 * reproducible. Logits are in the activation type, statistics float32.
 * Columns >= n_real are padding: never counted, gradient 0. */
#include <math.h>

#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/vec.cuh"

#define ROW_THREADS 512 /* a multiple of 32 */

namespace {

using tg_reduce::block_reduce;
using tg_reduce::max_op;
using tg_reduce::sum_op;


/* rowmax[n] = max over the real logits of row n (-inf when n_real is 0). */
template <typename E>
__global__ void rowmax_kernel(float *rowmax, const E *logits, int V, int n_real) {
    const E *l = logits + (size_t)blockIdx.x * V;
    float m = -INFINITY;
    for (int v = threadIdx.x; v < n_real; v += blockDim.x) m = fmaxf(m, tg_load(l, v));
    m = block_reduce(m, max_op(), -INFINITY);
    if (threadIdx.x == 0) rowmax[blockIdx.x] = m;
}

/* stats[2n] = sum over real logits of exp(logit - rowmax[n]);
 * stats[2n + 1] = the target's logit, or 0 when it is not a real column here. */
template <typename E>
__global__ void stats_kernel(float *stats, const E *logits, const float *rowmax, const int32_t *targets, int V, int n_real,
                             int vocab_start) {
    const int n = blockIdx.x;
    const E *l = logits + (size_t)n * V;
    const float m = rowmax[n];
    float sum = 0.0f;
    for (int v = threadIdx.x; v < n_real; v += blockDim.x) sum += expf(tg_load(l, v) - m);
    sum = block_reduce(sum, sum_op(), 0.0f);
    if (threadIdx.x == 0) {
        const int local = targets[n] - vocab_start;
        stats[2 * (size_t)n] = sum;
        stats[2 * (size_t)n + 1] = (local >= 0 && local < n_real) ? tg_load(l, local) : 0.0f;
    }
}

/* losses[n] = log(sum) + rowmax - target logit; the row's logits become
 * (softmax - onehot) * dloss, padding columns 0. Each thread reads and then
 * overwrites only its own columns. */
template <typename E>
__global__ void finish_kernel(float *losses, E *logits, const float *rowmax, const float *stats, const int32_t *targets, int V,
                              int n_real, int vocab_start, float dloss) {
    const int n = blockIdx.x;
    E *l = logits + (size_t)n * V;
    const float m = rowmax[n], sum = stats[2 * (size_t)n], inv = 1.0f / sum;
    const int local = targets[n] - vocab_start;
    if (threadIdx.x == 0) losses[n] = logf(sum) + m - stats[2 * (size_t)n + 1];
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float grad = 0.0f;
        if (v < n_real) {
            const float p = expf(tg_load(l, v) - m) * inv;
            grad = (p - (v == local ? 1.0f : 0.0f)) * dloss;
        }
        tg_store(l, v, grad);
    }
}

/* Adds logit x to a running (max m, sum s of exp(. - m)). */
__device__ __forceinline__ void online_add(float &m, float &s, float x) {
    if (x > m) {
        s = s * expf(m - x) + 1.0f;
        m = x;
    } else {
        s += expf(x - m);
    }
}

/* The fused cross-entropy of row blockIdx.x (TP = 1). Rows are packed when
 * `packed` (V a multiple of the pack, logits 16-byte aligned), in which
 * case padding columns are handled element by element inside the packs. */
template <typename E>
__global__ void fused_kernel(float *losses, E *logits, const int32_t *targets, int V, int n_real, float dloss, bool packed) {
    constexpr int P = vec_pack<E>::N;
    const int n = blockIdx.x;
    E *l = logits + (size_t)n * V;
    float m = -INFINITY, s = 0.0f;
    if (packed) {
        for (int k = threadIdx.x; k * P < n_real; k += blockDim.x) {
            const vec_pack<E> x = vec_load(l + k * P);
#pragma unroll
            for (int j = 0; j < P; j++)
                if (k * P + j < n_real) online_add(m, s, tg_load(x.e, j));
        }
    } else {
        for (int v = threadIdx.x; v < n_real; v += blockDim.x) online_add(m, s, tg_load(l, v));
    }
    const float row_max = block_reduce(m, max_op(), -INFINITY);
    const float sum = block_reduce(m == -INFINITY ? 0.0f : s * expf(m - row_max), sum_op(), 0.0f);
    const int target = targets[n];
    const float target_logit = target >= 0 && target < n_real ? tg_load(l, target) : 0.0f;
    __syncthreads(); /* every thread has read the target's logit before any overwrites it */
    if (threadIdx.x == 0) losses[n] = logf(sum) + row_max - target_logit;
    const float inv = 1.0f / sum;
    if (packed) {
        for (int k = threadIdx.x; k * P < V; k += blockDim.x) {
            const vec_pack<E> x = vec_load(l + k * P);
            vec_pack<E> g;
#pragma unroll
            for (int j = 0; j < P; j++) {
                const int v = k * P + j;
                const float p = v < n_real ? expf(tg_load(x.e, j) - row_max) * inv : 0.0f;
                tg_store(g.e, j, v < n_real ? (p - (v == target ? 1.0f : 0.0f)) * dloss : 0.0f);
            }
            vec_store(l + k * P, g);
        }
    } else {
        for (int v = threadIdx.x; v < V; v += blockDim.x) {
            float grad = 0.0f;
            if (v < n_real) grad = (expf(tg_load(l, v) - row_max) * inv - (v == target ? 1.0f : 0.0f)) * dloss;
            tg_store(l, v, grad);
        }
    }
}

} // namespace

void cuda_xent_fused(tg_o o, float *losses, void *logits, const int32_t *targets, int N, int V, int n_real, float dloss) {
    if (N <= 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) {
        const bool packed = V % vec_pack<__nv_bfloat16>::N == 0 && vec_aligned(logits);
        fused_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(losses, (__nv_bfloat16 *)logits, targets, V, n_real, dloss,
                                                              packed);
    } else {
        const bool packed = V % vec_pack<float>::N == 0 && vec_aligned(logits);
        fused_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(losses, (float *)logits, targets, V, n_real, dloss, packed);
    }
    CUDA_LAUNCHED("xent fused_kernel");
}

void cuda_xent_rowmax(tg_o o, float *rowmax, const void *logits, int N, int V, int n_real) {
    if (N <= 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16)
        rowmax_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(rowmax, (const __nv_bfloat16 *)logits, V, n_real);
    else
        rowmax_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(rowmax, (const float *)logits, V, n_real);
    CUDA_LAUNCHED("xent rowmax_kernel");
}

void cuda_xent_stats(tg_o o, float *stats, const void *logits, const float *rowmax, const int32_t *targets, int N, int V,
                     int n_real, int vocab_start) {
    if (N <= 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16)
        stats_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(stats, (const __nv_bfloat16 *)logits, rowmax, targets, V, n_real,
                                                              vocab_start);
    else
        stats_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(stats, (const float *)logits, rowmax, targets, V, n_real,
                                                              vocab_start);
    CUDA_LAUNCHED("xent stats_kernel");
}

void cuda_xent_finish(tg_o o, float *losses, void *logits, const float *rowmax, const float *stats, const int32_t *targets,
                      int N, int V, int n_real, int vocab_start, float dloss) {
    if (N <= 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16)
        finish_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(losses, (__nv_bfloat16 *)logits, rowmax, stats, targets, V,
                                                               n_real, vocab_start, dloss);
    else
        finish_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(losses, (float *)logits, rowmax, stats, targets, V, n_real,
                                                               vocab_start, dloss);
    CUDA_LAUNCHED("xent finish_kernel");
}

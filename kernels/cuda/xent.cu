/* Vocab-parallel softmax cross-entropy, as kernels/cpu/xent.c (see
 * kernels/ops.h): under TP one read of the logits for the row statistics
 * (each thread keeps a running max and a sum rescaled to it over its
 * columns, 16-byte packs where the row allows, and the block combines
 * them), a small kernel that rescales the sums to the group's max between
 * the two all-reduces, and a second read that writes the losses and the
 * logits' gradient over the logits; at TP = 1 the fused form, the same
 * statistics and gradient in one launch, and in bf16, where a row fits in
 * shared memory, one that stages it there and reads the logits once
 * (fused_staged_kernel).
 * One block per row; each thread walks the row's columns with stride
 * blockDim.x, then the block combines the threads' partials in a fixed
 * order (warp butterflies, then over the warps), so results are
 * reproducible. Logits are in the activation type, statistics float32.
 * Columns >= n_real are padding: never counted, gradient 0. */
#include <math.h>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/exp2_ftz.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/vec.cuh"

#define ROW_THREADS 512 /* a multiple of 32 */
#define XENT_AHEAD 8 /* 16-byte copies in flight a thread while staging a row (fused_staged_kernel) */

namespace {

using tg_reduce::block_reduce;
using tg_reduce::max_op;
using tg_reduce::sum_op;


/* Adds logit x to a running (max m, sum s of exp(. - m)). */
__device__ __forceinline__ void online_add(float &m, float &s, float x) {
    if (x > m) {
        s = s * expf(m - x) + 1.0f;
        m = x;
    } else {
        s += expf(x - m);
    }
}

/* Row l's (max, sum of exp(logit - max)) over its real columns, combined
 * over the block (-inf and 0 without real columns). Rows are packed when
 * `packed` (V a multiple of the pack, logits 16-byte aligned), in which
 * case padding columns are handled element by element inside the packs. */
template <typename E>
__device__ void row_statistics(const E *l, int n_real, bool packed, float &row_max, float &sum) {
    constexpr int P = vec_pack<E>::N;
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
    row_max = block_reduce(m, max_op(), -INFINITY);
    sum = block_reduce(m == -INFINITY ? 0.0f : s * expf(m - row_max), sum_op(), 0.0f);
}

/* The first pass under TP, row blockIdx.x: its statistics over this rank's
 * columns, and the target's logit where this rank holds it. */
template <typename E>
__global__ void partial_kernel(float *rowmax, float *local_max, float *stats, const E *logits, const int32_t *targets, int V,
                               int n_real, int vocab_start, bool packed) {
    const int n = blockIdx.x;
    const E *l = logits + (size_t)n * V;
    float m, sum;
    row_statistics(l, n_real, packed, m, sum);
    if (threadIdx.x == 0) {
        const int local = targets[n] - vocab_start;
        rowmax[n] = local_max[n] = m;
        stats[2 * (size_t)n] = sum;
        stats[2 * (size_t)n + 1] = (local >= 0 && local < n_real) ? tg_load(l, local) : 0.0f;
    }
}

/* Each row's sum from its local max to the group's (a rank without real
 * columns keeps its 0). */
__global__ void rescale_kernel(float *stats, const float *local_max, const float *rowmax, int N) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < N && stats[2 * (size_t)n] > 0.0f) stats[2 * (size_t)n] *= expf(local_max[n] - rowmax[n]);
}

/* Row l's logits overwritten by their gradient (softmax - onehot at
 * column `target`, which may lie outside this rank's columns) * dloss,
 * padding columns 0; packed as row_statistics reads. Each thread reads and
 * then overwrites only its own columns. */
template <typename E>
__device__ void write_gradient(E *l, int V, int n_real, int target, float row_max, float sum, float dloss, bool packed) {
    constexpr int P = vec_pack<E>::N;
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

/* The last pass under TP, row blockIdx.x: the loss from the group's max
 * and sums, and the gradient over the logits. */
template <typename E>
__global__ void finish_kernel(float *losses, E *logits, const float *rowmax, const float *stats, const int32_t *targets, int V,
                              int n_real, int vocab_start, float dloss, bool packed) {
    const int n = blockIdx.x;
    const float m = rowmax[n], sum = stats[2 * (size_t)n];
    if (threadIdx.x == 0) losses[n] = logf(sum) + m - stats[2 * (size_t)n + 1];
    write_gradient(logits + (size_t)n * V, V, n_real, targets[n] - vocab_start, m, sum, dloss, packed);
}

/* The fused cross-entropy of row blockIdx.x (TP = 1). */
template <typename E>
__global__ void fused_kernel(float *losses, E *logits, const int32_t *targets, int V, int n_real, float dloss, bool packed) {
    const int n = blockIdx.x;
    E *l = logits + (size_t)n * V;
    float row_max, sum;
    row_statistics<E>(l, n_real, packed, row_max, sum);
    const int target = targets[n];
    const float target_logit = target >= 0 && target < n_real ? tg_load(l, target) : 0.0f;
    __syncthreads(); /* every thread has read the target's logit before any overwrites it */
    if (threadIdx.x == 0) losses[n] = logf(sum) + row_max - target_logit;
    write_gradient(l, V, n_real, target, row_max, sum, dloss, packed);
}

/* The fused cross-entropy of row blockIdx.x (TP = 1; launched for bf16,
 * packed rows) with the row staged in dynamic shared memory: the logits are
 * read from global memory once (fused_kernel reads them twice, the second
 * time from L2 only while the rows in flight fit there: at GPT-2's
 * vocabulary a row is 100 KB, and about 500 rows run at once on an H100,
 * as much as its L2 holds). Each thread stages
 * and rereads only its own packs. Two passes: while staging, each thread's
 * running max and its sum of 2^((x - max) log2(e)) (one FFMA and one ex2
 * per logit, exp2_ftz), rescaled when a pack raises the max (one ex2 more);
 * the block combines them, each thread's sum rescaled to the row's max;
 * then over the staged row the gradient, the same exponential from the
 * row's max, scaled, less dloss at the target. The sum's exponentials run
 * while the block's loads are in flight, where a pass of their own after
 * the max's barrier left the memory idle (1.2 ms at 124M on the H200, 2756
 * GB/s, where reading and writing the logits once takes 0.8). */
template <typename E>
__global__ void __launch_bounds__(ROW_THREADS)
    fused_staged_kernel(float *losses, E *logits, const int32_t *targets, int V, int n_real, float dloss) {
    extern __shared__ __align__(16) unsigned char xent_shared[]; /* V elements */
    using pack = vec_pack<E>;
    constexpr int P = pack::N;
    pack *staged = reinterpret_cast<pack *>(xent_shared);
    const int n = blockIdx.x, packs = V / P;
    E *l = logits + (size_t)n * V;
    /* this thread's max m over its real columns, and its sum of 2^(x log2(e) - shift), shift = m log2(e) rounded
     * (0 while every real column so far is -inf: terms of 0); rescaled by the shifts' difference, as the row's
     * share is, so that the terms carry the gradient's exponent, x log2(e) less the row's shift */
    float m = -INFINITY, shift = 0.0f, s = 0.0f;
    const auto add = [&](int k, const pack &x) { /* pack k into m, shift and s */
        float pack_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < P; j++)
            if (k * P + j < n_real) pack_max = fmaxf(pack_max, tg_load(x.e, j));
        if (pack_max > m) {
            const float raised = pack_max * EXP2_LOG2E;
            s = m == -INFINITY ? 0.0f : s * exp2_ftz(shift - raised); /* from -inf: no terms yet */
            m = pack_max;
            shift = raised;
        }
#pragma unroll
        for (int j = 0; j < P; j++)
            if (k * P + j < n_real) s += exp2_ftz(fmaf(tg_load(x.e, j), EXP2_LOG2E, -shift));
    };
    /* The row staged by cp.async, XENT_AHEAD rounds of a thread's packs (k,
     * k + blockDim.x, ...) ahead of the one it adds, with no register
     * waiting on a load: where a loop loaded each pack into registers
     * (even unrolled 4 times, with the loads written first), ptxas placed
     * each pack's load after the work on the pack before, which waits for
     * that pack's: one load in flight a thread. A round's group is
     * committed every iteration, empty or not, so that waiting for all but
     * the XENT_AHEAD - 1 newest means round r has landed. The same packs
     * added in the same order: the same bits. */
    const int step = (int)blockDim.x;
#pragma unroll
    for (int r = 0; r < XENT_AHEAD; r++) {
        const int k = (int)threadIdx.x + r * step;
        if (k < packs) async_copy16(staged + k, l + (size_t)k * P);
        async_commit();
    }
    for (int k = threadIdx.x; k < packs; k += step) {
        async_wait<XENT_AHEAD - 1>();
        const pack x = staged[k]; /* one 16-byte read */
        add(k, x);
        const int next = k + XENT_AHEAD * step;
        if (next < packs) async_copy16(staged + next, l + (size_t)next * P);
        async_commit();
    }
    async_wait<0>(); /* nothing in flight at the barriers below (the last groups are empty) */
    const float row_max = block_reduce(m, max_op(), -INFINITY); /* its barriers also show the staged row */
    const float row_shift = row_max == -INFINITY ? 0.0f : row_max * EXP2_LOG2E; /* no real column: every term is 0 */
    const float own = m == -INFINITY ? 0.0f : s * exp2_ftz(shift - row_shift); /* no real column of its own: 0 */
    const float sum = block_reduce(own, sum_op(), 0.0f), scale = dloss / sum;
    const int target = targets[n];
    if (threadIdx.x == 0) {
        const float target_logit = target >= 0 && target < n_real ? tg_load(staged[target / P].e, target % P) : 0.0f;
        losses[n] = logf(sum) + row_max - target_logit;
    }
    for (int k = threadIdx.x; k < packs; k += blockDim.x) {
        const pack x = staged[k];
        pack g;
#pragma unroll
        for (int j = 0; j < P; j++) {
            const int v = k * P + j;
            const float p = v < n_real ? exp2_ftz(fmaf(tg_load(x.e, j), EXP2_LOG2E, -row_shift)) * scale : 0.0f;
            tg_store(g.e, j, v < n_real && v == target ? p - dloss : p); /* padding: 0, as fused_kernel */
        }
        vec_store(l + k * P, g);
    }
}

/* Whether fused_staged_kernel takes the rows: packed bf16 whose row fits
 * the shared memory a block may opt in to, beside the kernel's static
 * shared memory (block_reduce's warp values: 256 bytes by ptxas on sm_80
 * and sm_90a; 1 KiB is kept), which counts against the same limit. */
static bool staged_fits(const cuda_ctx *ctx, int V, bool packed) {
    const size_t static_reserve = 1024;
    return packed && (size_t)V * sizeof(__nv_bfloat16) + static_reserve <= (size_t)ctx->shared_optin;
}

} // namespace

void cuda_xent_fused(tg_o o, float *losses, void *logits, const int32_t *targets, int N, int V, int n_real, float dloss) {
    if (N <= 0) return;
    cuda_ctx *ctx = cuda_ctx_of(o);
    cudaStream_t stream = ctx->stream;
    if (o->act == TG_BF16) {
        const bool packed = V % vec_pack<__nv_bfloat16>::N == 0 && vec_aligned(logits);
        if (staged_fits(ctx, V, packed)) {
            const int shared = V * (int)sizeof(__nv_bfloat16);
            CUDA_CHECK(cudaFuncSetAttribute((const void *)fused_staged_kernel<__nv_bfloat16>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
            fused_staged_kernel<__nv_bfloat16><<<(unsigned)N, ROW_THREADS, shared, stream>>>(
                losses, (__nv_bfloat16 *)logits, targets, V, n_real, dloss);
            CUDA_LAUNCHED("xent fused_staged_kernel");
            return;
        }
        fused_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(losses, (__nv_bfloat16 *)logits, targets, V, n_real, dloss,
                                                              packed);
    } else {
        const bool packed = V % vec_pack<float>::N == 0 && vec_aligned(logits);
        fused_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(losses, (float *)logits, targets, V, n_real, dloss, packed);
    }
    CUDA_LAUNCHED("xent fused_kernel");
}

void cuda_xent_partial(tg_o o, float *rowmax, float *local_max, float *stats, const void *logits, const int32_t *targets,
                       int N, int V, int n_real, int vocab_start) {
    if (N <= 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) {
        const bool packed = V % vec_pack<__nv_bfloat16>::N == 0 && vec_aligned(logits);
        partial_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(rowmax, local_max, stats, (const __nv_bfloat16 *)logits,
                                                                targets, V, n_real, vocab_start, packed);
    } else {
        const bool packed = V % vec_pack<float>::N == 0 && vec_aligned(logits);
        partial_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(rowmax, local_max, stats, (const float *)logits, targets, V,
                                                                n_real, vocab_start, packed);
    }
    CUDA_LAUNCHED("xent partial_kernel");
}

void cuda_xent_rescale(tg_o o, float *stats, const float *local_max, const float *rowmax, int N) {
    if (N <= 0) return;
    const unsigned threads = 256;
    rescale_kernel<<<((unsigned)N + threads - 1) / threads, threads, 0, cuda_ctx_of(o)->stream>>>(stats, local_max, rowmax, N);
    CUDA_LAUNCHED("xent rescale_kernel");
}

void cuda_xent_finish(tg_o o, float *losses, void *logits, const float *rowmax, const float *stats, const int32_t *targets,
                      int N, int V, int n_real, int vocab_start, float dloss) {
    if (N <= 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) {
        const bool packed = V % vec_pack<__nv_bfloat16>::N == 0 && vec_aligned(logits);
        finish_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(losses, (__nv_bfloat16 *)logits, rowmax, stats, targets, V,
                                                               n_real, vocab_start, dloss, packed);
    } else {
        const bool packed = V % vec_pack<float>::N == 0 && vec_aligned(logits);
        finish_kernel<<<(unsigned)N, ROW_THREADS, 0, stream>>>(losses, (float *)logits, rowmax, stats, targets, V, n_real,
                                                               vocab_start, dloss, packed);
    }
    CUDA_LAUNCHED("xent finish_kernel");
}

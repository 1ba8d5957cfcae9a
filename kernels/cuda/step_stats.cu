/* The step's scalars on the device (tg_step_stats, kernels/ops.h): the
 * loss accumulated per micro-batch, the gradients' sum of squares over the
 * parameter spans in one multi-tensor pass, and the global norm's clip
 * factor and finiteness, which AdamW reads on the device. Nothing here
 * waits on the host: the trainer reads the scalars once, at the step's end.
 * Every sum runs in a fixed order (per block, then the blocks in order), so
 * results repeat run to run, and the exact sum of squares that ranks add
 * (kernels/exact_sumsq.h) is the same in any order; the scalar kernels use correctly rounded
 * double operations, as kernels/cpu/optimizer.c does. */
#include <math.h>

#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/spans.cuh"

#define STATS_THREADS 256        /* a power of two (tree reductions) */
#define SUMSQ_MIN_SLICE 4096     /* elements per block at least */
#define SUMSQ_MAX_BLOCKS 1024    /* blocks per span at most */

namespace {

/* s->loss_acc += (float)(sum of losses / N): one block, double sums. */
__global__ void loss_accumulate_kernel(tg_step_stats *s, const float *losses, int N) {
    __shared__ double vals[STATS_THREADS];
    double acc = 0.0;
    for (int i = threadIdx.x; i < N; i += STATS_THREADS) acc += (double)losses[i];
    vals[threadIdx.x] = acc;
    tg_reduce::block_tree_sum<STATS_THREADS>(vals);
    if (threadIdx.x == 0) s->loss_acc = __dadd_rn(s->loss_acc, (double)(float)(vals[0] / N));
}

__global__ void loss_finish_kernel(tg_step_stats *s, int n_micro, float divisor) {
    s->loss = __fdiv_rn((float)(s->loss_acc / n_micro), divisor);
    s->loss_acc = 0.0;
}

/* Block tree sum of exact sums (kernels/exact_sumsq.h): integer adds, so
 * the tree's shape does not matter. Ends with every thread past it. */
__device__ void exact_tree_sum(exact_sumsq *vals) {
    __syncthreads();
    for (int half = STATS_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) exact_sumsq_merge(&vals[threadIdx.x], &vals[threadIdx.x + half]);
        __syncthreads();
    }
}

/* partial[blockIdx.x] = the block's slice's sum of squares (its span's
 * blocks numbered from grid.first[span], span_grid), and with EXACT
 * exact[the same] its exact sum. Without, a load and two
 * double operations an element: bound by memory. The exact sum took some
 * fifty instructions an element through doubles (exact_sumsq_add:
 * conversions to 64-bit integers, carry loops), which made the kernel bound
 * by them at 877 GB/s on an H200 (results/gpu/2026-11-30_h200); now
 * exact_sumsq_add_int, the same words from the float's bits. */
template <bool EXACT>
__global__ void sumsq_partials_kernel(double *partial, exact_sumsq *exact, const float *g, tg_spans spans, span_grid grid) {
    __shared__ double vals[STATS_THREADS];
    __shared__ exact_sumsq exact_vals[EXACT ? STATS_THREADS : 1];
    size_t first, last;
    const tg_span &sp = spans.span[span_grid_slice(grid, spans, &first, &last)];
    double acc = 0.0;
    exact_sumsq mine = {{0}, 0};
    /* 8 loads in flight a thread (span_read_each), where each waited for the one before */
    span_read_each<8>(sp, first, last, g, [&](float x) {
        const double v = (double)x;
        acc += v * v;
        if (EXACT) exact_sumsq_add_int(&mine, x); /* the CPU's sum, in integer operations */
    });
    vals[threadIdx.x] = acc;
    tg_reduce::block_tree_sum<STATS_THREADS>(vals);
    if (EXACT) {
        exact_vals[threadIdx.x] = mine;
        exact_tree_sum(exact_vals);
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = vals[0];
        if (EXACT) exact[blockIdx.x] = exact_vals[0];
    }
}

/* One block: the partials of each span (its blocks of grid) summed, the
 * spans added in order; the exact partials summed in any order (exact
 * NULL: none, the pieces say NaN). */
__global__ void sumsq_finish_kernel(tg_step_stats *s, const double *partial, const exact_sumsq *exact, int n_spans, span_grid grid) {
    __shared__ double vals[STATS_THREADS];
    __shared__ exact_sumsq exact_vals[STATS_THREADS];
    double total = 0.0; /* thread 0's */
    for (int k = 0; k < n_spans; k++) {
        double acc = 0.0;
        for (unsigned i = grid.first[k] + threadIdx.x; i < grid.first[k + 1]; i += STATS_THREADS) acc += partial[i];
        /* Thread 0 has read the last span's sum before vals is written again. block_tree_sum's
         * closing barrier should already order this, yet racecheck reported a hazard between this
         * write and that read on an H200 (results/gpu/2026-11-27_h200); the barrier costs a
         * one-block kernel next to nothing and makes the order explicit. */
        __syncthreads();
        vals[threadIdx.x] = acc;
        tg_reduce::block_tree_sum<STATS_THREADS>(vals);
        if (threadIdx.x == 0) total += vals[0];
    }
    exact_sumsq mine = {{0}, exact ? 0 : EXACT_SUMSQ_NAN};
    for (unsigned i = threadIdx.x; exact && i < grid.first[n_spans]; i += STATS_THREADS) exact_sumsq_merge(&mine, &exact[i]);
    exact_vals[threadIdx.x] = mine;
    exact_tree_sum(exact_vals);
    if (threadIdx.x == 0) {
        s->sumsq = total;
        exact_sumsq_pieces(&exact_vals[0], s->sumsq_pieces);
    }
}

__global__ void clip_factor_kernel(tg_step_stats *s, int reduced, double max_norm) {
    const double norm = sqrt(reduced ? exact_sumsq_value(s->sumsq_pieces) : s->sumsq);
    s->norm = norm;
    s->finite = isfinite(s->loss) && isfinite(norm);
    const double coef = __ddiv_rn(max_norm, __dadd_rn(norm, 1e-6)); /* torch's clip_grad_norm_ */
    s->clip = max_norm > 0.0 && coef < 1.0 ? (float)coef : 1.0f;
}

} // namespace

void cuda_loss_accumulate(tg_o o, tg_step_stats *s, const float *losses, int N) {
    if (N <= 0) return;
    loss_accumulate_kernel<<<1, STATS_THREADS, 0, cuda_ctx_of(o)->stream>>>(s, losses, N);
    CUDA_LAUNCHED("loss_accumulate_kernel");
}

void cuda_loss_finish(tg_o o, tg_step_stats *s, int n_micro, float divisor) {
    loss_finish_kernel<<<1, 1, 0, cuda_ctx_of(o)->stream>>>(s, n_micro, divisor);
    CUDA_LAUNCHED("loss_finish_kernel");
}

void cuda_grad_sumsq(tg_o o, tg_step_stats *s, const float *g, const tg_spans *spans, int exact_wanted) {
    cuda_ctx *ctx = cuda_ctx_of(o);
    const span_grid blocks = span_grid_of(spans, SUMSQ_MIN_SLICE, SUMSQ_MAX_BLOCKS);
    /* a double and an exact sum per block (TG_MAX_SPANS * SUMSQ_MAX_BLOCKS at most) */
    double *partial = (double *)ctx->scratch;
    exact_sumsq *exact = (exact_sumsq *)(partial + blocks.first[spans->n]);
    static_assert((sizeof(double) + sizeof(exact_sumsq)) * TG_MAX_SPANS * SUMSQ_MAX_BLOCKS <= CUDA_SCRATCH_BYTES,
                  "grad_sumsq's partials fit the scratch");
    const unsigned grid = blocks.first[spans->n];
    if (spans->n > 0 && exact_wanted) {
        sumsq_partials_kernel<true><<<grid, STATS_THREADS, 0, ctx->stream>>>(partial, exact, g, *spans, blocks);
        CUDA_LAUNCHED("sumsq_partials_kernel<true>");
    } else if (spans->n > 0) {
        sumsq_partials_kernel<false><<<grid, STATS_THREADS, 0, ctx->stream>>>(partial, nullptr, g, *spans, blocks);
        CUDA_LAUNCHED("sumsq_partials_kernel<false>");
    }
    sumsq_finish_kernel<<<1, STATS_THREADS, 0, ctx->stream>>>(s, partial, exact_wanted ? exact : nullptr, spans->n, blocks);
    CUDA_LAUNCHED("sumsq_finish_kernel");
}

void cuda_grad_clip_factor(tg_o o, tg_step_stats *s, int reduced, double max_norm) {
    clip_factor_kernel<<<1, 1, 0, cuda_ctx_of(o)->stream>>>(s, reduced, max_norm);
    CUDA_LAUNCHED("clip_factor_kernel");
}

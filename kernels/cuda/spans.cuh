/* The multi-tensor kernels' walk over a tg_span (kernels/ops.h): a span's
 * tensors, flattened one after another, are cut into equal slices, one per
 * block; each block walks its slice in runs that stay inside one tensor, so
 * the index arithmetic (one 64-bit division) is per run, not per element. */
#ifndef KERNELS_CUDA_SPANS_CUH
#define KERNELS_CUDA_SPANS_CUH

#include "kernels/cuda/strided_loads.cuh"
#include "kernels/ops.h"

/* Elements of span sp, flattened (its tensors back to back). */
static __host__ __device__ __forceinline__ size_t span_elems(const tg_span &sp) { return (size_t)sp.count * sp.numel; }

/* Slice `block` [*first, *last) of the flattened span cut into `blocks`
 * equal slices: it depends only on the span, block and blocks. */
static __device__ __forceinline__ void span_slice_of(const tg_span &sp, unsigned block, unsigned blocks, size_t *first, size_t *last) {
    const size_t n = span_elems(sp), per = (n + blocks - 1) / blocks;
    const size_t a = (size_t)block * per;
    *first = a < n ? a : n;
    *last = a + per < n ? a + per : n;
}

/* A multi-tensor launch's blocks, each span its own count, numbered along
 * grid.x: span k's are first[k] .. first[k + 1] - 1, slices of at least
 * min_slice of its elements, between 1 and max_blocks. Where every span
 * took the largest one's count (grid.y the span), a span of a few thousand
 * elements beside one of millions had thousands of blocks of a few
 * elements or none, each still scheduled, reading the step's statistics
 * and leaving. The slicing depends only on the spans and the two limits,
 * so a reduction's partials are added in the same order every run. */
typedef struct {
    unsigned first[TG_MAX_SPANS + 1];
} span_grid;
static inline span_grid span_grid_of(const tg_spans *s, size_t min_slice, unsigned max_blocks) {
    span_grid g;
    g.first[0] = 0;
    for (int k = 0; k < s->n; k++) {
        const size_t want = (span_elems(s->span[k]) + min_slice - 1) / min_slice;
        g.first[k + 1] = g.first[k] + (want < 1 ? 1u : want > max_blocks ? max_blocks : (unsigned)want);
    }
    return g;
}
/* This block's span (the k with first[k] <= blockIdx.x < first[k + 1];
 * uniform in the block), and its slice of that span's blocks. */
static __device__ __forceinline__ int span_grid_slice(const span_grid &g, const tg_spans &spans, size_t *first, size_t *last) {
    int k = 0;
    while (k + 1 < spans.n && blockIdx.x >= g.first[k + 1]) k++;
    span_slice_of(spans.span[k], blockIdx.x - g.first[k], g.first[k + 1] - g.first[k], first, last);
    return k;
}

/* The run of sp's flattened range that starts at *i (< last): the offsets
 * [*b, *e) inside the span's window (kernels/ops.h), offset o's moment at
 * index o + *shift; *i moves past the run (at most one period of one
 * tensor). */
static __device__ __forceinline__ void span_next_run(const tg_span &sp, size_t *i, size_t last, size_t *b, size_t *e,
                                                     size_t *shift) {
    const size_t c = *i / sp.numel, j = *i - c * sp.numel;
    const size_t in_tensor = last - *i < sp.numel - j ? last - *i : sp.numel - j;
    *i += tg_window_cut(&sp.win, sp.begin + c * sp.stride + j, in_tensor, b, e, shift);
}

/* f(src[offset]) for every offset of the flattened range [first, last)
 * of sp inside the span's window, threads of the block striding over each
 * run, each thread's elements in stride order, UNROLL loads in flight
 * (strided_loads_first). */
template <int UNROLL, typename F>
static __device__ void span_read_each(const tg_span &sp, size_t first, size_t last, const float *src, F f) {
    for (size_t i = first; i < last;) {
        size_t b, e, shift;
        span_next_run(sp, &i, last, &b, &e, &shift);
        strided_loads_first<UNROLL>(b + threadIdx.x, e, (size_t)blockDim.x, [&](size_t o) { return src[o]; }, f);
    }
}

/* For every element of the flattened range [first, last) of sp inside the
 * span's window (threads of the block striding over each run), four at a
 * time where a run allows: f4(offset, moment index) for each quadruple
 * whose offset and moment index are both multiples of 4, f(offset, moment
 * index) one by one for the rest (a run's ends, and whole runs whose moment
 * index is shifted by other than a multiple of 4). by4: the caller's pointers allow 16-byte accesses at
 * such quadruples (with it false, f takes everything). Each element is
 * visited once, by one of the two, so an f4 that does f's arithmetic on
 * each of its four gives f's results, with 16-byte accesses where f makes
 * 4-byte ones (four times the bytes in flight per load). */
template <typename F, typename F4>
static __device__ void span_for_each_by4(const tg_span &sp, size_t first, size_t last, bool by4, F f, F4 f4) {
    for (size_t i = first; i < last;) {
        size_t b, e, shift;
        span_next_run(sp, &i, last, &b, &e, &shift);
        size_t a = b, z = b; /* [a, z): the quadruples */
        if (by4 && (shift & 3u) == 0 && b < e) {
            a = (b + 3u) & ~(size_t)3u;
            a = a < e ? a : e;
            z = a + ((e - a) & ~(size_t)3u);
        }
        for (size_t o = b + threadIdx.x; o < a; o += blockDim.x) f(o, o + shift);
        for (size_t o = a + 4u * threadIdx.x; o < z; o += 4u * blockDim.x) f4(o, o + shift);
        for (size_t o = z + threadIdx.x; o < e; o += blockDim.x) f(o, o + shift);
    }
}

#endif

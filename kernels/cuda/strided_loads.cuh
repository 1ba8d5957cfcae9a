/* A thread's strided loop with its loads issued ahead of their use. */
#ifndef KERNELS_CUDA_STRIDED_LOADS_CUH
#define KERNELS_CUDA_STRIDED_LOADS_CUH

/* use(load(o)) for o = first, first + step, ... below end, in that order,
 * the strides taken N at a time while all N lie below end: their N loads
 * first, then use on each, so that N loads are in flight where use, which
 * waits for its value, would make each load wait behind the one before.
 * (A stride loop under `#pragma unroll N` does not do that: each unrolled
 * stride keeps its exit test, a branch between one stride's use and the
 * next stride's load, and ptxas schedules within a basic block.) */
template <int N, typename I, typename Load, typename Use>
static __device__ __forceinline__ void strided_loads_first(I first, I end, I step, Load load, Use use) {
    I o = first;
    for (; o + (N - 1) * step < end; o += N * step) {
        decltype(load(o)) v[N];
#pragma unroll
        for (int u = 0; u < N; u++) v[u] = load(o + u * step);
#pragma unroll
        for (int u = 0; u < N; u++) use(v[u]);
    }
    for (; o < end; o += step) use(load(o));
}

#endif

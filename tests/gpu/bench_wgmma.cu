/* bench_wgmma: the tensor core's rate on Hopper's wgmma (sm_90a) by
 * product shape, so that a GPU sitting tells, in about a second, which of
 * the attention kernels' tile shapes the hardware can feed at full rate.
 *
 * Why: on 2026-11-30 (results/gpu/2026-11-30_h200) both Hopper attention
 * kernels ran at about a fifth of the products' rate per tile, and their
 * products are small: m64n64k16 chains of four (head size 64, 64-row query
 * tiles), each waited for before the softmax. Whether an N = 64 product
 * runs at the tensor core's full rate, and what a wait after four costs,
 * decides whether the next step is larger tiles (N = 128 score products)
 * or something else; nothing on the CPU can say.
 *
 * Each configuration runs one block an SM (120 KiB of shared memory each,
 * so no second block fits), of 1, 2 or 3 warpgroups (2 at most at N 256
 * and with two accumulators at N 128); each warpgroup
 * repeats a round: fence, `steps` m64nNk16 products back to back into one
 * accumulator (k16 steps 0, 1, 2, 3, 0, ... of its A and the shared B),
 * commit; then waits for all (waits_for "all"), or, in the rows
 * "one_queued", rounds go into two accumulators in turn and each waits
 * only for the round before the one just issued, so the tensor core
 * always has a round queued (what FlashAttention-3's pipelines do). A [64 x 64] (from shared memory, or from
 * registers loaded once by ldmatrix) and B [N x 64] are K-major tiles laid
 * out as the attention kernels lay theirs (kernels/cuda/head_tiles.cuh,
 * 128B swizzle); each warpgroup has an A of its own, as each attention
 * warpgroup has its keys, and all share B, as they share the query tile.
 *
 * Figures: TFLOP/s from device events (median, min, max over --runs timed
 * launches after one warm-up); the SM's cycles a product, the median over
 * warpgroups of its clock64 cycles a product divided by the warpgroups an
 * SM (an SM at the data sheet's 4096 bf16 FLOP a clock, 989 TFLOP/s at
 * 1830 MHz on 132 SMs, takes N / 2); with one product a round, waiting for
 * all, and one warpgroup, a product's latency from issue to its wait's end. The operands are
 * integers in {-1, 0, 1}: block 0's first warpgroup's sums are exact and
 * checked against the host's (so the rates are of products that ran), but
 * such operands may draw less power than a model's and so keep a higher
 * clock. Needs compute capability 9.0; elsewhere "skip", exit 0.
 *
 *   build/gpu/bench_wgmma [--quick] [--products N] [--runs N] [--plant]
 *
 * --quick: 2 blocks, 16 products a warpgroup, one timed launch (the
 * emulation's run); --products: products a warpgroup a launch (8192);
 * --plant: expect a wrong sum, so that the check must fail (its test).
 * Exit 1 on a wrong product, 3 on bad options. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/block_clock.cuh"
#include "kernels/cuda/head_tiles.cuh"
#include "kernels/cuda/mbarrier.cuh"

#define BWG_MAX_WG 3          /* warpgroups a block */

/* The warpgroups a block takes at most: with 256 accumulators a thread (N
 * 256, or two accumulators at N 128) three would leave 170 registers a
 * thread, and ptxas serializes the products (C7512). */
static __host__ __device__ constexpr int wg_most(int N, bool pipe) { return N * (pipe ? 2 : 1) >= 256 ? 2 : BWG_MAX_WG; }
#define BWG_K 64              /* A's columns and B's: four k16 steps */
#define BWG_SHARED (120 << 10) /* dynamic shared memory a block asks for: one block an SM */
#define BWG_MAX_RUNS 64       /* timed launches a shape */
#define BWG_MAX_BLOCKS 1024

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            printf("not ok bench_wgmma_cuda_call - %s: %s\n", #call, cudaGetErrorString(e_));                          \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

/* ROWS rows of 64 bf16 (row-major in global memory) into a tile laid out as
 * head_tiles.cuh's at head size 64, by the 128 threads of one warpgroup
 * (t: the thread's place in it), 16 bytes at a time. */
template <int ROWS>
static __device__ void stage_rows(unsigned char *tile, const __nv_bfloat16 *src, int t) {
    for (int e = t; e < ROWS * (BWG_K / 8); e += 128) {
        const int r = e / (BWG_K / 8), c = e % (BWG_K / 8);
        vec_store((uint32_t *)(tile + ht_offset<64, ROWS>(r, 8 * c)), vec_load<uint32_t>((const uint32_t *)(src + r * BWG_K + 8 * c)));
    }
}

/* One round: a fence, STEPS products into d (k16 steps 0, 1, 2, 3, 0, ...),
 * a commit. */
template <int N, bool RS, int STEPS>
static __device__ __forceinline__ void issue_round(float (&d)[N / 2], const uint32_t (&a)[4][4], const uint64_t (&da)[4],
                                                   const uint64_t (&db)[4]) {
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < STEPS; s++) {
        if constexpr (RS)
            wgmma_rs<N, 0>(d, a[s % 4], db[s % 4], 1);
        else
            wgmma_ss<N, 0, 0>(d, da[s % 4], db[s % 4], 1);
    }
    wgmma_commit();
}

/* One block an SM: warpgroup w's A after the shared B [N x 64]; each
 * warpgroup runs iters rounds of STEPS products, each waited for (PIPE
 * false), or (PIPE: iters even) into two accumulators in turn, each round
 * waiting only for the round before the one just issued (wait_group 1),
 * so that one round is always queued behind the one running, as
 * FlashAttention-3's pipelines keep it. cycles[block's warpgroup]: its
 * clock64 cycles over the rounds; out: block 0 warpgroup 0's sums [64][N]
 * (with PIPE both accumulators' sum). */
template <int N, bool RS, int STEPS, bool PIPE>
__global__ void __launch_bounds__(128 * wg_most(N, PIPE), 1)
    rate_kernel(float *out, unsigned long long *cycles, const __nv_bfloat16 *A, const __nv_bfloat16 *B, int iters) {
    extern __shared__ __align__(1024) unsigned char bwg_shared[];
    unsigned char *b_tile = smem_align_1k(bwg_shared);
    const int wg = (int)threadIdx.x / 128, t = (int)threadIdx.x % 128;
    unsigned char *a_tile = b_tile + N * BWG_K * 2 + wg * 64 * BWG_K * 2;
    if (wg == 0) stage_rows<N>(b_tile, B, t);
    stage_rows<64>(a_tile, A, t);
    fence_proxy_async_shared(); /* the plain stores, to the tensor core's reads */
    __syncthreads();
    uint32_t a[4][4];
    uint64_t da[4], db[4];
    if constexpr (RS) ht_a_fragments(a, a_tile);
#pragma unroll
    for (int s = 0; s < 4; s++) da[s] = ht_k_major<64, 64>(a_tile, s), db[s] = ht_k_major<64, N>(b_tile, s);
    float d[N / 2], e[PIPE ? N / 2 : 1];
#pragma unroll
    for (int i = 0; i < N / 2; i++) d[i] = 0.0f;
    if constexpr (PIPE) {
#pragma unroll
        for (int i = 0; i < N / 2; i++) e[i] = 0.0f;
    }
    __syncthreads(); /* every warpgroup starts its clock together */
    const uint64_t start = bc_cycles();
    if constexpr (PIPE) {
        for (int it = 0; it < iters; it += 2) {
            issue_round<N, RS, STEPS>(d, a, da, db);
            wgmma_wait<1>(); /* e's round before */
            wgmma_fence_operand(e);
            issue_round<N, RS, STEPS>(e, a, da, db);
            wgmma_wait<1>(); /* d's */
            wgmma_fence_operand(d);
        }
        wgmma_wait<0>();
        wgmma_fence_operand(e);
#pragma unroll
        for (int i = 0; i < N / 2; i++) d[i] += e[i];
    } else {
        for (int it = 0; it < iters; it++) {
            issue_round<N, RS, STEPS>(d, a, da, db);
            wgmma_wait<0>();
            wgmma_fence_operand(d);
        }
    }
    const uint64_t spent = bc_cycles() - start;
    if (t == 0) cycles[blockIdx.x * (blockDim.x / 128) + wg] = (unsigned long long)spent;
    if (blockIdx.x != 0 || wg != 0) return;
    const int w = t / 32, g = (t % 32) / 4, q = t % 4; /* the accumulator layout: warp w rows 16w .. */
#pragma unroll
    for (int j = 0; j < N / 8; j++)
#pragma unroll
        for (int r = 0; r < 4; r++) out[(16 * w + g + 8 * (r >> 1)) * N + 8 * j + 2 * q + (r & 1)] = d[4 * j + r];
}

typedef void (*rate_launch)(dim3 grid, int threads, float *out, unsigned long long *cycles, const __nv_bfloat16 *A,
                            const __nv_bfloat16 *B, int iters);

template <int N, bool RS, int STEPS, bool PIPE>
static void launch(dim3 grid, int threads, float *out, unsigned long long *cycles, const __nv_bfloat16 *A, const __nv_bfloat16 *B,
                   int iters) {
    rate_kernel<N, RS, STEPS, PIPE><<<grid, threads, BWG_SHARED>>>(out, cycles, A, B, iters);
}

template <int N, bool RS, int STEPS, bool PIPE>
static void allow_shared() {
    CHECK(cudaFuncSetAttribute((const void *)rate_kernel<N, RS, STEPS, PIPE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               BWG_SHARED));
}

struct shape {
    int n, rs, steps, pipe;
    rate_launch run;
    void (*allow)();
};
#define SHAPE(N, RS, STEPS, PIPE) {N, RS, STEPS, PIPE, launch<N, RS, STEPS, PIPE>, allow_shared<N, RS, STEPS, PIPE>}
/* N 64 (the attention kernels' score and dq products at head size 64),
 * 128 and 256; A from shared memory and from registers; 1, 4 (the
 * kernels' chains) and 16 products a wait; and at N 64 and 128 chains of
 * 4 with one round kept queued (PIPE; at 256 two accumulators would not
 * fit). */
static const shape SHAPES[] = {
    SHAPE(64, false, 1, false),   SHAPE(64, false, 4, false),   SHAPE(64, false, 16, false),  SHAPE(64, true, 1, false),
    SHAPE(64, true, 4, false),    SHAPE(64, true, 16, false),   SHAPE(128, false, 1, false),  SHAPE(128, false, 4, false),
    SHAPE(128, false, 16, false), SHAPE(128, true, 1, false),   SHAPE(128, true, 4, false),   SHAPE(128, true, 16, false),
    SHAPE(256, false, 1, false),  SHAPE(256, false, 4, false),  SHAPE(256, false, 16, false), SHAPE(256, true, 1, false),
    SHAPE(256, true, 4, false),   SHAPE(256, true, 16, false),  SHAPE(64, false, 4, true),    SHAPE(64, true, 4, true),
    SHAPE(128, false, 4, true),   SHAPE(128, true, 4, true),
};
#define N_SHAPES (int)(sizeof SHAPES / sizeof SHAPES[0])

struct opts {
    int quick, products, runs, plant;
};

static int parse_count(const char *s, int lo, int hi, int *out) {
    char *end;
    const long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

/* 1 when the command line is good (o filled), else 0 with a message. */
static int parse_opts(int argc, char **argv, opts *o) {
    *o = opts{0, 8192, 5, 0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) o->quick = 1;
        else if (strcmp(argv[i], "--plant") == 0) o->plant = 1;
        else if (strcmp(argv[i], "--products") == 0 || strcmp(argv[i], "--runs") == 0) {
            int *field = argv[i][2] == 'p' ? &o->products : &o->runs;
            const int most = field == &o->runs ? BWG_MAX_RUNS : 1 << 20;
            if (i + 1 >= argc || !parse_count(argv[i + 1], 1, most, field)) {
                fprintf(stderr, "bench_wgmma: %s wants a whole number from 1 to %d\n", argv[i], most);
                return 0;
            }
            i++;
        } else {
            fprintf(stderr, "bench_wgmma: unknown option '%s'\n", argv[i]);
            return 0;
        }
    }
    if (o->quick) o->products = 16, o->runs = 1;
    return 1;
}

static int next_trit(unsigned *seed) { /* -1, 0 or 1 */
    *seed = *seed * 1103515245u + 12345u;
    return (int)((*seed >> 8) % 3u) - 1;
}

/* The largest |got - want| of a warpgroup's sums after iters rounds of
 * `steps` products: want = iters sum over s < steps of A's and B's k16
 * step s % 4 (integers: exact in float); plant adds 1 to want. */
static double worst_miss(const float *got, const float *A, const float *B, int n, int steps, int iters, int plant) {
    double worst = 0.0;
    for (int m = 0; m < 64; m++)
        for (int j = 0; j < n; j++) {
            double want = 0.0;
            for (int s = 0; s < steps; s++)
                for (int k = 16 * (s % 4); k < 16 * (s % 4) + 16; k++) want += (double)A[m * BWG_K + k] * B[j * BWG_K + k];
            want = want * iters + plant;
            const double miss = fabs(got[m * n + j] - want);
            worst = miss > worst || miss != miss ? miss : worst;
        }
    return worst;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The operands on the device (bf16) and on the host (as floats, for the
 * check), block 0's sums there and here, every warpgroup's cycles. On the
 * heap: the emulation's build takes a kernel file's zero-initialized
 * statics for __shared__ arrays (tests/emu/build.sh). */
struct buffers {
    __nv_bfloat16 *A, *B;
    float *out, *hostA, *hostB, *got;
    unsigned long long *cycles;
};

/* One shape at `wgs` warpgroups a block: its row, and 1 when its sums are wrong. */
static int bench_one(const shape &sh, int wgs, int blocks, const opts &o, buffers *bf, cudaEvent_t ev[2]) {
    int iters = (o.products + sh.steps - 1) / sh.steps;
    if (sh.pipe) iters += iters % 2; /* two accumulators in turn */
    const int threads = 128 * wgs;
    double tflops[BWG_MAX_RUNS], per[BWG_MAX_WG * BWG_MAX_BLOCKS];
    const double flop = 2.0 * 64 * sh.n * 16 * (double)sh.steps * iters * wgs * blocks;
    sh.run(dim3((unsigned)blocks), threads, bf->out, bf->cycles, bf->A, bf->B, iters); /* warm-up */
    CHECK(cudaGetLastError());
    for (int r = 0; r < o.runs; r++) {
        CHECK(cudaEventRecord(ev[0], 0));
        sh.run(dim3((unsigned)blocks), threads, bf->out, bf->cycles, bf->A, bf->B, iters);
        CHECK(cudaEventRecord(ev[1], 0));
        CHECK(cudaEventSynchronize(ev[1]));
        float ms = 0.0f;
        CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        tflops[r] = ms > 0.0f ? flop / (ms * 1e-3) * 1e-12 : 0.0;
    }
    unsigned long long cyc[BWG_MAX_WG * BWG_MAX_BLOCKS];
    const int n_wg = blocks * wgs;
    CHECK(cudaMemcpy(cyc, bf->cycles, sizeof(unsigned long long) * n_wg, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(bf->got, bf->out, sizeof(float) * 64 * sh.n, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n_wg; i++) per[i] = (double)cyc[i] / ((double)iters * sh.steps);
    const double sm_cycles = median(per, n_wg) / wgs, med = median(tflops, o.runs);
    printf("wgmma\t%d\t%s\t%d\t%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%.0f\n", sh.n, sh.rs ? "registers" : "shared", sh.steps,
           sh.pipe ? "one_queued" : "all", wgs, med,
           tflops[0], tflops[o.runs - 1], sm_cycles, sh.n / 2, sm_cycles > 0 ? 2.0 * 64 * sh.n * 16 / sm_cycles : 0.0);
    const double miss = worst_miss(bf->got, bf->hostA, bf->hostB, sh.n, sh.steps, iters, o.plant);
    if (miss == 0.0) return 0;
    printf("not ok bench_wgmma_n%d_%s_steps%d%s_wg%d_sums - worst |got - want| %.9g, want 0 (integers)\n", sh.n,
           sh.rs ? "rs" : "ss", sh.steps, sh.pipe ? "_pipe" : "", wgs, miss);
    return 1;
}

/* The operands: integers in {-1, 0, 1}, as floats on the host and bf16 on the device. */
static void make_operands(buffers *bf) {
    const size_t na = 64 * BWG_K, nb = 256 * BWG_K;
    unsigned seed = 2026;
    __nv_bfloat16 *a16 = (__nv_bfloat16 *)malloc(na * 2), *b16 = (__nv_bfloat16 *)malloc(nb * 2);
    bf->hostA = (float *)malloc(na * sizeof(float)), bf->hostB = (float *)malloc(nb * sizeof(float));
    bf->got = (float *)malloc(64 * 256 * sizeof(float));
    if (!a16 || !b16 || !bf->hostA || !bf->hostB || !bf->got) {
        printf("not ok bench_wgmma_host_memory - out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < na; i++) bf->hostA[i] = (float)next_trit(&seed), a16[i] = __float2bfloat16_rn(bf->hostA[i]);
    for (size_t i = 0; i < nb; i++) bf->hostB[i] = (float)next_trit(&seed), b16[i] = __float2bfloat16_rn(bf->hostB[i]);
    CHECK(cudaMalloc((void **)&bf->A, na * 2));
    CHECK(cudaMalloc((void **)&bf->B, nb * 2));
    CHECK(cudaMemcpy(bf->A, a16, na * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(bf->B, b16, nb * 2, cudaMemcpyHostToDevice));
    free(a16), free(b16);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* a line at a time: a run stopped by its clock keeps the lines before */
    opts o;
    if (!parse_opts(argc, argv, &o)) {
        fprintf(stderr, "usage: %s [--quick] [--products N] [--runs N] [--plant]\n", argv[0]);
        return 3;
    }
    int devices = 0;
    cudaDeviceProp prop;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("skip bench_wgmma - no CUDA device\n");
        return 0;
    }
    CHECK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9 || prop.minor != 0) {
        printf("skip bench_wgmma - %s is compute capability %d.%d, wgmma needs 9.0 (sm_90a)\n", prop.name, prop.major, prop.minor);
        return 0;
    }
    const int blocks = o.quick ? 2 : prop.multiProcessorCount < BWG_MAX_BLOCKS ? prop.multiProcessorCount : BWG_MAX_BLOCKS;
    buffers bf;
    make_operands(&bf);
    CHECK(cudaMalloc((void **)&bf.out, sizeof(float) * 64 * 256));
    CHECK(cudaMalloc((void **)&bf.cycles, sizeof(unsigned long long) * BWG_MAX_WG * blocks));
    cudaEvent_t ev[2];
    CHECK(cudaEventCreate(&ev[0]));
    CHECK(cudaEventCreate(&ev[1]));
    printf("# bench_wgmma on %s: %d blocks (one an SM), %d products a warpgroup a launch, %d timed launches after a "
           "warm-up (device events); m64nNk16 bf16 products into float, K-major 128B-swizzled tiles; sm_cycles: the SM's "
           "clock64 cycles a product (ideal N / 2 at 4096 FLOP a clock)\n",
           prop.name, blocks, o.products, o.runs);
    printf("# op\tN\tA\tproducts_a_round\twaits_for\twarpgroups\ttflops_median\ttflops_min\ttflops_max\tsm_cycles\tideal\tflop_a_clock_sm\n");
    int failed = 0;
    for (const shape &sh : SHAPES) {
        sh.allow();
        for (int wgs = 1; wgs <= wg_most(sh.n, sh.pipe); wgs++) failed += bench_one(sh, wgs, blocks, o, &bf, ev);
    }
    if (!failed) printf("ok bench_wgmma_sums_exact (%d shapes at 1 to %d warpgroups, 2 at most with 256 accumulators)\n", N_SHAPES, BWG_MAX_WG);
    CHECK(cudaEventDestroy(ev[0]));
    CHECK(cudaEventDestroy(ev[1]));
    CHECK(cudaFree(bf.A));
    CHECK(cudaFree(bf.B));
    CHECK(cudaFree(bf.out));
    CHECK(cudaFree(bf.cycles));
    free(bf.hostA), free(bf.hostB), free(bf.got);
    return failed != 0;
}

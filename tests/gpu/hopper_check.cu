/* hopper_check: Hopper's wgmma (kernels/cuda/wgmma.cuh) on the GPU against a
 * CPU product, so that a GPU sitting can tell whether the hardware agrees
 * with the emulator (tests/emu/emu_wgmma.cpp), which runs this same program
 * in tests/t_cuda_emu.sh (build/emu/hopper_check_emu).
 *
 * The products of tests/emu/wgmma_tiles.cuh: A [64 x 64] K-major, B [64 x N]
 * K- or MN-major (tnspB) in every swizzle mode, N 64, 128 and 256, K 64 in
 * four k16 steps, A from shared memory and from registers, scale-d 0 and 1;
 * small integers, so the GPU's D must equal the plain product exactly; then
 * random bf16 values within float summation (|error| <= 1e-5 sum |a b|).
 * Each product's form (A from shared memory or registers, B K- or
 * MN-major) is a template argument, so that the fence, the products, the
 * commit and the wait lie in one basic block, as in the attention kernels.
 * Also, at N 64, the kernel as it stood when all of these failed on an
 * H200 (results/gpu/2026-11-30_h200): its form picked at run time between
 * the fence and the commit, where ptxas injects warpgroup.arrive (C7519),
 * as "..._runtime_form_exact", and its k loop before that (products issued
 * between the making of each step's descriptors and fragments) as
 * "..._looped_exact".
 * A failure prints which of C and the four k16 steps' products make up
 * what the GPU gave, for the first few.
 * N 32 too, B in each layout whose atom it fills (not MN-major under the
 * 128B swizzle, whose atom is 64 columns): the attention kernels' last
 * chunk at head size 96 (kernels/cuda/head_tiles.cuh) is N 32, MN-major
 * under the 64B swizzle. A kernel instantiating N 16 is compiled too
 * (ptxas accepts every wrapper). Needs compute capability 9.0 (the sm_90a build: make GPU=1
 * build/gpu/hopper_check); elsewhere it prints "skip" and exits 0.
 * Prints "ok NAME" / "not ok NAME - reason"; exit 1 on a failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/emu/wgmma_tiles.cuh"

/* Every N the wrappers offer, each form, so that ptxas sees them all. */
template <int N>
__global__ void shapes_kernel(float *out, uint64_t da, uint64_t db) {
    float d[N / 2];
    for (int i = 0; i < N / 2; i++) d[i] = 0.0f;
    const uint32_t a[4] = {0, 0, 0, 0};
    wgmma_fence();
    wgmma_ss<N, 0, 0>(d, da, db, 0);
    wgmma_ss<N, 1, 1>(d, da, db, 1);
    wgmma_rs<N, 0>(d, a, db, 1);
    wgmma_rs<N, 1>(d, a, db, 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(d);
    for (int i = 0; i < N / 2; i++) out[threadIdx.x * (N / 2) + i] = d[i];
}
template __global__ void shapes_kernel<16>(float *, uint64_t, uint64_t);

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            printf("not ok hopper_cuda_call - %s: %s\n", #call, cudaGetErrorString(e_));                               \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static float *to_device(const float *x, size_t n) {
    float *d;
    CHECK(cudaMalloc((void **)&d, n * sizeof(float)));
    CHECK(cudaMemcpy(d, x, n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

template <int N, int LOOPED, int FORM>
static void launch(float *out, const float *A, const float *B, const float *C, wg_case c) {
    const unsigned bytes = shared_bytes(c.la, c.lb);
    CHECK(cudaFuncSetAttribute((const void *)product_kernel<N, LOOPED, FORM>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)bytes));
    product_kernel<N, LOOPED, FORM><<<1, 128, bytes>>>(out, A, B, C, c);
    CHECK(cudaGetLastError());
}

/* product_kernel<N> with c's form as a template argument (wgmma_tiles.cuh's form_of). */
template <int N>
static void launch_form(float *out, const float *A, const float *B, const float *C, wg_case c) {
    switch (form_of(c)) {
    case FORM_SS_K: launch<N, 0, FORM_SS_K>(out, A, B, C, c); break;
    case FORM_SS_MN: launch<N, 0, FORM_SS_MN>(out, A, B, C, c); break;
    case FORM_RS_K: launch<N, 0, FORM_RS_K>(out, A, B, C, c); break;
    default: launch<N, 0, FORM_RS_MN>(out, A, B, C, c); break;
    }
}

/* How a check's kernel issues its products: the form a template argument (every check's), picked at
 * run time (the kernel as it was on 2026-11-30's sitting but unrolled), or in a k loop (as before). */
enum issue { ISSUE_FORM, ISSUE_RUNTIME, ISSUE_LOOPED };

/* got[M][n] of product_kernel<n> on the device (ISSUE_RUNTIME and ISSUE_LOOPED: n 64 only). */
static void run(int n, wg_case c, const float *A, const float *B, const float *C, float *got, issue how = ISSUE_FORM) {
    c.la.rows = M, c.lb.rows = n;
    float *dA = to_device(A, M * K), *dB = to_device(B, (size_t)K * n), *dC = to_device(C, (size_t)M * n), *dout;
    CHECK(cudaMalloc((void **)&dout, sizeof(float) * M * n));
    if (how == ISSUE_LOOPED) launch<64, 1, FORM_RUNTIME>(dout, dA, dB, dC, c);
    else if (how == ISSUE_RUNTIME) launch<64, 0, FORM_RUNTIME>(dout, dA, dB, dC, c);
    else if (n == 32) launch_form<32>(dout, dA, dB, dC, c);
    else if (n == 64) launch_form<64>(dout, dA, dB, dC, c);
    else if (n == 128) launch_form<128>(dout, dA, dB, dC, c);
    else launch_form<256>(dout, dA, dB, dC, c);
    CHECK(cudaMemcpy(got, dout, sizeof(float) * M * n, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(dA));
    CHECK(cudaFree(dB));
    CHECK(cudaFree(dC));
    CHECK(cudaFree(dout));
}

static unsigned g_seed = 2026;
static float next_uniform(void) {
    g_seed = g_seed * 1103515245u + 12345u;
    return (float)(g_seed >> 8) / 16777216.0f;
}

/* The worst |got - C - A B| / (sum |a b| + |c|) over the outputs (0 for exact). */
static double worst_error(int n, int with_c, const float *A, const float *B, const float *C, const float *got) {
    double worst = 0.0;
    for (int m = 0; m < M; m++)
        for (int j = 0; j < n; j++) {
            double s = with_c ? C[m * n + j] : 0.0, mag = with_c ? fabs(C[m * n + j]) : 0.0;
            for (int k = 0; k < K; k++) s += (double)A[m * K + k] * B[k * n + j], mag += fabs((double)A[m * K + k] * B[k * n + j]);
            const double e = fabs(got[m * n + j] - s) / (mag > 0 ? mag : 1.0);
            worst = e > worst || e != e ? e : worst;
        }
    return worst;
}

/* What a wrong product looks like, for the sitting's log: how many outputs are wrong in each warp's
 * 16 rows, the worst one, and which of C and the four k16 steps' products add up to what the GPU
 * gave there (a lost or repeated step, or a lost C, names itself). */
static void explain(int n, int with_c, const float *A, const float *B, const float *C, const float *got) {
    int bad[4] = {0, 0, 0, 0}, wm = 0, wj = 0;
    double worst = -1.0;
    for (int m = 0; m < M; m++)
        for (int j = 0; j < n; j++) {
            double s = with_c ? C[m * n + j] : 0.0;
            for (int k = 0; k < K; k++) s += (double)A[m * K + k] * B[k * n + j];
            const double e = fabs(got[m * n + j] - s);
            if (e != 0.0) bad[m / 16]++;
            if (e > worst || e != e) worst = e, wm = m, wj = j;
        }
    printf("# wrong outputs by warp (16 rows each): %d %d %d %d of %d; worst at row %d, column %d: got %.9g\n", bad[0],
           bad[1], bad[2], bad[3], 16 * n, wm, wj, got[wm * n + wj]);
    double step[K / 16] = {0};
    for (int k = 0; k < K; k++) step[k / 16] += (double)A[wm * K + k] * B[k * n + wj];
    printf("# there: C %.9g, k16 steps %.9g %.9g %.9g %.9g; sums that give what the GPU gave:", C[wm * n + wj], step[0], step[1],
           step[2], step[3]);
    int found = 0;
    for (int mask = 0; mask < 32; mask++) { /* bit 4: C; bits 0-3: the steps */
        double s = (mask & 16) ? C[wm * n + wj] : 0.0;
        for (int q = 0; q < K / 16; q++) s += (mask >> q & 1) ? step[q] : 0.0;
        if (s == got[wm * n + wj]) {
            printf(" %s", (mask & 16) ? "C" : "-");
            for (int q = 0; q < K / 16; q++)
                if (mask >> q & 1) printf("+s%d", q);
            found = 1;
        }
    }
    printf("%s\n", found ? "" : " none");
}

/* A's form: 0 from shared memory under the 128B swizzle, 1 unswizzled, 2 from registers. */
static const char *a_name(int form) { return form == 2 ? "registers" : form == 1 ? "none" : "128b"; }

/* One integer product (A in the given form, B laid out as lb, C added) that must be exact:
 * prints ok or not ok NAME, and what the wrong sums look like when explain_it; 1 on a failure. */
static int exact_check(const char *name, int n, int form, layout lb, issue how, int explain_it, const float *A,
                       const float *B, const float *C, float *got) {
    const wg_case c = {{form == 1 ? 0 : 128, 0, M}, lb, form == 2, 1, P_NONE, P_NONE};
    run(n, c, A, B, C, got, how);
    const double e = worst_error(n, 1, A, B, C, got);
    if (e == 0.0) {
        printf("ok %s\n", name);
        return 0;
    }
    printf("not ok %s - worst relative error %.3g, want 0 (integers)\n", name, e);
    if (explain_it) explain(n, 1, A, B, C, got);
    return 1;
}

static const char *sw_name(int sw) { return sw == 128 ? "128b" : sw == 64 ? "64b" : sw == 32 ? "32b" : "none"; }

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* a line at a time: a run stopped by its clock keeps the lines before */
    int devices = 0;
    cudaDeviceProp prop;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("skip hopper_check - no CUDA device\n");
        return 0;
    }
    CHECK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9 || prop.minor != 0) {
        printf("skip hopper_check - %s is compute capability %d.%d, wgmma needs 9.0 (sm_90a)\n", prop.name, prop.major, prop.minor);
        return 0;
    }
    float *A = (float *)malloc(sizeof(float) * M * K), *B = (float *)malloc(sizeof(float) * K * NMAX);
    float *C = (float *)malloc(sizeof(float) * M * NMAX), *got = (float *)malloc(sizeof(float) * M * NMAX);
    for (int i = 0; i < M * K; i++) A[i] = (float)((int)(next_uniform() * 9) - 4);
    for (int i = 0; i < K * NMAX; i++) B[i] = (float)((int)(next_uniform() * 9) - 4);
    for (int i = 0; i < M * NMAX; i++) C[i] = (float)((int)(next_uniform() * 9) - 4);
    int failed = 0;
    const int sws[4] = {0, 32, 64, 128};
    for (int n = 32; n <= 256; n *= 2)
        for (int bm = 0; bm < 2; bm++)
            for (int bs = 0; bs < 4; bs++)
                for (int form = 0; form < 3; form++) {
                    if (bm && 2 * n < sws[bs]) continue; /* an MN-major B narrower than its swizzle atom */
                    char name[128];
                    snprintf(name, sizeof name, "hopper_wgmma_n%d_a_%s_b_%s_%s_exact", n, a_name(form),
                             bm ? "mn_major" : "k_major", sw_name(sws[bs]));
                    const layout lb = {sws[bs], bm, n};
                    /* the first few failures explained: enough to tell a pattern */
                    failed += exact_check(name, n, form, lb, ISSUE_FORM, failed < 6, A, B, C, got);
                }
    /* The kernel as it stood on 2026-11-30, when every check failed on an H200 (its form picked at
     * run time, between the fence and the commit), unrolled and as a k loop: beside the checks
     * above, they tell whether either was the difference. */
    for (int form = 0; form < 3; form++) {
        char name[128];
        const layout lb = {128, 0, 64};
        snprintf(name, sizeof name, "hopper_wgmma_n64_a_%s_b_k_major_128b_runtime_form_exact", a_name(form));
        failed += exact_check(name, 64, form, lb, ISSUE_RUNTIME, 1, A, B, C, got);
        snprintf(name, sizeof name, "hopper_wgmma_n64_a_%s_b_k_major_128b_looped_exact", a_name(form));
        failed += exact_check(name, 64, form, lb, ISSUE_LOOPED, 1, A, B, C, got);
    }
    /* scale-d 0 overwrites C */
    const wg_case over = {{128, 0, M}, {128, 1, 128}, 0, 0, P_NONE, P_NONE};
    run(128, over, A, B, C, got);
    const double e0 = worst_error(128, 0, A, B, C, got);
    if (e0 == 0.0) printf("ok hopper_wgmma_scale_d_0_overwrites\n");
    else {
        failed++, printf("not ok hopper_wgmma_scale_d_0_overwrites - worst relative error %.3g\n", e0);
        explain(128, 0, A, B, C, got);
    }
    /* random bf16 values */
    for (int i = 0; i < M * K; i++) A[i] = __bfloat162float(__float2bfloat16_rn(next_uniform() * 4 - 2));
    for (int i = 0; i < K * NMAX; i++) B[i] = __bfloat162float(__float2bfloat16_rn(next_uniform() * 4 - 2));
    const wg_case rnd = {{128, 0, M}, {128, 1, 128}, 0, 1, P_NONE, P_NONE};
    run(128, rnd, A, B, C, got);
    const double er = worst_error(128, 1, A, B, C, got);
    if (er <= 1e-5) printf("ok hopper_wgmma_random_bf16_within_float_summation (worst %.3g)\n", er);
    else failed++, printf("not ok hopper_wgmma_random_bf16_within_float_summation - worst %.3g, want <= 1e-5\n", er);
    free(A), free(B), free(C), free(got);
    return failed != 0;
}

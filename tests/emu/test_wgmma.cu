/* Unit test of the emulated wgmma (kernels/cuda/wgmma.cuh, the stand-ins of
 * tests/emu/emu_wgmma.cpp):
 * - products: bf16 tiles written into shared memory by the layout functions
 *   of tests/emu/wgmma_tiles.cuh (the tensor copy's pictures, independent of
 *   smem_layout.h), read through descriptors, for A
 *   K-major and B K- or MN-major (tnspB) in every swizzle mode, N 64 and 128,
 *   K 64 (4 k16 steps, the descriptors advanced along K); small integers, so
 *   every sum is exact and D must equal the plain product exactly; random
 *   bf16 values within float summation (|error| <= 1e-5 sum |a b|); scale-d 0
 *   overwrites; two warpgroups in one block each get the product;
 * - A from registers (mma.sync's fragment, built here from the ISA's table)
 *   equals A from shared memory; attention's chain O = bf16(Q K^T) V with the
 *   scores' accumulators packed into A fragments (mma_a_from_accumulators);
 * - each descriptor field perturbed (start, LBO, SBO, base offset, swizzle;
 *   bits set by hand at the ISA's positions) gives a different product;
 * - asynchrony: accumulators read before wgmma.wait_group hold their old
 *   values; a B tile rewritten before the wait gives the product of the new
 *   one, and an error (the operand changed between the issue and the wait);
 *   wait_group 1 leaves the newest group undone;
 * - errors, each in a child process (status 3 or abort, and the message): no
 *   fence before the first product, accumulators written without a fence, a
 *   partial warpgroup, a warp that exited before the product or while the
 *   others wait in it, divergent descriptors, a shared
 *   address outside shared memory, an operand running past it, reserved
 *   descriptor bits set.
 * Prints "ok NAME" / "not ok NAME - reason"; exit 1 on a failure. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cuda/mma.cuh"
#include "tests/emu/emu_hooks.h"
#include "tests/emu/wgmma_tiles.cuh"
#include "tests/tap.h"

static float *to_device(const float *x, size_t n) {
    float *d;
    cudaMalloc((void **)&d, n * sizeof(float));
    cudaMemcpy(d, x, n * sizeof(float), cudaMemcpyHostToDevice);
    return d;
}

/* Runs product_kernel<N> with `wgs` warpgroups; got: wgs * M * N floats. */
static void run_product(int n, int wgs, wg_case c, const float *A, const float *B, const float *C, float *got) {
    c.la.rows = M, c.lb.rows = n;
    float *dA = to_device(A, M * K), *dB = to_device(B, (size_t)K * n), *dC = to_device(C, (size_t)M * n), *dout;
    cudaMalloc((void **)&dout, sizeof(float) * wgs * M * n);
    const unsigned bytes = shared_bytes(c.la, c.lb);
    if (n == 64) {
        cudaFuncSetAttribute((const void *)product_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
        product_kernel<64><<<1, 128 * wgs, bytes>>>(dout, dA, dB, dC, c);
    } else {
        cudaFuncSetAttribute((const void *)product_kernel<128>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
        product_kernel<128><<<1, 128 * wgs, bytes>>>(dout, dA, dB, dC, c);
    }
    cudaMemcpy(got, dout, sizeof(float) * wgs * M * n, cudaMemcpyDeviceToHost);
    cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dout);
}

/* want[M][N] = (C if with_c) + A B, in double (exact for the integer inputs). */
static void reference(int n, const float *A, const float *B, const float *C, int with_c, double *want, double *mag) {
    for (int m = 0; m < M; m++)
        for (int j = 0; j < n; j++) {
            double s = with_c ? C[m * n + j] : 0.0, a = with_c ? fabs(C[m * n + j]) : 0.0;
            for (int k = 0; k < K; k++) s += (double)A[m * K + k] * B[k * n + j], a += fabs((double)A[m * K + k] * B[k * n + j]);
            want[m * n + j] = s;
            if (mag) mag[m * n + j] = a;
        }
}

static unsigned g_seed = 12345;
static float small_int(void) {
    g_seed = g_seed * 1103515245u + 12345u;
    return (float)((int)((g_seed >> 16) % 9) - 4);
}
static float random_bf16(void) { /* a bf16 value in (-2, 2) */
    g_seed = g_seed * 1103515245u + 12345u;
    const float x = ((float)(g_seed >> 8) / 16777216.0f) * 4.0f - 2.0f;
    return __bfloat162float(__float2bfloat16_rn(x));
}

/* The inputs and outputs the checks share (on the heap: a kernel file's
 * zero-initialized statics must all be __shared__, tests/emu/build.sh). */
struct bufs {
    float *A, *B, *C, *got;
    double *want, *mag;
};

static int count_diff(int n, const float *got, const double *want) {
    int bad = 0;
    for (int i = 0; i < M * n; i++) bad += got[i] != want[i];
    return bad;
}

static const char *sw_name(int sw) { return sw == 128 ? "128b" : sw == 64 ? "64b" : sw == 32 ? "32b" : "none"; }

/* Every A swizzle x every B layout, N 64 and 128: exact. */
static int check_layouts(bufs &b) {
    int failed = 0;
    const int sws[4] = {0, 32, 64, 128};
    for (int i = 0; i < M * K; i++) b.A[i] = small_int();
    for (int i = 0; i < K * NMAX; i++) b.B[i] = small_int();
    for (int i = 0; i < M * NMAX; i++) b.C[i] = small_int();
    for (int n = 64; n <= 128; n += 64) {
        reference(n, b.A, b.B, b.C, 1, b.want, NULL);
        for (int bm = 0; bm < 2; bm++)
            for (int bs = 0; bs < 4; bs++) {
                int bad = 0;
                for (int as = 0; as < 4; as++) {
                    wg_case c = {{sws[as], 0, M}, {sws[bs], bm, n}, 0, 1, P_NONE, P_NONE};
                    run_product(n, 1, c, b.A, b.B, b.C, b.got);
                    bad += count_diff(n, b.got, b.want);
                }
                char name[128], why[128];
                snprintf(name, sizeof name, "emu_wgmma_n%d_b_%s_%s_every_a_swizzle_exact", n, bm ? "mn_major" : "k_major",
                         sw_name(sws[bs]));
                snprintf(why, sizeof why, "%d of %d outputs differ from C + A B", bad, 4 * M * n);
                failed |= tap_result(bad == 0, name, why);
            }
    }
    return failed;
}

static int check_variants(bufs &b) {
    int failed = 0;
    /* A from registers, every B layout at N 128 */
    int bad = 0;
    reference(128, b.A, b.B, b.C, 1, b.want, NULL);
    for (int bm = 0; bm < 2; bm++)
        for (int bs = 0; bs <= 128; bs = bs ? bs * 2 : 32) {
            wg_case c = {{128, 0, M}, {bs, bm, 128}, 1, 1, P_NONE, P_NONE};
            run_product(128, 1, c, b.A, b.B, b.C, b.got);
            bad += count_diff(128, b.got, b.want);
        }
    failed |= tap_result(bad == 0, "emu_wgmma_a_from_registers_equals_a_from_shared", "A from registers gave another product");
    /* scale-d 0: C ignored */
    reference(64, b.A, b.B, b.C, 0, b.want, NULL);
    wg_case over = {{128, 0, M}, {128, 1, 64}, 0, 0, P_NONE, P_NONE};
    run_product(64, 1, over, b.A, b.B, b.C, b.got);
    failed |= tap_result(count_diff(64, b.got, b.want) == 0, "emu_wgmma_scale_d_0_overwrites", "D != A B");
    /* two warpgroups, each its own accumulators */
    reference(64, b.A, b.B, b.C, 1, b.want, NULL);
    wg_case two = {{64, 0, M}, {64, 0, 64}, 0, 1, P_NONE, P_NONE};
    run_product(64, 2, two, b.A, b.B, b.C, b.got);
    failed |= tap_result(count_diff(64, b.got, b.want) == 0 && count_diff(64, b.got + M * 64, b.want) == 0,
                         "emu_wgmma_two_warpgroups_each_get_the_product", "a warpgroup's D != C + A B");
    /* random bf16 values: within float summation */
    float *A = (float *)malloc(sizeof(float) * M * K), *B = (float *)malloc(sizeof(float) * K * NMAX),
          *C = (float *)malloc(sizeof(float) * M * NMAX);
    for (int i = 0; i < M * K; i++) A[i] = random_bf16();
    for (int i = 0; i < K * NMAX; i++) B[i] = random_bf16();
    for (int i = 0; i < M * NMAX; i++) C[i] = random_bf16();
    reference(128, A, B, C, 1, b.want, b.mag);
    wg_case rnd = {{128, 0, M}, {128, 1, 128}, 0, 1, P_NONE, P_NONE};
    run_product(128, 1, rnd, A, B, C, b.got);
    double worst = 0.0;
    for (int i = 0; i < M * 128; i++) {
        const double r = fabs(b.got[i] - b.want[i]) / (b.mag[i] + 1e-30);
        worst = r > worst || r != r ? r : worst;
    }
    char why[96];
    snprintf(why, sizeof why, "worst |error| / sum |a b| = %.3g (want <= 1e-5)", worst);
    failed |= tap_result(worst <= 1e-5, "emu_wgmma_random_bf16_within_float_summation", why);
    free(A), free(B), free(C);
    return failed;
}

/* Each descriptor field perturbed must change the product: A K-major without
 * swizzle and B MN-major 128B at N 128 (two atoms: LBO used), and the base
 * offsets of 128B tiles, the swizzle of a K-major B. */
static int check_perturbations(bufs &b) {
    struct {
        int a_sw, b_sw, b_mn, pa, pb;
        const char *name;
    } cases[] = {
        {0, 128, 1, P_START, P_NONE, "a_start"},   {0, 128, 1, P_LBO, P_NONE, "a_lbo"},
        {0, 128, 1, P_SBO, P_NONE, "a_sbo"},       {0, 128, 1, P_SWIZZLE, P_NONE, "a_swizzle"},
        {128, 128, 0, P_BASE, P_NONE, "a_base_offset"},
        {0, 128, 1, P_NONE, P_START, "b_start"},   {0, 128, 1, P_NONE, P_LBO, "b_lbo"},
        {0, 128, 1, P_NONE, P_SBO, "b_sbo"},       {0, 128, 1, P_NONE, P_BASE, "b_base_offset"},
        {128, 128, 0, P_NONE, P_SWIZZLE, "b_swizzle"}, /* MN-major read unswizzled would run past the tiles */
    };
    int failed = 0;
    reference(128, b.A, b.B, b.C, 1, b.want, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wg_case c = {{cases[i].a_sw, 0, M}, {cases[i].b_sw, cases[i].b_mn, 128}, 0, 1, cases[i].pa, cases[i].pb};
        run_product(128, 1, c, b.A, b.B, b.C, b.got);
        char name[96];
        snprintf(name, sizeof name, "emu_wgmma_perturbed_%s_changes_product", cases[i].name);
        failed |= tap_result(count_diff(128, b.got, b.want) > 0, name, "the perturbed descriptor gave C + A B");
    }
    return failed;
}

/* ---- asynchrony: one k16 step, A K-major 128B, B MN-major 128B, N 64 ---- */

#define AN 64
enum { ASYNC_BEFORE_WAIT, ASYNC_REWRITTEN_B, ASYNC_WAIT1 };
__global__ void async_kernel(float *out, const float *A, const float *B, const float *B2, int mode) {
    extern __shared__ __align__(16) unsigned char dyn[];
    const layout la = {128, 0, M}, lb = {128, 1, AN};
    unsigned char *sa = smem_align_1k(dyn), *sb = sa + b_at(la);
    for (int e = threadIdx.x; e < M * K; e += blockDim.x) store_bf16(sa, tile_offset(la, e / K, e % K), A[e]);
    for (int e = threadIdx.x; e < K * AN; e += blockDim.x) store_bf16(sb, tile_offset(lb, e % AN, e / AN), B[e]);
    tiles_visible_to_wgmma();
    __syncthreads();
    const uint64_t da = step_desc(la, sa, 0), db = step_desc(lb, sb, 0);
    float d[AN / 2], d2[AN / 2], seen[AN / 2], seen2[AN / 2];
    for (int i = 0; i < AN / 2; i++) d[i] = d2[i] = -1.0f;
    wgmma_fence();
    wgmma_ss<AN, 0, 1>(d, da, db, 0);
    wgmma_commit();
    if (mode == ASYNC_BEFORE_WAIT) memcpy(seen, d, sizeof d); /* too early: undefined on the device */
    if (mode == ASYNC_REWRITTEN_B) {
        __syncthreads();
        for (int e = threadIdx.x; e < K * AN; e += blockDim.x) store_bf16(sb, tile_offset(lb, e % AN, e / AN), B2[e]);
        tiles_visible_to_wgmma();
        __syncthreads();
    }
    if (mode == ASYNC_WAIT1) {
        wgmma_ss<AN, 0, 1>(d2, da, db, 0);
        wgmma_commit();
        wgmma_wait<1>();
        memcpy(seen, d, sizeof d);
        memcpy(seen2, d2, sizeof d2);
    }
    wgmma_wait<0>();
    if (mode != ASYNC_BEFORE_WAIT && mode != ASYNC_WAIT1) memcpy(seen, d, sizeof d);
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    for (int j = 0; j < AN / 8; j++)
        for (int r = 0; r < 4; r++) {
            const int at = (16 * w + g + 8 * (r >> 1)) * AN + 8 * j + 2 * t + (r & 1);
            out[at] = seen[4 * j + r];
            out[M * AN + at] = mode == ASYNC_WAIT1 ? seen2[4 * j + r] : d[4 * j + r];
        }
}

static int check_async(bufs &b) {
    float *B2 = (float *)malloc(sizeof(float) * K * AN), *got = (float *)malloc(sizeof(float) * 2 * M * AN);
    double *want2 = (double *)malloc(sizeof(double) * M * AN);
    for (int i = 0; i < K * AN; i++) B2[i] = small_int();
    float *dA = to_device(b.A, M * K), *dB = to_device(b.B, K * AN), *dB2 = to_device(B2, K * AN), *dout;
    cudaMalloc((void **)&dout, sizeof(float) * 2 * M * AN);
    const layout la = {128, 0, M}, lb = {128, 1, AN};
    const unsigned bytes = shared_bytes(la, lb);
    cudaFuncSetAttribute((const void *)async_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    float *Bn = (float *)malloc(sizeof(float) * K * AN); /* b.B as [K][AN] */
    for (int k = 0; k < K; k++)
        for (int n = 0; n < AN; n++) Bn[k * AN + n] = b.B[k * AN + n];
    /* async_kernel uses k 0..15 only: the reference over one step */
    float A16[M * K];
    memset(A16, 0, sizeof A16);
    for (int m = 0; m < M; m++)
        for (int k = 0; k < 16; k++) A16[m * K + k] = b.A[m * K + k];
    reference(AN, A16, Bn, Bn, 0, b.want, NULL);
    reference(AN, A16, B2, B2, 0, want2, NULL);
    int failed = 0, stale = 0;
    async_kernel<<<1, 128, bytes>>>(dout, dA, dB, dB2, ASYNC_BEFORE_WAIT);
    cudaMemcpy(got, dout, sizeof(float) * 2 * M * AN, cudaMemcpyDeviceToHost);
    for (int i = 0; i < M * AN; i++) stale += got[i] == -1.0f;
    failed |= tap_result(stale == M * AN && count_diff(AN, got + M * AN, b.want) == 0,
                         "emu_wgmma_accumulators_stale_before_wait", "D read before the wait was not the old value, or D after it wrong");
    const long errors = emu_errors();
    async_kernel<<<1, 128, bytes>>>(dout, dA, dB, dB2, ASYNC_REWRITTEN_B);
    cudaMemcpy(got, dout, sizeof(float) * 2 * M * AN, cudaMemcpyDeviceToHost);
    const long rewrite_errors = emu_errors() - errors;
    emu_errors_forgive(errors);
    failed |= tap_result(count_diff(AN, got, want2) == 0 && count_diff(AN, got, b.want) > 0 && rewrite_errors == 1,
                         "emu_wgmma_operand_rewritten_before_wait_is_read_and_an_error",
                         "the product did not read B as it was at the wait, or not one error (the operand changed)");
    async_kernel<<<1, 128, bytes>>>(dout, dA, dB, dB2, ASYNC_WAIT1);
    cudaMemcpy(got, dout, sizeof(float) * 2 * M * AN, cudaMemcpyDeviceToHost);
    stale = 0;
    for (int i = 0; i < M * AN; i++) stale += got[M * AN + i] == -1.0f;
    failed |= tap_result(count_diff(AN, got, b.want) == 0 && stale == M * AN, "emu_wgmma_wait_group_1_leaves_newest_group",
                         "wait_group 1 did not finish the older group only");
    cudaFree(dA), cudaFree(dB), cudaFree(dB2), cudaFree(dout);
    free(B2), free(got), free(want2), free(Bn);
    return failed;
}

/* ---- attention's chain: O = bf16(Q K^T) V, the scores' accumulators reused
 * as A fragments (mma_a_from_accumulators) of a register-A product with V
 * MN-major (tnspB), all N 64 and K 64 ---- */
__global__ void chain_kernel(float *out, const float *Q, const float *Kt, const float *V) {
    extern __shared__ __align__(16) unsigned char dyn[];
    const layout lq = {128, 0, M}, lk = {128, 0, 64}, lv = {128, 1, 64};
    unsigned char *sq = smem_align_1k(dyn), *sk = sq + b_at(lq), *sv = sk + b_at(lk);
    for (int e = threadIdx.x; e < M * K; e += blockDim.x) {
        store_bf16(sq, tile_offset(lq, e / K, e % K), Q[e]);
        store_bf16(sk, tile_offset(lk, e / K, e % K), Kt[e]); /* K as [keys][k]: B K-major */
        store_bf16(sv, tile_offset(lv, e % 64, e / 64), V[e]); /* V as [keys][64]: B MN-major */
    }
    tiles_visible_to_wgmma();
    __syncthreads();
    float s[32], o[32];
    wgmma_fence();
    for (int step = 0; step < K / 16; step++) {
        wgmma_ss<64, 0, 0>(s, step_desc(lq, sq, step), step_desc(lk, sk, step), step > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(s);
    wgmma_fence();
    for (int step = 0; step < 64 / 16; step++) { /* keys 16 step .. 16 step + 15 */
        uint32_t a[4];
        mma_a_from_accumulators(a, s + 8 * step, s + 8 * step + 4);
        wgmma_rs<64, 1>(o, a, step_desc(lv, sv, step), step > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    for (int j = 0; j < 8; j++)
        for (int r = 0; r < 4; r++) out[(16 * w + g + 8 * (r >> 1)) * 64 + 8 * j + 2 * t + (r & 1)] = o[4 * j + r];
}

static int check_chain(bufs &b) {
    float *Kt = (float *)malloc(sizeof(float) * 64 * K), *V = (float *)malloc(sizeof(float) * 64 * 64);
    double *P = (double *)malloc(sizeof(double) * M * 64);
    for (int i = 0; i < 64 * K; i++) Kt[i] = small_int();
    for (int i = 0; i < 64 * 64; i++) V[i] = small_int();
    for (int m = 0; m < M; m++) /* P = bf16(Q K^T): integers, exact in double and in the rounding */
        for (int n = 0; n < 64; n++) {
            double x = 0;
            for (int k = 0; k < K; k++) x += (double)b.A[m * K + k] * Kt[n * K + k];
            P[m * 64 + n] = __bfloat162float(__float2bfloat16_rn((float)x));
        }
    int bad = 0;
    float *dQ = to_device(b.A, M * K), *dK = to_device(Kt, 64 * K), *dV = to_device(V, 64 * 64), *dout;
    cudaMalloc((void **)&dout, sizeof(float) * M * 64);
    const layout lq = {128, 0, M}, lk = {128, 0, 64};
    const unsigned bytes = b_at(lq) + b_at(lk) + 64 * K * 2 + GAP + 1024;
    chain_kernel<<<1, 128, bytes>>>(dout, dQ, dK, dV);
    cudaMemcpy(b.got, dout, sizeof(float) * M * 64, cudaMemcpyDeviceToHost);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < 64; n++) {
            double o = 0;
            for (int k = 0; k < 64; k++) o += P[m * 64 + k] * V[k * 64 + n];
            bad += b.got[m * 64 + n] != o;
        }
    cudaFree(dQ), cudaFree(dK), cudaFree(dV), cudaFree(dout);
    free(Kt), free(V), free(P);
    char why[96];
    snprintf(why, sizeof why, "%d of %d outputs differ from bf16(Q K^T) V", bad, M * 64);
    return tap_result(bad == 0, "emu_wgmma_scores_as_a_fragments_times_v", why);
}

/* ---- errors, each in a child process ---- */

enum { E_NO_FENCE, E_ACC_WRITTEN, E_EXITED_WARP, E_EXIT_WAITING, E_DIVERGENT, E_NOT_SHARED, E_PAST_SHARED, E_RESERVED };
__global__ void misuse_kernel(const float *global, int what) {
    __shared__ __align__(1024) unsigned char tile[4096];
    for (int i = threadIdx.x; i < 4096; i += blockDim.x) tile[i] = 0;
    __syncthreads();
    if (what == E_EXITED_WARP && threadIdx.x >= 96) return;
    if (what == E_EXIT_WAITING && threadIdx.x >= 96) { /* the other warps reach the wgmma first, then this one exits */
        __syncwarp();
        return;
    }
    uint64_t da = wgmma_desc(tile, 128, 256, 0), db = wgmma_desc(tile + 2048, 128, 256, 0);
    if (what == E_DIVERGENT && threadIdx.x == 5) db = wgmma_desc_advance(db, 16);
    if (what == E_NOT_SHARED) db = wgmma_desc(global, 128, 256, 0);
    if (what == E_PAST_SHARED) db = wgmma_desc(tile + 2048, 128, 8192, 0);
    if (what == E_RESERVED) db |= 1ull << 47;
    float d[32] = {0};
    if (what != E_NO_FENCE) wgmma_fence();
    wgmma_ss<64, 0, 0>(d, da, db, 1);
    wgmma_commit();
    wgmma_wait<0>();
    if (what == E_ACC_WRITTEN) {
        d[0] += 1.0f;
        wgmma_ss<64, 0, 0>(d, da, db, 1); /* no fence after the write */
        wgmma_commit();
        wgmma_wait<0>();
    }
}

static int g_what = -1;
static void child_misuse(float *a) { misuse_kernel<<<1, 128>>>(a, g_what); }
static void child_partial(float *a) { misuse_kernel<<<1, 96>>>(a, E_ACC_WRITTEN + 100); }

static int expect_error(const char *name, int what, void (*body)(float *), const char *needle) {
    float *a;
    cudaMalloc((void **)&a, 4096);
    cudaMemset(a, 0, 4096);
    g_what = what;
    FILE *log = tmpfile();
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fileno(log), 2);
        body(a);
        exit(0); /* the emulator's exit hook turns reported errors into status 3 */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    char text[4096] = "";
    rewind(log);
    const size_t n = fread(text, 1, sizeof text - 1, log);
    text[n] = '\0';
    fclose(log);
    cudaFree(a);
    const bool failed_run = (WIFEXITED(status) && WEXITSTATUS(status) == 3) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    char why[256];
    snprintf(why, sizeof why, "child status %#x, stderr without \"%s\"", status, needle);
    return tap_result(failed_run && strstr(text, needle) != NULL, name, why);
}

static int check_errors(void) {
    int failed = expect_error("emu_wgmma_without_fence_reported", E_NO_FENCE, child_misuse, "without a wgmma.fence before it");
    failed |= expect_error("emu_wgmma_accumulators_written_without_fence_reported", E_ACC_WRITTEN, child_misuse,
                           "without a wgmma.fence between");
    failed |= expect_error("emu_wgmma_exited_warp_reported", E_EXITED_WARP, child_misuse, "has exited lanes");
    failed |= expect_error("emu_wgmma_warp_exiting_while_warpgroup_waits_reported", E_EXIT_WAITING, child_misuse,
                           "exited while its warpgroup waits");
    failed |= expect_error("emu_wgmma_partial_warpgroup_reported", 0, child_partial, "missing or partial");
    failed |= expect_error("emu_wgmma_divergent_descriptors_reported", E_DIVERGENT, child_misuse, "divergent");
    failed |= expect_error("emu_wgmma_descriptor_of_global_memory_reported", E_NOT_SHARED, child_misuse,
                           "not in the block's shared memory");
    failed |= expect_error("emu_wgmma_operand_past_shared_memory_reported", E_PAST_SHARED, child_misuse,
                           "outside the block's shared memory");
    failed |= expect_error("emu_wgmma_reserved_descriptor_bits_reported", E_RESERVED, child_misuse, "reserved bits");
    return failed;
}

int main(void) {
    bufs b = {(float *)malloc(sizeof(float) * M * K), (float *)malloc(sizeof(float) * K * NMAX),
              (float *)malloc(sizeof(float) * M * NMAX), (float *)malloc(sizeof(float) * 2 * M * NMAX),
              (double *)malloc(sizeof(double) * M * NMAX), (double *)malloc(sizeof(double) * M * NMAX)};
    int failed = check_layouts(b);
    failed |= check_variants(b);
    failed |= check_perturbations(b);
    failed |= check_async(b);
    failed |= check_chain(b);
    failed |= check_errors();
    return failed;
}

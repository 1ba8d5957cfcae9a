/* Unit test of the emulated tensor-core product (tests/emu/cuda_emu.h's
 * stand-in for mma.sync m16n8k16 bf16, reached through
 * kernels/cuda/mma.cuh): one warp builds its fragments straight from the
 * PTX ISA's layout tables, written out here independently of the
 * stand-in, and D must equal the plain product A B + C exactly (small
 * integers: every sum is exact in float32). Then the same with rows of A's
 * fragment swapped (a[1] <-> a[2]) must differ, so the check can fail.
 * The shared-memory loaders of mma.cuh are checked the same way: each
 * stored layout they read (row-major A, B by rows, B by columns, from
 * padded shared tiles) and the accumulators reused as an A fragment must
 * give the plain product, and a tile read with the wrong loader must not.
 * And ldmatrix, which the loaders use, against the ISA's definition with
 * permuted row addresses (x4, x4.trans, and x2, whose upper lanes'
 * addresses are ignored).
 * Prints "ok NAME" / "not ok NAME - reason"; exit 1 on a failure. */
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/mma.cuh"

#define M 16
#define N 8
#define K 16

static __device__ uint32_t pack(float lo, float hi) {
    uint32_t l, h;
    memcpy(&l, &lo, 4);
    memcpy(&h, &hi, 4);
    return (l >> 16) | (h & 0xffff0000u); /* exact: the values are small integers */
}

/* PTX ISA, "Matrix Fragments for mma.m16n8k16" (.bf16): g = lane >> 2, t = lane % 4. */
__global__ void mma_kernel(float *D, const float *A, const float *B, const float *C, int swap) {
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    uint32_t a[4], b[2];
    for (int r = 0; r < 4; r++) {
        const int row = g + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
        a[r] = pack(A[row * K + col], A[row * K + col + 1]);
    }
    for (int r = 0; r < 2; r++) {
        const int k = 2 * t + 8 * r;
        b[r] = pack(B[k * N + g], B[(k + 1) * N + g]);
    }
    if (swap) {
        uint32_t x = a[1];
        a[1] = a[2];
        a[2] = x;
    }
    float d[4];
    for (int r = 0; r < 4; r++) d[r] = C[(g + 8 * (r >> 1)) * N + 2 * t + (r & 1)];
    mma_bf16_16816(d, a, b);
    for (int r = 0; r < 4; r++) D[(g + 8 * (r >> 1)) * N + 2 * t + (r & 1)] = d[r];
}

/* The loaders, from shared memory (ldmatrix reads nothing else): mode 0
 * reads A row-major and B by rows (B^T stored), mode 1 B by columns (B
 * stored); B is K x 16 here (two 8-column blocks, as the loaders take
 * them), so D is 16 x 16. Mode 2 takes the accumulators of A B (16 x 16)
 * as one A fragment and multiplies it by B again: D = (A B) B. Mode 3 is
 * mode 0 with B^T read by columns: wrong on purpose. The tiles sit at a
 * padded leading dimension LD, as the kernels' do. */
#define N2 16 /* columns of B as the loaders take it */
#define LD 24 /* shared leading dimension: 16 plus 8 of padding, rows 16-byte aligned */
__global__ void loader_kernel(float *D, const __nv_bfloat16 *A, const __nv_bfloat16 *B, const __nv_bfloat16 *Bt, int mode) {
    __shared__ __align__(16) __nv_bfloat16 sA[M * LD], sB[K * LD], sBt[N2 * LD];
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    for (int e = lane; e < 16 * 16; e += 32) {
        const int r = e / 16, c = e % 16;
        sA[r * LD + c] = A[r * K + c];
        sB[r * LD + c] = B[r * N2 + c];
        sBt[r * LD + c] = Bt[r * K + c];
    }
    __syncthreads();
    uint32_t a[4], b[2][2];
    float d[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    mma_load_a(a, sA, LD);
    if (mode == 0) mma_load_b_rows_x2(b, sBt, LD);
    else if (mode == 3) mma_load_b_cols_x2(b, sBt, LD);
    else mma_load_b_cols_x2(b, sB, LD);
    if (mode == 2) {
        float lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
        mma_bf16_16816(lo, a, b[0]);
        mma_bf16_16816(hi, a, b[1]);
        mma_a_from_accumulators(a, lo, hi);
    }
    mma_bf16_16816(d[0], a, b[0]);
    mma_bf16_16816(d[1], a, b[1]);
    for (int h = 0; h < 2; h++)
        for (int r = 0; r < 4; r++) D[(g + 8 * (r >> 1)) * N2 + 8 * h + 2 * t + (r & 1)] = d[h][r];
}

static __nv_bfloat16 *device_bf16(const float *x, int n) {
    __nv_bfloat16 host[M * K], *dev;
    for (int i = 0; i < n; i++) host[i] = __float2bfloat16_rn(x[i]);
    cudaMalloc((void **)&dev, sizeof host[0] * n);
    cudaMemcpy(dev, host, sizeof host[0] * n, cudaMemcpyHostToDevice);
    return dev;
}

/* D of loader_kernel in `mode` (A: M x K, B: K x N2) equals want exactly. */
static int run_loader(int mode, const float *A, const float *B, const float *want) {
    float Bt[N2 * K], got[M * N2], *dD;
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N2; n++) Bt[n * K + k] = B[k * N2 + n];
    __nv_bfloat16 *dA = device_bf16(A, M * K), *dB = device_bf16(B, K * N2), *dBt = device_bf16(Bt, N2 * K);
    cudaMalloc((void **)&dD, sizeof(float) * M * N2);
    loader_kernel<<<1, 32>>>(dD, dA, dB, dBt, mode);
    cudaMemcpy(got, dD, sizeof(float) * M * N2, cudaMemcpyDeviceToHost);
    cudaFree(dA); cudaFree(dB); cudaFree(dBt); cudaFree(dD);
    int same = 1;
    for (int i = 0; i < M * N2; i++) same &= got[i] == want[i];
    return same;
}

/* want[16 x 16] = X[16 x 16] Y[16 x 16], in float (exact for the small integers here). */
static void product16(float *want, const float *X, const float *Y) {
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            float s = 0.0f;
            for (int k = 0; k < 16; k++) s += X[m * 16 + k] * Y[k * 16 + n];
            want[m * 16 + n] = s;
        }
}

static int check_loaders(const float *A) {
    float B[K * N2], AB[M * N2], want[M * N2];
    for (int i = 0; i < K * N2; i++) B[i] = (float)((i * 5 + 1) % 7 - 3);
    product16(want, A, B);
    int failed = 0;
    const char *names[2] = {"emu_mma_loaders_a_rows_b_rows", "emu_mma_loaders_a_rows_b_cols"};
    for (int mode = 0; mode < 2; mode++) {
        if (run_loader(mode, A, B, want)) printf("ok %s\n", names[mode]);
        else { printf("not ok %s - D != A B\n", names[mode]); failed = 1; }
    }
    if (!run_loader(3, A, B, want)) printf("ok emu_mma_loaders_wrong_layout_detected\n");
    else { printf("not ok emu_mma_loaders_wrong_layout_detected - B^T read by columns gave A B\n"); failed = 1; }
    /* (A B) B: entries of A B are integers below 256, exact in bf16. */
    product16(AB, A, B);
    product16(want, AB, B);
    if (run_loader(2, A, B, want)) printf("ok emu_mma_accumulators_as_a_fragment\n");
    else { printf("not ok emu_mma_accumulators_as_a_fragment - D != (A B) B\n"); failed = 1; }
    return failed;
}

/* ldmatrix itself against the PTX ISA's definition, written out here: a
 * 32 x LD tile of distinct 16-bit patterns in shared memory; lane l gives
 * the address of tile row rowof(l) (a permutation, so a stand-in that
 * ignored the addresses or mixed up the lanes would be caught), at column
 * 8 (l % 2). x4 (mma.cuh's) and x2 (the emulator's call), plain and
 * transposed; in x2 lanes 16-31 give addresses that must be ignored (NULL). out[lane * 4 + m]: the registers. */
static __host__ __device__ int rowof(int l) { return (l * 13 + 5) % 32; }
__global__ void ldmatrix_kernel(uint32_t *out, int form) {
    __shared__ __align__(16) __nv_bfloat16 tile[32 * LD];
    const int lane = threadIdx.x;
    for (int e = lane; e < 32 * LD; e += 32) tile[e] = __ushort_as_bfloat16((unsigned short)(0x1000 + e));
    __syncthreads();
    const __nv_bfloat16 *row = tile + rowof(lane) * LD + 8 * (lane & 1);
    uint32_t r[4] = {0, 0, 0, 0};
    if (form == 0) mma_ldmatrix_x4<false>(r, row);
    else if (form == 1) mma_ldmatrix_x4<true>(r, row);
    else ::emu::ldmatrix(r, 2, form == 2, lane < 16 ? row : NULL); /* x2: the kernels use none */
    for (int m = 0; m < 4; m++) out[lane * 4 + m] = r[m];
}

static int check_ldmatrix(void) {
    const char *names[4] = {"emu_ldmatrix_x4", "emu_ldmatrix_x4_trans", "emu_ldmatrix_x2_trans_ignores_upper_lanes",
                            "emu_ldmatrix_x2_ignores_upper_lanes"};
    int failed = 0;
    for (int form = 0; form < 4; form++) {
        uint32_t got[32 * 4], *d;
        cudaMalloc((void **)&d, sizeof got);
        ldmatrix_kernel<<<1, 32>>>(d, form);
        cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost);
        cudaFree(d);
        int bad = 0;
        const int count = form >= 2 ? 2 : 4;
        for (int lane = 0; lane < 32; lane++)
            for (int m = 0; m < 4; m++) {
                uint32_t want = 0;
                if (m < count) {
                    /* PTX ISA: lane 4i + j gets elements 2j, 2j + 1 of row i of matrix m (trans: of column i) */
                    const int i = lane >> 2, j = lane & 3;
                    unsigned short half[2];
                    for (int h = 0; h < 2; h++) {
                        const bool trans = form == 1 || form == 2;
                        const int giver = 8 * m + (trans ? 2 * j + h : i), col = trans ? i : 2 * j + h;
                        half[h] = (unsigned short)(0x1000 + rowof(giver) * LD + 8 * (giver & 1) + col);
                    }
                    want = (uint32_t)half[0] | ((uint32_t)half[1] << 16);
                }
                bad += got[lane * 4 + m] != want;
            }
        if (!bad) printf("ok %s\n", names[form]);
        else { printf("not ok %s - %d of 128 registers differ from the PTX ISA's layout\n", names[form], bad); failed = 1; }
    }
    return failed;
}

/* Shared memory a block never wrote reads as NaN (the launcher refills it
 * before every block), also in a function template, where g++ drops the
 * section attribute (tests/emu/build.sh moves such arrays back). The first
 * block writes its array; the second must not see those values. */
template <typename T>
__global__ void unwritten_shared_kernel(T *out) {
    __shared__ T s[32];
    if (blockIdx.x == 0) s[threadIdx.x] = (T)1;
    __syncthreads();
    out[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
}

static int check_shared_poison(void) {
    float *d, got[64];
    cudaMalloc((void **)&d, sizeof got);
    unwritten_shared_kernel<float><<<2, 32>>>(d);
    cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost);
    cudaFree(d);
    int nan = 0;
    for (int i = 32; i < 64; i++) nan += got[i] != got[i];
    if (got[0] == 1.0f && nan == 32) {
        printf("ok emu_template_shared_memory_poisoned\n");
        return 0;
    }
    printf("not ok emu_template_shared_memory_poisoned - %d of 32 unwritten values are NaN (first block read %g)\n", nan,
           got[0]);
    return 1;
}

static int run(int swap, const float *A, const float *B, const float *C, const float *want) {
    float *dA, *dB, *dC, *dD, got[M * N];
    cudaMalloc((void **)&dA, sizeof(float) * M * K);
    cudaMalloc((void **)&dB, sizeof(float) * K * N);
    cudaMalloc((void **)&dC, sizeof(float) * M * N);
    cudaMalloc((void **)&dD, sizeof(float) * M * N);
    cudaMemcpy(dA, A, sizeof(float) * M * K, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, B, sizeof(float) * K * N, cudaMemcpyHostToDevice);
    cudaMemcpy(dC, C, sizeof(float) * M * N, cudaMemcpyHostToDevice);
    mma_kernel<<<1, 32>>>(dD, dA, dB, dC, swap);
    cudaMemcpy(got, dD, sizeof(float) * M * N, cudaMemcpyDeviceToHost);
    cudaFree(dA); cudaFree(dB); cudaFree(dC); cudaFree(dD);
    int same = 1;
    for (int i = 0; i < M * N; i++) same &= got[i] == want[i];
    return same;
}

int main(void) {
    float A[M * K], B[K * N], C[M * N], want[M * N];
    for (int i = 0; i < M * K; i++) A[i] = (float)((i * 7 + 3) % 9 - 4);
    for (int i = 0; i < K * N; i++) B[i] = (float)((i * 5 + 1) % 7 - 3);
    for (int i = 0; i < M * N; i++) C[i] = (float)(i % 5 - 2);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float s = C[m * N + n];
            for (int k = 0; k < K; k++) s += A[m * K + k] * B[k * N + n];
            want[m * N + n] = s;
        }
    int failed = 0;
    if (run(0, A, B, C, want)) printf("ok emu_mma_m16n8k16_bf16_equals_product\n");
    else { printf("not ok emu_mma_m16n8k16_bf16_equals_product - D != A B + C\n"); failed = 1; }
    if (!run(1, A, B, C, want)) printf("ok emu_mma_wrong_fragment_layout_detected\n");
    else { printf("not ok emu_mma_wrong_fragment_layout_detected - swapped fragments gave the product\n"); failed = 1; }
    failed |= check_loaders(A);
    failed |= check_ldmatrix();
    failed |= check_shared_poison();
    return failed;
}

/* Unit test of the emulated tensor-core product (tests/emu/cuda_emu.h's
 * stand-in for mma.sync m16n8k16 bf16, reached through
 * kernels/cuda/mma.cuh): one warp builds its fragments straight from the
 * PTX ISA's layout tables, written out here independently of the
 * stand-in, and D must equal the plain product A B + C exactly (small
 * integers: every sum is exact in float32). Then the same with rows of A's
 * fragment swapped (a[1] <-> a[2]) must differ, so the check can fail.
 * The shared-memory loaders of mma.cuh are checked the same way: each
 * stored layout they read (row-major A, transposed A, B by rows, B by
 * columns) and the accumulators reused as an A fragment must give the
 * plain product, and a tile read with the wrong loader must not.
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

/* The loaders: mode 0 reads A row-major and B by rows (B^T stored), mode 1
 * A transposed (A^T stored) and B by columns (B stored), mode 2 computes
 * the 16x16 product A [B | B2] into two accumulators and multiplies their
 * A fragment by B: D = (A [B | B2]) B. Mode 3 is mode 0 with B read by
 * columns from B^T: wrong on purpose. */
__global__ void loader_kernel(float *D, const __nv_bfloat16 *A, const __nv_bfloat16 *At, const __nv_bfloat16 *B,
                              const __nv_bfloat16 *Bt, const __nv_bfloat16 *B2, int mode) {
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    uint32_t a[4], b[2];
    float d[4] = {0, 0, 0, 0};
    if (mode == 1) mma_load_a_transposed(a, At, M);
    else mma_load_a(a, A, K);
    if (mode == 0) mma_load_b_rows(b, Bt, K);
    else if (mode == 3) mma_load_b_cols(b, Bt, K);
    else mma_load_b_cols(b, B, N);
    if (mode == 2) {
        float lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
        uint32_t b2[2];
        mma_load_b_cols(b2, B2, N);
        mma_bf16_16816(lo, a, b);
        mma_bf16_16816(hi, a, b2);
        mma_a_from_accumulators(a, lo, hi);
    }
    mma_bf16_16816(d, a, b);
    for (int r = 0; r < 4; r++) D[(g + 8 * (r >> 1)) * N + 2 * t + (r & 1)] = d[r];
}

static __nv_bfloat16 *device_bf16(const float *x, int n) {
    __nv_bfloat16 host[M * K], *dev;
    for (int i = 0; i < n; i++) host[i] = __float2bfloat16_rn(x[i]);
    cudaMalloc((void **)&dev, sizeof host[0] * n);
    cudaMemcpy(dev, host, sizeof host[0] * n, cudaMemcpyHostToDevice);
    return dev;
}

/* D of loader_kernel in `mode` equals want exactly. */
static int run_loader(int mode, const float *A, const float *B, const float *B2, const float *want) {
    float At[M * K], Bt[K * K] = {0}, got[M * N], *dD; /* Bt 16 x 16: mode 3 reads it with ld K as a 16 x 16 tile */
    for (int r = 0; r < M; r++)
        for (int c = 0; c < K; c++) At[c * M + r] = A[r * K + c];
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) Bt[n * K + k] = B[k * N + n];
    __nv_bfloat16 *dA = device_bf16(A, M * K), *dAt = device_bf16(At, M * K), *dB = device_bf16(B, K * N),
                  *dBt = device_bf16(Bt, K * K), *dB2 = device_bf16(B2, K * N);
    cudaMalloc((void **)&dD, sizeof(float) * M * N);
    loader_kernel<<<1, 32>>>(dD, dA, dAt, dB, dBt, dB2, mode);
    cudaMemcpy(got, dD, sizeof(float) * M * N, cudaMemcpyDeviceToHost);
    cudaFree(dA); cudaFree(dAt); cudaFree(dB); cudaFree(dBt); cudaFree(dB2); cudaFree(dD);
    int same = 1;
    for (int i = 0; i < M * N; i++) same &= got[i] == want[i];
    return same;
}

/* want[M x N] = X[M x K] Y[K x N], in float (exact for the small integers here). */
static void product(float *want, const float *X, const float *Y) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++) s += X[m * K + k] * Y[k * N + n];
            want[m * N + n] = s;
        }
}

static int check_loaders(const float *A, const float *B) {
    float B2[K * N], AB[M * K], want[M * N];
    for (int i = 0; i < K * N; i++) B2[i] = (float)((i * 3 + 2) % 5 - 2);
    product(want, A, B);
    int failed = 0;
    const char *names[2] = {"emu_mma_loaders_a_rows_b_rows", "emu_mma_loaders_a_transposed_b_cols"};
    for (int mode = 0; mode < 2; mode++) {
        if (run_loader(mode, A, B, B2, want)) printf("ok %s\n", names[mode]);
        else { printf("not ok %s - D != A B\n", names[mode]); failed = 1; }
    }
    if (!run_loader(3, A, B, B2, want)) printf("ok emu_mma_loaders_wrong_layout_detected\n");
    else { printf("not ok emu_mma_loaders_wrong_layout_detected - B^T read by columns gave A B\n"); failed = 1; }
    /* (A [B | B2]) B: entries of A [B | B2] are integers below 256, exact in bf16. */
    for (int m = 0; m < M; m++)
        for (int c = 0; c < K; c++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++) s += A[m * K + k] * (c < N ? B[k * N + c] : B2[k * N + c - N]);
            AB[m * K + c] = s;
        }
    product(want, AB, B);
    if (run_loader(2, A, B, B2, want)) printf("ok emu_mma_accumulators_as_a_fragment\n");
    else { printf("not ok emu_mma_accumulators_as_a_fragment - D != (A [B | B2]) B\n"); failed = 1; }
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
    failed |= check_loaders(A, B);
    failed |= check_shared_poison();
    return failed;
}

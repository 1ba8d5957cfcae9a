/* Unit test of the emulated tensor-core product (tests/emu/cuda_emu.h's
 * stand-in for mma.sync m16n8k16 bf16, reached through
 * kernels/cuda/mma.cuh): one warp builds its fragments straight from the
 * PTX ISA's layout tables, written out here independently of the
 * stand-in, and D must equal the plain product A B + C exactly (small
 * integers: every sum is exact in float32). Then the same with rows of A's
 * fragment swapped (a[1] <-> a[2]) must differ, so the check can fail.
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
    return failed;
}

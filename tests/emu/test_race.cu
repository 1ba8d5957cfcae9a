/* Unit test of the emulation's data-race check (tests/emu/emu_race.cpp,
 * built only by EMU_RACE=1 bash tests/emu/build.sh): each racy kernel
 * below must be reported, and its corrected twin (the barrier or warp sync
 * added, the write moved to its own block) must not:
 * - shared memory read after another thread's write, no __syncthreads;
 * - shared memory overwritten while other threads may still read it;
 * - a warp's lanes exchanging through shared memory without __syncwarp
 *   (and __syncwarp does not order two warps);
 * - device memory written by one block and read or written by another in
 *   the same launch (blocks are not ordered), and across two launches
 *   (which are);
 * - a cp.async tile read by other threads after the issuing thread's wait
 *   but without a __syncthreads.
 * The report must name the source lines of both accesses.
 * Prints "ok NAME" / "not ok NAME - reason"; exit 1 on a failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cuda/async_copy.cuh"
#include "tests/emu/emu_hooks.h"
#include "tests/tap.h"

#define THREADS 64

/* The lines of its write and its read, which the report must name. */
enum { NEIGHBOUR_WRITE_LINE = __LINE__ + 5, NEIGHBOUR_READ_LINE = __LINE__ + 7 };

__global__ void neighbour_kernel(float *out, bool sync) {
    __shared__ float s[THREADS];
    const int t = threadIdx.x;
    s[t] = (float)t;
    if (sync) __syncthreads();
    out[t] = s[(t + 1) % THREADS];
}

/* Reads a neighbour's slot, then overwrites its own: without the second
 * barrier the neighbour may overwrite the slot before it was read. */
__global__ void overwrite_kernel(float *out, bool sync) {
    __shared__ float s[THREADS];
    const int t = threadIdx.x;
    s[t] = (float)t;
    __syncthreads();
    const float v = s[(t + 1) % THREADS];
    if (sync) __syncthreads();
    s[t] = v;
    __syncthreads();
    out[t] = s[t];
}

/* One thread writes what all read, each round: a broadcast slot. */
__global__ void broadcast_kernel(float *out, bool sync) {
    __shared__ float slot;
    const int t = threadIdx.x;
    float acc = 0.0f;
    for (int round = 0; round < 2; round++) {
        if (t == 0) slot = (float)round;
        __syncthreads();
        acc += slot;
        if (sync) __syncthreads();
    }
    out[t] = acc;
}

/* Lanes swap through shared memory; partner: the lane (or thread) read. */
__global__ void warp_swap_kernel(float *out, int partner_xor, bool sync) {
    __shared__ float s[THREADS];
    const int t = threadIdx.x;
    s[t] = (float)t;
    if (sync) __syncwarp();
    out[t] = s[t ^ partner_xor];
}

/* Every block writes out[0] (racy) or its own out[blockIdx.x]. */
__global__ void blocks_write_kernel(float *out, bool shared_slot) {
    if (threadIdx.x == 0) out[shared_slot ? 0 : blockIdx.x] = (float)blockIdx.x;
}

/* x[i] = x[i + 1] across blocks (racy in one launch), or from a copy. */
__global__ void shift_kernel(float *dst, const float *src, int n) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 1 < n) dst[i] = src[i + 1];
}

__global__ void fill_kernel(float *x, int n) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) x[i] = (float)i;
}

#define CHUNK 4 /* floats per 16-byte copy */
__global__ void async_tile_kernel(float *out, const float *src, bool sync) {
    __shared__ __align__(16) float tile[THREADS * CHUNK];
    const int t = threadIdx.x;
    async_copy16(tile + t * CHUNK, src + t * CHUNK);
    async_commit();
    async_wait<0>();
    if (sync) __syncthreads();
    out[t] = tile[((t + 1) % THREADS) * CHUNK];
}

/* Races found while `launch` runs (their errors forgiven after). */
template <typename F>
static long races_in(F launch) {
    const long errors = emu_errors(), before = emu_races();
    launch();
    cudaDeviceSynchronize();
    const long found = emu_races() - before;
    emu_errors_forgive(errors);
    return found;
}

/* One racy kernel and its fixed twin. */
template <typename F>
static int pair(const char *name, F launch) {
    char n[128];
    snprintf(n, sizeof n, "%s_racy_reported", name);
    int failed = tap_result(races_in([&] { launch(false); }) > 0, n, "no race reported");
    snprintf(n, sizeof n, "%s_fixed_quiet", name);
    return failed + tap_result(races_in([&] { launch(true); }) == 0, n, "a race reported in the synchronized kernel");
}

/* The report of the neighbour race, captured from stderr, names this file
 * and the lines of the write and the read. */
static int check_report_names_lines(float *d) {
    fflush(stderr);
    char path[] = "/tmp/emu_race_XXXXXX";
    const int fd = mkstemp(path), saved = dup(2);
    dup2(fd, 2);
    races_in([&] { neighbour_kernel<<<1, THREADS>>>(d, false); });
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[4096] = {0};
    lseek(fd, 0, SEEK_SET);
    const ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    unlink(path);
    (void)got;
    char write_at[64], read_at[64];
    snprintf(write_at, sizeof write_at, "test_race.cu:%d", (int)NEIGHBOUR_WRITE_LINE);
    snprintf(read_at, sizeof read_at, "test_race.cu:%d", (int)NEIGHBOUR_READ_LINE);
    const bool names = strstr(text, "data race on shared memory") && strstr(text, write_at) && strstr(text, read_at) &&
                       strstr(text, "neighbour_kernel");
    return tap_result(names, "report_names_both_lines", text[0] ? text : "nothing on stderr");
}

int main(void) {
    int failures = 0;
    float *d, *x, *y;
    cudaMalloc((void **)&d, 4 * THREADS * CHUNK * sizeof(float));
    cudaMalloc((void **)&x, 4 * THREADS * sizeof(float));
    cudaMalloc((void **)&y, 4 * THREADS * sizeof(float));
    fill_kernel<<<4, THREADS>>>(d, 4 * THREADS * CHUNK);

    failures += pair("shared_read_after_write", [&](bool sync) { neighbour_kernel<<<1, THREADS>>>(x, sync); });
    failures += pair("shared_write_after_read", [&](bool sync) { overwrite_kernel<<<1, THREADS>>>(x, sync); });
    failures += pair("shared_broadcast_rewritten", [&](bool sync) { broadcast_kernel<<<1, THREADS>>>(x, sync); });
    failures += pair("warp_lanes_swap", [&](bool sync) { warp_swap_kernel<<<1, THREADS>>>(x, 1, sync); });
    failures += tap_result(races_in([&] { warp_swap_kernel<<<1, THREADS>>>(x, 32, true); }) > 0, "syncwarp_does_not_order_warps",
          "lanes of two warps exchanged after only __syncwarp, not reported");
    failures += pair("blocks_write_one_slot", [&](bool own) { blocks_write_kernel<<<4, 1>>>(x, !own); });
    failures += pair("blocks_shift_in_place", [&](bool copy) {
        fill_kernel<<<4, THREADS>>>(x, 4 * THREADS);
        if (copy) {
            cudaMemcpy(y, x, 4 * THREADS * sizeof(float), cudaMemcpyDeviceToDevice);
            shift_kernel<<<4, THREADS>>>(x, y, 4 * THREADS);
        } else {
            shift_kernel<<<4, THREADS>>>(x, x, 4 * THREADS);
        }
    });
    failures += tap_result(races_in([&] {
              fill_kernel<<<4, THREADS>>>(x, 4 * THREADS);
              shift_kernel<<<4, THREADS>>>(y, x, 4 * THREADS);
              fill_kernel<<<4, THREADS>>>(x, 4 * THREADS);
          }) == 0,
          "launches_are_ordered", "a write and a read in different launches reported");
    failures += pair("async_copy_tile", [&](bool sync) { async_tile_kernel<<<1, THREADS>>>(x, d, sync); });
    failures += check_report_names_lines(x);

    cudaFree(d);
    cudaFree(x);
    cudaFree(y);
    return failures ? 1 : 0;
}

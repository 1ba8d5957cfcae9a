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
 *   (which are); a last block reading the others' writes after counting
 *   its arrival, without the barrier after the writes, the fence before
 *   the count or the fence after it (kernels/cuda/dq_slots.cuh's);
 * - a cp.async tile read by other threads after the issuing thread's wait
 *   but without a __syncthreads;
 * - Hopper's syncs (the clocks of tests/emu/emu_race_clock.cpp): a slot
 *   written after the mbarrier arrival its reader waits for; a buffer
 *   rewritten after waiting for an "empty" arrival that one lane made
 *   without a __syncwarp after its warp's reads; a named barrier's arrival
 *   before the write; a bulk tensor load's box read before the wait on its
 *   mbarrier, or loaded again over a box still being read; a wgmma operand
 *   rewritten by another warpgroup released before the product's wait; a
 *   tile stored by threads and read by wgmma without fence.proxy.async
 *   after the stores;
 * - a warpgroup rewriting its own wgmma operand before the wait: an error
 *   of the wgmma stand-in besides the races (the operand changed between
 *   the issue and the wait), which sees it within one thread too.
 * The report must name the source lines of both accesses.
 * Prints "ok NAME" / "not ok NAME - reason"; exit 1 on a failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/dq_slots.cuh"
#include "kernels/cuda/mbarrier.cuh"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/tma.cuh"
#include "kernels/cuda/wgmma.cuh"
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

/* Lane 0 of warp 0 hands a slot to warp 1 through an mbarrier: written
 * before its arrival (fixed) or after it (racy). */
__global__ void mbar_handoff_kernel(float *out, bool sync) {
    __shared__ float slot;
    __shared__ __align__(8) uint64_t full;
    const int t = threadIdx.x;
    if (t == 0) {
        mbar_init(&full, 1);
        mbar_fence_init();
    }
    __syncthreads();
    if (t == 0) {
        if (sync) slot = 1.0f;
        mbar_arrive(&full);
        if (!sync) slot = 1.0f;
    }
    if (t >= 32) {
        mbar_wait(&full, 0);
        out[t] = slot;
    }
}

/* Warp 1 reads a buffer, then its lane 0 alone arrives on `empty`; warp 0's
 * lane 0 waits for that and rewrites the buffer. Without the __syncwarp
 * before the arrival, lanes 1 to 31's reads are not ordered before it. */
__global__ void mbar_release_kernel(float *out, bool sync) {
    __shared__ float buffer[32];
    __shared__ __align__(8) uint64_t empty;
    const int t = threadIdx.x;
    if (t == 0) {
        mbar_init(&empty, 1);
        mbar_fence_init();
    }
    if (t < 32) buffer[t] = (float)t;
    __syncthreads();
    if (t >= 32) {
        out[t] = buffer[t - 32];
        if (sync) __syncwarp();
        if (t == 32) mbar_arrive(&empty);
    } else if (t == 0) {
        mbar_wait(&empty, 0);
        for (int i = 0; i < 32; i++) buffer[i] = -1.0f;
    }
}

/* Warps 0 and 1 write, then bar.arrive; warps 2 and 3 bar.sync, then read:
 * the write after the arrival races. */
__global__ void named_kernel(float *out, bool sync) {
    __shared__ float s[THREADS];
    const int t = threadIdx.x;
    if (t < THREADS) {
        if (sync) s[t] = (float)t;
        named_bar_arrive(1, 2 * THREADS);
        if (!sync) s[t] = (float)t;
    } else {
        named_bar_sync(1, 2 * THREADS);
        out[t - THREADS] = s[t - THREADS];
    }
}

#define BOX 64 /* bf16 elements: one 128-byte row of the box */
/* Thread 0 loads a 64 x 2 box by the bulk tensor copy; every thread reads
 * it after the wait (fixed) or before it (racy: the box may not be there);
 * or (reload) thread 0 loads the box again, on a second mbarrier, once it
 * has waited, while the others may still read the first load (racy without
 * a __syncthreads). */
__global__ void tma_kernel(const __grid_constant__ CUtensorMap map, float *out, bool sync, bool reload) {
    __shared__ __align__(1024) uint16_t box[2 * BOX];
    __shared__ __align__(8) uint64_t full[2];
    const int t = threadIdx.x;
    if (t == 0) {
        mbar_init(&full[0], 1);
        mbar_init(&full[1], 1);
        mbar_fence_init();
    }
    __syncthreads();
    if (t == 0) {
        mbar_arrive_expect_tx(&full[0], sizeof box);
        tma_load_2d(box, &map, &full[0], 0, 0);
    }
    float v = 0.0f;
    if (!sync && !reload) v = box[t];
    mbar_wait(&full[0], 0);
    v += box[t];
    if (reload) {
        if (sync) __syncthreads();
        if (t == 0) {
            mbar_arrive_expect_tx(&full[1], sizeof box);
            tma_load_2d(box, &map, &full[1], 0, 0);
        }
        mbar_wait(&full[1], 0);
    }
    out[t] = v;
}

/* Every thread stores 1.0 over the tiles (A at 0, B at 2048); with
 * `fence`, fence.proxy.async makes the stores visible to wgmma's reads. */
static __device__ void fill_tiles(unsigned char *tiles, bool fence) {
    for (int i = threadIdx.x; i < 2048; i += blockDim.x) ((uint16_t *)tiles)[i] = 0x3f80;
    if (fence) fence_proxy_async_shared();
    __syncthreads();
}

/* Warpgroup 0 issues D = A B (N 16, K-major, no swizzle) and commits it. */
static __device__ void issue_product(unsigned char *tiles, float (&d)[8]) {
    for (int i = 0; i < 8; i++) d[i] = 0.0f;
    wgmma_fence();
    wgmma_ss<16, 0, 0>(d, wgmma_desc(tiles, 128, 256, 0), wgmma_desc(tiles + 2048, 128, 256, 0), 0);
    wgmma_commit();
}

/* Warpgroup 0 multiplies the tiles; it lets warpgroup 1 go (a named
 * barrier) after its wait (fixed) or between the issue and the wait
 * (racy), and warpgroup 1 rewrites the B tile. With `self`, warpgroup 0's
 * own threads rewrite B before their wait. */
__global__ void wgmma_operand_kernel(float *out, bool sync, bool self) {
    __shared__ __align__(1024) unsigned char tiles[4096];
    const int t = threadIdx.x;
    fill_tiles(tiles, true);
    if (t < 128) {
        float d[8];
        issue_product(tiles, d);
        if (self) ((uint16_t *)(tiles + 2048))[t] = 0;
        if (!sync) named_bar_arrive(1, 256);
        wgmma_wait<0>();
        if (sync) named_bar_arrive(1, 256);
        out[t] = d[0];
    } else {
        named_bar_sync(1, 256);
        if (!self) ((uint16_t *)(tiles + 2048))[t - 128] = 0;
    }
}

/* The tiles stored by threads and read by wgmma, and where each thread's
 * fence.proxy.async stands: none (the __syncthreads alone does not order
 * the generic proxy's stores before the async proxy's reads), before the
 * __syncthreads (right), after it (the read may miss the stores: the fence
 * orders nothing the barrier has not), or after it but before a second one
 * (right again). */
enum fence_place { FENCE_NONE, FENCE_BEFORE_SYNC, FENCE_AFTER_SYNC, FENCE_BETWEEN_SYNCS };
__global__ void proxy_fence_kernel(float *out, int place) {
    __shared__ __align__(1024) unsigned char tiles[4096];
    fill_tiles(tiles, place == FENCE_BEFORE_SYNC);
    if (place == FENCE_AFTER_SYNC || place == FENCE_BETWEEN_SYNCS) fence_proxy_async_shared();
    if (place == FENCE_BETWEEN_SYNCS) __syncthreads();
    float d[8];
    issue_product(tiles, d);
    wgmma_wait<0>();
    out[threadIdx.x] = d[0];
}

/* Each block's threads write their shares; thread 0 counts the block's
 * arrival (dq_slots.cuh's dqs_fence and dqs_count, as the wgmma
 * backward's dq sum in the kernel); the last block sums every block's
 * shares. Synchronized: a __syncthreads after the writes, a fence before
 * the count and, in the last block, after it. Each other `missing` leaves
 * one of the three out. */
enum last_block_missing { LAST_SYNCED, LAST_NO_BARRIER, LAST_NO_RELEASE_FENCE, LAST_NO_ACQUIRE_FENCE };
__global__ void last_block_kernel(float *shares, int *count, float *sum, int missing) {
    __shared__ int last;
    shares[blockIdx.x * blockDim.x + threadIdx.x] = (float)(blockIdx.x + threadIdx.x);
    if (missing != LAST_NO_BARRIER) __syncthreads();
    if (threadIdx.x == 0) {
        if (missing != LAST_NO_RELEASE_FENCE) dqs_fence();
        last = dqs_count(count) == (int)gridDim.x - 1;
        if (last && missing != LAST_NO_ACQUIRE_FENCE) dqs_fence();
    }
    __syncthreads();
    if (!last) return;
    float total = 0.0f;
    for (unsigned b = 0; b < gridDim.x; b++) total += shares[b * blockDim.x + threadIdx.x];
    sum[threadIdx.x] = total;
}

/* last_block_kernel over 4 blocks, its count zeroed first. */
static void last_block(float *shares, int *count, float *sum, int missing) {
    cudaMemset(count, 0, sizeof(int));
    last_block_kernel<<<4, THREADS>>>(shares, count, sum, missing);
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

/* What `launch` prints on stderr (its errors forgiven after). */
template <typename F>
static std::string stderr_of(F launch) {
    fflush(stderr);
    char path[] = "/tmp/emu_race_XXXXXX";
    const int fd = mkstemp(path), saved = dup(2);
    dup2(fd, 2);
    races_in(launch);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::string text;
    char buf[4096];
    lseek(fd, 0, SEEK_SET);
    for (ssize_t got; (got = read(fd, buf, sizeof buf)) > 0;) text.append(buf, (size_t)got);
    close(fd);
    unlink(path);
    return text;
}

/* The bulk tensor loads' cases, on a 64 x 2 bf16 tensor. */
static int tma_pairs(float *out) {
    uint16_t *src;
    cudaMalloc((void **)&src, 2 * BOX * sizeof(uint16_t));
    cudaMemset(src, 0, 2 * BOX * sizeof(uint16_t));
    tma_tensor t = {"race test box", src, 2, {BOX, 2}, {0, BOX * sizeof(uint16_t)}, {BOX, 2}, 128};
    alignas(64) CUtensorMap map;
    tg_err e;
    int failures = 0;
    if (tma_map_bf16(&map, &t, &e)) failures += tap_result(0, "tma_map", e.msg);
    else {
        failures += pair("tma_box_read_before_wait", [&](bool sync) { tma_kernel<<<1, 2 * BOX>>>(map, out, sync, false); });
        failures += pair("tma_box_reloaded_while_read", [&](bool sync) { tma_kernel<<<1, 2 * BOX>>>(map, out, sync, true); });
    }
    cudaFree(src);
    return failures;
}

/* The report of the neighbour race, captured from stderr, names this file
 * and the lines of the write and the read (run first: the check reports
 * at most 20 pairs of lines in a run). */
static int check_report_names_lines(float *d) {
    const std::string text = stderr_of([&] { neighbour_kernel<<<1, THREADS>>>(d, false); });
    char write_at[64], read_at[64];
    snprintf(write_at, sizeof write_at, "test_race.cu:%d", (int)NEIGHBOUR_WRITE_LINE);
    snprintf(read_at, sizeof read_at, "test_race.cu:%d", (int)NEIGHBOUR_READ_LINE);
    const bool names = text.find("data race on shared memory") != std::string::npos && text.find(write_at) != std::string::npos &&
                       text.find(read_at) != std::string::npos && text.find("neighbour_kernel") != std::string::npos;
    return tap_result(names, "report_names_both_lines", text.empty() ? "nothing on stderr" : text.c_str());
}

int main(void) {
    int failures = 0;
    float *d, *x, *y;
    cudaMalloc((void **)&d, 4 * THREADS * CHUNK * sizeof(float));
    cudaMalloc((void **)&x, 4 * THREADS * sizeof(float));
    cudaMalloc((void **)&y, 4 * THREADS * sizeof(float));
    fill_kernel<<<4, THREADS>>>(d, 4 * THREADS * CHUNK);
    failures += check_report_names_lines(x);

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
    int *count;
    cudaMalloc((void **)&count, sizeof(int));
    failures += pair("last_block_without_barrier", [&](bool sync) { last_block(d, count, x, sync ? LAST_SYNCED : LAST_NO_BARRIER); });
    failures += pair("last_block_without_release_fence",
                     [&](bool sync) { last_block(d, count, x, sync ? LAST_SYNCED : LAST_NO_RELEASE_FENCE); });
    failures += pair("last_block_without_acquire_fence",
                     [&](bool sync) { last_block(d, count, x, sync ? LAST_SYNCED : LAST_NO_ACQUIRE_FENCE); });
    cudaFree(count);
    failures += pair("async_copy_tile", [&](bool sync) { async_tile_kernel<<<1, THREADS>>>(x, d, sync); });
    failures += pair("mbarrier_slot_written_after_arrival", [&](bool sync) { mbar_handoff_kernel<<<1, THREADS>>>(x, sync); });
    failures += pair("mbarrier_empty_arrival_without_syncwarp", [&](bool sync) { mbar_release_kernel<<<1, THREADS>>>(x, sync); });
    failures += pair("named_barrier_write_after_arrive", [&](bool sync) { named_kernel<<<1, 2 * THREADS>>>(x, sync); });
    failures += tma_pairs(x);
    failures += pair("wgmma_operand_rewritten_before_wait", [&](bool sync) { wgmma_operand_kernel<<<1, 256>>>(x, sync, false); });
    failures += pair("wgmma_tile_stored_without_proxy_fence", [&](bool fence) {
        proxy_fence_kernel<<<1, 128>>>(x, fence ? FENCE_BEFORE_SYNC : FENCE_NONE);
    });
    failures += pair("wgmma_tile_fenced_after_the_sync", [&](bool right) {
        proxy_fence_kernel<<<1, 128>>>(x, right ? FENCE_BEFORE_SYNC : FENCE_AFTER_SYNC);
    });
    failures += tap_result(races_in([&] { proxy_fence_kernel<<<1, 128>>>(x, FENCE_BETWEEN_SYNCS); }) == 0,
                           "wgmma_tile_fenced_between_two_syncs_quiet", "a fence before the second __syncthreads reported");
    const std::string own = stderr_of([&] { wgmma_operand_kernel<<<1, 256>>>(x, true, true); });
    failures += tap_result(own.find("changed between its wgmma.mma_async and the wgmma.wait_group") != std::string::npos,
                           "wgmma_own_operand_rewritten_before_wait_is_an_error", "no such error on stderr");

    cudaFree(d);
    cudaFree(x);
    cudaFree(y);
    return failures ? 1 : 0;
}

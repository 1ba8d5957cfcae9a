/* Hopper's bulk tensor copies (kernels/cuda/tma.cuh), mbarriers, named
 * barriers and setmaxnreg (kernels/cuda/mbarrier.cuh), and the host's
 * tensor maps (kernels/cuda/tensor_map.c), against references written from
 * the documentation, not from the emulator's code:
 * - a box lands in shared memory as the CUDA programming guide draws the
 *   swizzles: rows of the box one after another; under the S-byte swizzle
 *   (a row of exactly S bytes) the 16-byte chunk j of row r is stored at
 *   chunk j ^ (r % 8) for 128B, j ^ ((r / 2) % 4) for 64B, j ^ ((r / 4) % 2)
 *   for 32B; elements outside the tensor read zero;
 * - a 3-stage pipeline over mbarriers (one producer thread in a producer
 *   warpgroup, two consumer warpgroups taking turns by named barriers,
 *   setmaxnreg on both sides) moves the keys of a qkv tensor [B, T, 3, NH,
 *   HS] through shared memory exactly, in strict alternation;
 * - a bulk store writes a box back, leaving what lies outside the tensor;
 * - tma_map_bf16 refuses each broken rule, naming the tensor and the rule.
 * Under the emulation (tests/emu/emu_tma.cpp) also: the destination reads
 * NaN until the wait, the copy reads global memory when it lands, the
 * stand-in cuTensorMapEncodeTiled refuses each of the driver's rules, and
 * each misuse (wrong parity, bytes not announced, bytes that never come,
 * a misaligned destination, a bad map, loads or stores never waited for,
 * named barrier counts, setmaxnreg not warpgroup-uniform) is an emu: ERROR
 * in a child process. Built by nvcc (make GPU=1 build/gpu/test_tma) the
 * same value checks run on a GPU of compute capability 9.0.
 * Prints "ok NAME" / "not ok NAME - reason"; exit 1 on a failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/tma.cuh"
#include "tests/tap.h"

#define BOX_MAX_BYTES (16 << 10)

/* Where element (r, c) of a box with rows of row_bytes lands, in bytes
 * from the box's start (1024-byte aligned), under a swizzle of span bytes. */
static __host__ __device__ unsigned box_offset(unsigned r, unsigned c, unsigned row_bytes, unsigned span) {
    const unsigned b = 2 * c;
    if (!span) return r * row_bytes + b;
    const unsigned x = span == 128 ? r % 8 : span == 64 ? (r / 2) % 4 : (r / 4) % 2;
    return r * span + (((b / 16) ^ x) * 16) + b % 16;
}

/* Thread 0 issues one box load; every thread copies the shared image out.
 * before: the box's first 8 bytes just after the issue; poke: a global
 * element thread 0 rewrites after the issue (the copy reads it when it lands). */
__global__ void box_load_kernel(const __grid_constant__ CUtensorMap map, uint16_t *out, uint16_t *before, uint16_t *poke,
                                int rank, int c0, int c1, int c2, int c3, unsigned bytes) {
    __shared__ __align__(1024) unsigned char smem[BOX_MAX_BYTES];
    __shared__ __align__(8) uint64_t bar;
    if (threadIdx.x == 0) {
        mbar_init(&bar, 1);
        mbar_fence_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        tma_prefetch_map(&map);
        mbar_arrive_expect_tx(&bar, bytes);
        if (rank == 2) tma_load_2d(smem, &map, &bar, c0, c1);
        else if (rank == 3) tma_load_3d(smem, &map, &bar, c0, c1, c2);
        else tma_load_4d(smem, &map, &bar, c0, c1, c2, c3);
        if (before) memcpy(before, smem, 8);
        if (poke) *poke = 0x1234;
    }
    mbar_wait(&bar, 0);
    for (unsigned i = threadIdx.x; i < bytes / 2; i += blockDim.x) out[i] = ((const uint16_t *)smem)[i];
    __syncthreads();
    if (threadIdx.x == 0) mbar_inval(&bar);
}

/* ---- host side ---- */

static uint16_t value_at(size_t i) { return (uint16_t)(1 + i % 0xfffd); } /* never 0 (the fill) nor 0xffff (NaN) */

struct dev_tensor {
    uint16_t *host, *dev;
    size_t n;
};
static dev_tensor tensor_make(size_t n) {
    dev_tensor t = {(uint16_t *)malloc(n * 2), NULL, n};
    for (size_t i = 0; i < n; i++) t.host[i] = value_at(i);
    if (cudaMalloc((void **)&t.dev, n * 2) != cudaSuccess || cudaMemcpy(t.dev, t.host, n * 2, cudaMemcpyHostToDevice)) {
        fprintf(stderr, "test_tma: cannot allocate %zu device bytes\n", n * 2);
        exit(2);
    }
    return t;
}
static void tensor_free(dev_tensor *t) {
    free(t->host);
    cudaFree(t->dev);
}

/* The expected shared image of box t->box at coordinates c of tensor t (the
 * host copy h): each element at box_offset, zero outside the tensor. */
static void reference_box(const tma_tensor *t, const uint16_t *h, const int *c, uint16_t *img) {
    const unsigned row_bytes = t->box[0] * 2;
    size_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->box[d];
    for (size_t e = 0; e < n; e++) {
        size_t rest = e, at = 0;
        bool inside = true;
        for (int d = 0; d < t->rank; d++) {
            const long g = (long)c[d] + (long)(rest % t->box[d]);
            rest /= t->box[d];
            if (g < 0 || (unsigned long)g >= t->dim[d]) inside = false;
            else at += (size_t)g * (d ? t->stride[d] / 2 : 1);
        }
        img[box_offset((unsigned)(e / t->box[0]), (unsigned)(e % t->box[0]), row_bytes, (unsigned)t->swizzle) / 2] =
            inside ? h[at] : 0;
    }
}

static size_t box_elems(const tma_tensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->box[d];
    return n;
}

/* Loads box c of tensor t (device data at t->base, host copy h) and
 * compares the shared image with the reference: a check named `name`. */
static int check_box(const char *name, tma_tensor t, const uint16_t *h, const int *c) {
    alignas(64) CUtensorMap map;
    tg_err e;
    if (tma_map_bf16(&map, &t, &e)) return tap_result(0, name, e.msg);
    const size_t n = box_elems(&t);
    uint16_t *want = (uint16_t *)calloc(n, 2), *got = (uint16_t *)malloc(n * 2), *d_out;
    reference_box(&t, h, c, want);
    cudaMalloc((void **)&d_out, n * 2);
    box_load_kernel<<<1, 128>>>(map, d_out, (uint16_t *)NULL, (uint16_t *)NULL, t.rank, c[0], c[1], t.rank > 2 ? c[2] : 0,
                                t.rank > 3 ? c[3] : 0, (unsigned)(n * 2));
    cudaError_t err = cudaDeviceSynchronize();
    cudaMemcpy(got, d_out, n * 2, cudaMemcpyDeviceToHost);
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
        if (got[i] != want[i]) bad = i;
    char why[256];
    snprintf(why, sizeof why, "%s; first difference at element %zu of %zu: %#x, want %#x", cudaGetErrorString(err), bad, n,
             bad < n ? got[bad] : 0, bad < n ? want[bad] : 0);
    cudaFree(d_out);
    free(want);
    free(got);
    return tap_result(err == cudaSuccess && bad == n, name, why);
}

/* A 2-D tensor of rows x cols elements, rows pitch elements apart. */
static tma_tensor tensor_2d(const char *name, const void *base, int rows, int cols, int pitch, int box_rows, int box_cols,
                            int swizzle) {
    tma_tensor t = {name, base, 2, {(uint64_t)cols, (uint64_t)rows}, {2, (uint64_t)pitch * 2},
                    {(uint32_t)box_cols, (uint32_t)box_rows}, swizzle};
    return t;
}

static int check_box_loads(void) {
    const int rows = 100, cols = 200, pitch = 208; /* rows padded: strides need not equal the width */
    dev_tensor x = tensor_make((size_t)rows * pitch);
    int failed = 0;
    const int inside[2] = {64, 24};
    failed |= check_box("tma_box_2d_swizzle_none_matches_reference", tensor_2d("x", x.dev, rows, cols, pitch, 16, 40, 0),
                        x.host, inside);
    failed |= check_box("tma_box_2d_swizzle_32b_matches_reference", tensor_2d("x", x.dev, rows, cols, pitch, 24, 16, 32),
                        x.host, inside);
    failed |= check_box("tma_box_2d_swizzle_64b_matches_reference", tensor_2d("x", x.dev, rows, cols, pitch, 24, 32, 64),
                        x.host, inside);
    failed |= check_box("tma_box_2d_swizzle_128b_matches_reference", tensor_2d("x", x.dev, rows, cols, pitch, 64, 64, 128),
                        x.host, inside);
    /* across the tensor's last column and row, and before its first: zeros there */
    const int edge[2] = {cols - 24, rows - 10}, before[2] = {-16, -3};
    failed |= check_box("tma_box_oob_past_the_end_reads_zero", tensor_2d("x", x.dev, rows, cols, pitch, 32, 64, 128), x.host,
                        edge);
    failed |= check_box("tma_box_oob_before_the_start_reads_zero", tensor_2d("x", x.dev, rows, cols, pitch, 16, 64, 128),
                        x.host, before);
    tensor_free(&x);
    /* qkv [B, T, 3, NH, HS]: the values of one head of 64 tokens (tma_map_heads, 4-D; also a 3-D view) */
    const int B = 2, T = 50, NH = 3, HS = 64;
    dev_tensor qkv = tensor_make((size_t)B * T * 3 * NH * HS);
    alignas(64) CUtensorMap unused;
    (void)unused;
    const uint64_t row = 3 * NH * HS * 2;
    tma_tensor v = {"qkv (values)", qkv.dev + 2 * NH * HS, 4, {(uint64_t)HS, (uint64_t)NH, (uint64_t)T, (uint64_t)B},
                    {2, (uint64_t)HS * 2, row, row * T}, {64, 1, 64, 1}, 128};
    const int c4[4] = {0, 2, 10, 1}; /* head 2, tokens 10..73 of sequence 1: 24 rows past T */
    failed |= check_box("tma_box_4d_qkv_heads_view_matches_reference", v, qkv.host + 2 * NH * HS, c4);
    tma_tensor v3 = {"qkv (3-D)", qkv.dev, 3, {(uint64_t)(3 * NH * HS), (uint64_t)T, (uint64_t)B}, {2, row, row * T},
                     {32, 8, 2}, 64};
    const int c3[3] = {96, 45, 0};
    failed |= check_box("tma_box_3d_matches_reference", v3, qkv.host, c3);
    tensor_free(&qkv);
    return failed;
}

/* ---- the pipeline: producer warpgroup, two consumer warpgroups ---- */

#define PIPE_STAGES 3
#define PIPE_ROWS 64
#define PIPE_HS 64 /* 128-byte rows: the 128B swizzle */
#define PIPE_TILE_BYTES (PIPE_ROWS * PIPE_HS * 2)
#define BAR_TURN 1   /* named barriers 1, 2: whose turn (consumer 0, 1) */
#define BAR_WG 3     /* 3, 4: a consumer warpgroup done with a stage */

/* Consumer c (0 or 1) copies rows c * 32 .. c * 32 + 31 of stage tile s
 * (token t0 of head h of sequence b) to out [B, T, NH, HS]. */
static __device__ void consume_rows(const uint16_t *tile, uint16_t *out, int c, int t, int b, int h, int t0, int T, int NH) {
    const int r = c * 32 + t / 4, col0 = (t % 4) * 16;
    if (t0 + r >= T) return;
    uint16_t *dst = out + (((size_t)b * T + t0 + r) * NH + h) * PIPE_HS;
    for (int col = col0; col < col0 + 16; col++) dst[col] = tile[box_offset(r, col, PIPE_HS * 2, 128) / 2];
}

__global__ void __launch_bounds__(384, 1) pipeline_kernel(const __grid_constant__ CUtensorMap keys, uint16_t *out, int *order,
                                                       int B, int T, int NH) {
    __shared__ __align__(1024) uint16_t tiles[PIPE_STAGES][PIPE_ROWS * PIPE_HS];
    __shared__ __align__(8) uint64_t full[PIPE_STAGES], empty[PIPE_STAGES];
    __shared__ int turns;
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128, per_seq = (T + PIPE_ROWS - 1) / PIPE_ROWS;
    const int ntiles = B * NH * per_seq;
    if (threadIdx.x == 0) {
        for (int s = 0; s < PIPE_STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 2); /* one arrival per consumer warpgroup */
        }
        turns = 0;
        mbar_fence_init();
    }
    __syncthreads();
    if (wg == 0) { /* the producer: one thread issues, the warpgroup gives its registers away */
        setmaxnreg_dec<40>();
        if (t != 0) return;
        for (int k = 0; k < ntiles; k++) {
            const int s = k % PIPE_STAGES, round = k / PIPE_STAGES;
            mbar_wait(&empty[s], (round & 1) ^ 1); /* the first round passes at once */
            mbar_arrive_expect_tx(&full[s], PIPE_TILE_BYTES);
            tma_load_4d(tiles[s], &keys, &full[s], 0, (k / per_seq) % NH, (k % per_seq) * PIPE_ROWS, k / (per_seq * NH));
        }
        return;
    }
    setmaxnreg_inc<232>();
    const int c = wg - 1;
    if (c == 1) named_bar_arrive(BAR_TURN + 0, 256); /* consumer 0 goes first */
    for (int k = 0; k < ntiles; k++) {
        const int s = k % PIPE_STAGES, round = k / PIPE_STAGES;
        mbar_wait(&full[s], round & 1);
        named_bar_sync(BAR_TURN + c, 256); /* my turn: the other warpgroup arrived */
        consume_rows(tiles[s], out, c, t, k / (per_seq * NH), (k / per_seq) % NH, (k % per_seq) * PIPE_ROWS, T, NH);
        if (t == 0) order[turns++] = c;
        named_bar_arrive(BAR_TURN + (1 - c), 256); /* the other's turn */
        named_bar_sync(BAR_WG + c, 128);           /* all of my warpgroup is done with stage s */
        if (t == 0) mbar_arrive(&empty[s]);
    }
}

static int check_pipeline(void) {
    const int B = 2, T = 300, NH = 3;
    const size_t row = 3 * NH * PIPE_HS, n_out = (size_t)B * T * NH * PIPE_HS;
    dev_tensor qkv = tensor_make((size_t)B * T * row);
    alignas(64) CUtensorMap keys;
    tg_err e;
    if (tma_map_heads(&keys, "qkv (keys)", qkv.dev + NH * PIPE_HS, B, T, NH, PIPE_HS, row, PIPE_ROWS, PIPE_HS, 128, &e))
        return tap_result(0, "tma_pipeline_moves_the_keys_exactly", e.msg);
    const int ntiles = B * NH * ((T + PIPE_ROWS - 1) / PIPE_ROWS);
    uint16_t *d_out, *got = (uint16_t *)malloc(n_out * 2);
    int *d_order, *order = (int *)malloc(sizeof(int) * 2 * ntiles);
    cudaMalloc((void **)&d_out, n_out * 2);
    cudaMalloc((void **)&d_order, sizeof(int) * 2 * ntiles);
    cudaMemset(d_out, 0xff, n_out * 2);
    cudaMemset(d_order, 0xff, sizeof(int) * 2 * ntiles);
    pipeline_kernel<<<1, 384>>>(keys, d_out, d_order, B, T, NH);
    const cudaError_t err = cudaDeviceSynchronize();
    cudaMemcpy(got, d_out, n_out * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(order, d_order, sizeof(int) * 2 * ntiles, cudaMemcpyDeviceToHost);
    size_t bad = n_out;
    for (size_t i = 0; i < n_out && bad == n_out; i++) {
        const size_t b = i / ((size_t)T * NH * PIPE_HS), tok = i / (NH * PIPE_HS) % T, rest = i % (NH * PIPE_HS);
        if (got[i] != qkv.host[(b * T + tok) * row + NH * PIPE_HS + rest]) bad = i;
    }
    int turn_bad = -1;
    for (int i = 0; i < 2 * ntiles && turn_bad < 0; i++)
        if (order[i] != i % 2) turn_bad = i;
    char why[256];
    snprintf(why, sizeof why, "%s; first wrong output element %zu of %zu", cudaGetErrorString(err), bad, n_out);
    int failed = tap_result(err == cudaSuccess && bad == n_out, "tma_pipeline_moves_the_keys_exactly", why);
    snprintf(why, sizeof why, "turn %d of %d went to consumer %d", turn_bad, 2 * ntiles, turn_bad >= 0 ? order[turn_bad] : -1);
    failed |= tap_result(err == cudaSuccess && turn_bad < 0, "tma_pipeline_consumers_alternate_by_named_barriers", why);
    cudaFree(d_out);
    cudaFree(d_order);
    free(got);
    free(order);
    tensor_free(&qkv);
    return failed;
}

/* ---- a bulk store ---- */

/* Loads box (0, from_row) of src and stores it at (0, to_row) of dst. */
__global__ void store_kernel(const __grid_constant__ CUtensorMap src, const __grid_constant__ CUtensorMap dst, int from_row,
                             int to_row, unsigned bytes) {
    __shared__ __align__(1024) unsigned char smem[BOX_MAX_BYTES];
    __shared__ __align__(8) uint64_t bar;
    if (threadIdx.x == 0) {
        mbar_init(&bar, 1);
        mbar_fence_init();
        mbar_arrive_expect_tx(&bar, bytes);
        tma_load_2d(smem, &src, &bar, 0, from_row);
        mbar_wait(&bar, 0);
        fence_proxy_async_shared();
        tma_store_2d(&dst, smem, 0, to_row);
        tma_store_commit();
        tma_store_wait<0>();
    }
}

static int check_store(void) {
    const int rows = 40, cols = 64, box_rows = 16, from = 8, to = 32;
    dev_tensor a = tensor_make((size_t)rows * cols), b = tensor_make((size_t)rows * cols);
    cudaMemset(b.dev, 0xff, (size_t)rows * cols * 2);
    alignas(64) CUtensorMap ma, mb;
    tg_err e;
    const tma_tensor ta = tensor_2d("a", a.dev, rows, cols, cols, box_rows, cols, 128);
    const tma_tensor tb = tensor_2d("b", b.dev, rows, cols, cols, box_rows, cols, 128);
    if (tma_map_bf16(&ma, &ta, &e) || tma_map_bf16(&mb, &tb, &e))
        return tap_result(0, "tma_store_writes_the_box_inside_the_tensor", e.msg);
    store_kernel<<<1, 32>>>(ma, mb, from, to, box_rows * cols * 2);
    const cudaError_t err = cudaDeviceSynchronize();
    cudaMemcpy(b.host, b.dev, (size_t)rows * cols * 2, cudaMemcpyDeviceToHost);
    int bad = -1;
    for (int r = 0; r < rows && bad < 0; r++)
        for (int c = 0; c < cols && bad < 0; c++) {
            const uint16_t want = r >= to ? a.host[(size_t)(r - to + from) * cols + c] : 0xffff;
            if (b.host[(size_t)r * cols + c] != want) bad = r * cols + c;
        }
    char why[128];
    snprintf(why, sizeof why, "%s; first wrong element %d", cudaGetErrorString(err), bad);
    tensor_free(&a);
    tensor_free(&b);
    return tap_result(err == cudaSuccess && bad < 0, "tma_store_writes_the_box_inside_the_tensor", why);
}

/* ---- tma_map_bf16's refusals: each names the tensor and the rule ---- */

static int expect_map_refused(const char *name, tma_tensor t, const char *rule) {
    alignas(64) CUtensorMap map;
    tg_err e = {""};
    const int rc = tma_map_bf16(&map, &t, &e);
    char why[1200];
    snprintf(why, sizeof why, "rc %d, message \"%s\", want the tensor's name and \"%s\"", rc, e.msg, rule);
    return tap_result(rc == -1 && strstr(e.msg, "tensor map for qkv (keys)") && strstr(e.msg, rule), name, why);
}

static int check_map_rules(void) {
    uint16_t *d;
    cudaMalloc((void **)&d, 1 << 16);
    const tma_tensor good = tensor_2d("qkv (keys)", d, 64, 64, 64, 64, 64, 128);
    tma_tensor t = good;
    int failed = 0;
    t.base = (const char *)d + 8;
    failed |= expect_map_refused("tma_map_refuses_a_misaligned_global_address", t, "is not 16-byte aligned");
    t = good, t.stride[1] = 65 * 2;
    failed |= expect_map_refused("tma_map_refuses_a_stride_not_a_multiple_of_16", t, "not a multiple of 16");
    t = good, t.box[1] = 257;
    failed |= expect_map_refused("tma_map_refuses_a_box_over_256", t, "the copy engine moves 1 to 256");
    t = good, t.box[0] = 12;
    failed |= expect_map_refused("tma_map_refuses_an_inner_box_not_a_multiple_of_16_bytes", t, "24 bytes, not a multiple of 16");
    t = good, t.swizzle = 64;
    failed |= expect_map_refused("tma_map_refuses_an_inner_box_over_the_swizzle_span", t, "over the 64-byte swizzle span");
    t = good, t.swizzle = 96;
    failed |= expect_map_refused("tma_map_refuses_an_unknown_swizzle", t, "the spans are 0 (none), 32, 64 and 128");
    t = good, t.dim[1] = 0;
    failed |= expect_map_refused("tma_map_refuses_an_empty_dimension", t, "1 to 2^32 are allowed");
    alignas(64) CUtensorMap maps[2];
    tg_err e = {""};
    const int rc = tma_map_bf16((CUtensorMap *)((char *)maps + 32), &good, &e);
    failed |= tap_result(rc == -1 && strstr(e.msg, "is not 64-byte aligned"), "tma_map_refuses_a_misaligned_map", e.msg);
    failed |= tap_result(tma_map_bf16(&maps[0], &good, &e) == 0, "tma_map_accepts_a_good_map", e.msg);
    cudaFree(d);
    return failed;
}

#if defined(EMU_CUDA_EMU_H)
/* ---- the emulation's own behaviour ---- */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/emu/emu_hooks.h"

/* The destination reads NaN from the issue to the wait; the copy reads
 * global memory when it lands (a store to the source after the issue shows). */
static int check_lands_at_wait(void) {
    dev_tensor x = tensor_make(64 * 64);
    alignas(64) CUtensorMap map;
    tg_err e;
    const tma_tensor t = tensor_2d("x", x.dev, 64, 64, 64, 16, 64, 128);
    if (tma_map_bf16(&map, &t, &e)) return tap_result(0, "emu_tma_destination_reads_nan_before_the_wait", e.msg);
    uint16_t *d_out, *d_before, out[16 * 64], before[4];
    cudaMalloc((void **)&d_out, sizeof out);
    cudaMalloc((void **)&d_before, sizeof before);
    box_load_kernel<<<1, 64>>>(map, d_out, d_before, x.dev + 64 * 8, 2, 0, 8, 0, 0, (unsigned)sizeof out);
    cudaMemcpy(out, d_out, sizeof out, cudaMemcpyDeviceToHost);
    cudaMemcpy(before, d_before, sizeof before, cudaMemcpyDeviceToHost);
    bool nan = true;
    for (int i = 0; i < 4; i++) nan &= before[i] == 0xffff;
    int failed = tap_result(nan, "emu_tma_destination_reads_nan_before_the_wait", "the box was there before the wait");
    failed |= tap_result(out[0] == 0x1234 && out[1] == x.host[64 * 8 + 1], "emu_tma_load_reads_global_memory_when_it_lands",
                         "the copy read the source at its issue");
    cudaFree(d_out);
    cudaFree(d_before);
    tensor_free(&x);
    return failed;
}

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *,
                              const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The stand-in cuTensorMapEncodeTiled refuses each of the driver's rules on
 * its own (tma_map_bf16's checks bypassed): a 2-D bf16 map of 64 x 64
 * elements, a box of 64 x 16, the 128B swizzle, with one field broken. */
static int check_encoder_rules(void) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
    if (!fn || q != cudaDriverEntryPointSuccess) return tap_result(0, "emu_encoder_found", "no cuTensorMapEncodeTiled");
    const encode_fn encode = (encode_fn)fn;
    char *d;
    cudaMalloc((void **)&d, 1 << 14);
    struct rule {
        const char *name, *want;
        int field; /* what to break */
    } rules[] = {{"emu_encoder_refuses_a_misaligned_map", "tensorMap", 0},
                 {"emu_encoder_refuses_a_misaligned_address", "globalAddress", 1},
                 {"emu_encoder_refuses_an_empty_dimension", "globalDim[1]", 2},
                 {"emu_encoder_refuses_a_stride_not_a_multiple_of_16", "globalStrides[0]", 3},
                 {"emu_encoder_refuses_a_box_over_256", "boxDim[1] = 257", 4},
                 {"emu_encoder_refuses_an_inner_box_not_a_multiple_of_16_bytes", "not a multiple of 16", 5},
                 {"emu_encoder_refuses_an_inner_box_over_the_swizzle_span", "over the swizzle span of 128", 6},
                 {"emu_encoder_refuses_an_element_stride_over_8", "elementStrides[1] = 9", 7},
                 {"emu_encoder_refuses_a_rank_over_5", "tensorRank 6", 8}};
    int failed = 0;
    for (const rule &r : rules) {
        alignas(64) CUtensorMap maps[2];
        cuuint64_t dim[6] = {64, 64, 1, 1, 1, 1}, stride[5] = {128, 128 * 64, 128 * 64, 128 * 64, 128 * 64};
        cuuint32_t box[6] = {64, 16, 1, 1, 1, 1}, es[6] = {1, 1, 1, 1, 1, 1}, rank = 2;
        CUtensorMap *map = &maps[0];
        void *addr = d;
        if (r.field == 0) map = (CUtensorMap *)((char *)maps + 32);
        if (r.field == 1) addr = d + 8;
        if (r.field == 2) dim[1] = 0;
        if (r.field == 3) stride[0] = 120;
        if (r.field == 4) box[1] = 257;
        if (r.field == 5) box[0] = 4;
        if (r.field == 6) box[0] = 128;
        if (r.field == 7) es[1] = 9;
        if (r.field == 8) rank = 6;
        const CUresult res = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, addr, dim, stride, box, es,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        char why[600];
        snprintf(why, sizeof why, "result %d, refusal \"%s\", want \"%s\"", (int)res, emu_tensor_map_refusal(), r.want);
        failed |= tap_result(res == CUDA_ERROR_INVALID_VALUE && strstr(emu_tensor_map_refusal(), r.want), r.name, why);
    }
    cudaFree(d);
    return failed;
}

enum misuse {
    WRONG_PARITY, NOT_ANNOUNCED, SHORT_ANNOUNCED, NEVER_ARRIVES, MISALIGNED, BAD_MAP, NEVER_WAITED, STORE_NOT_WAITED, NAMED_COUNT,
    NAMED_MISMATCH, NAMED_UNMET, SETMAXNREG_SPLIT, NOT_A_BARRIER
};

/* One misuse each; map: 64 x 64 bf16, a box of 64 x 16 (2048 bytes), the 128B swizzle. */
__global__ void misuse_kernel(const __grid_constant__ CUtensorMap map, int what) {
    __shared__ __align__(1024) unsigned char smem[4096];
    __shared__ __align__(8) uint64_t bar, never_init;
    const unsigned bytes = 2048, t = threadIdx.x;
    alignas(64) CUtensorMap junk;
    memset(&junk, 0, sizeof junk);
    if (t == 0) {
        mbar_init(&bar, 1);
        mbar_fence_init();
    }
    __syncthreads();
    const bool issuer = t == 0;
    switch (what) {
    case WRONG_PARITY: /* phase 0 is current: parity 1 names the (complete) phase before it */
        if (issuer) mbar_arrive_expect_tx(&bar, bytes), tma_load_2d(smem, &map, &bar, 0, 0);
        mbar_wait(&bar, 1);
        break;
    case NOT_ANNOUNCED: /* the arrival completes phase 0 before the copy's bytes are counted */
        if (issuer) mbar_arrive(&bar), tma_load_2d(smem, &map, &bar, 0, 0);
        mbar_wait(&bar, 0);
        break;
    case SHORT_ANNOUNCED: /* two boxes issued, one announced: the phase completes with the second in flight */
        if (issuer) {
            mbar_arrive_expect_tx(&bar, bytes);
            tma_load_2d(smem, &map, &bar, 0, 0);
            tma_load_2d(smem + 2048, &map, &bar, 0, 16);
        }
        mbar_wait(&bar, 0);
        break;
    case NEVER_ARRIVES: /* 1024 bytes announced that no copy brings */
        if (issuer) mbar_arrive_expect_tx(&bar, bytes + 1024), tma_load_2d(smem, &map, &bar, 0, 0);
        mbar_wait(&bar, 0);
        break;
    case MISALIGNED:
        if (issuer) mbar_arrive_expect_tx(&bar, bytes), tma_load_2d(smem + 128, &map, &bar, 0, 0);
        break;
    case BAD_MAP:
        if (issuer) mbar_arrive_expect_tx(&bar, bytes), tma_load_2d(smem, &junk, &bar, 0, 0);
        break;
    case NEVER_WAITED:
        if (issuer) mbar_arrive_expect_tx(&bar, bytes), tma_load_2d(smem, &map, &bar, 0, 0);
        break;
    case STORE_NOT_WAITED:
        if (issuer) tma_store_2d(&map, smem, 0, 0), tma_store_commit();
        break;
    case NAMED_COUNT: named_bar_sync(1, 48); break;
    case NAMED_MISMATCH: named_bar_sync(1, t < 32 ? 64 : 32); break;
    case NAMED_UNMET: /* warp 1 passes a turn that warp 0 never takes */
        if (t >= 32) named_bar_arrive(1, 64);
        break;
    case SETMAXNREG_SPLIT:
        if (t < 96) setmaxnreg_inc<232>();
        else setmaxnreg_dec<40>();
        break;
    case NOT_A_BARRIER: mbar_wait(&never_init, 0); break;
    }
}

/* Runs misuse `what` in a child whose stderr is kept: it must end with exit
 * status 3 or SIGABRT, and its stderr must contain `needle`. */
static int expect_error(const char *name, int what, int threads, const char *needle) {
    char *d;
    cudaMalloc((void **)&d, 64 * 64 * 2);
    cudaMemset(d, 0, 64 * 64 * 2);
    alignas(64) CUtensorMap map;
    tg_err e;
    const tma_tensor t = tensor_2d("x", d, 64, 64, 64, 16, 64, 128);
    if (tma_map_bf16(&map, &t, &e)) return tap_result(0, name, e.msg);
    FILE *log = tmpfile();
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fileno(log), 2);
        misuse_kernel<<<1, threads>>>(map, what);
        cudaDeviceSynchronize(); /* the kernel runs by here also on the lazy device (EMU_LAZY) */
        exit(0); /* the emulator's exit hook turns reported errors into status 3 */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    char text[8192] = "";
    rewind(log);
    const size_t n = fread(text, 1, sizeof text - 1, log);
    text[n] = '\0';
    fclose(log);
    cudaFree(d);
    const bool failed_run = (WIFEXITED(status) && WEXITSTATUS(status) == 3) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    char why[512];
    snprintf(why, sizeof why, "child status %#x, stderr without \"%s\": %.200s", status, needle, text);
    return tap_result(failed_run && strstr(text, needle) != NULL, name, why);
}

static int check_emulation(void) {
    int failed = check_lands_at_wait();
    failed |= check_encoder_rules();
    failed |= expect_error("emu_tma_wrong_parity_reported", WRONG_PARITY, 64, "a wait with the wrong parity");
    failed |= expect_error("emu_tma_bytes_not_announced_reported", NOT_ANNOUNCED, 64, "not announced by mbar_arrive_expect_tx");
    failed |= expect_error("emu_tma_bytes_announced_short_reported", SHORT_ANNOUNCED, 64,
                           "phase 0 completed with 1 bulk copies issued in it still in flight: their bytes were not announced");
    failed |= expect_error("emu_tma_bytes_never_arriving_deadlock", NEVER_ARRIVES, 64,
                           "for parity 0 (phase 0: 0 of 1 arrivals and 1024 transaction bytes pending)");
    failed |= expect_error("emu_tma_misaligned_destination_reported", MISALIGNED, 64, "not 1024-byte aligned");
    failed |= expect_error("emu_tma_bad_map_reported", BAD_MAP, 64, "not a tensor map made by cuTensorMapEncodeTiled");
    failed |= expect_error("emu_tma_load_never_waited_for_reported", NEVER_WAITED, 64, "bulk tensor loads on it never waited for");
    failed |= expect_error("emu_tma_store_never_waited_for_reported", STORE_NOT_WAITED, 64, "bulk tensor stores not waited for");
    failed |= expect_error("emu_named_barrier_count_not_warps_reported", NAMED_COUNT, 64, "a multiple of 32");
    failed |= expect_error("emu_named_barrier_counts_disagree_reported", NAMED_MISMATCH, 64, "while others wait for 64");
    failed |= expect_error("emu_named_barrier_arrivals_unmet_reported", NAMED_UNMET, 64, "arrivals no bar.sync met");
    failed |= expect_error("emu_setmaxnreg_not_warpgroup_uniform_reported", SETMAXNREG_SPLIT, 128, "not warpgroup-uniform");
    failed |= expect_error("emu_mbarrier_never_initialized_reported", NOT_A_BARRIER, 64, "not an mbarrier (mbar_init first)");
    return failed;
}
#endif

int main(void) {
#if !defined(EMU_CUDA_EMU_H)
    int major = 0, dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) ||
        major < 9) {
        printf("skip tma - needs a GPU of compute capability 9.0 or later\n");
        return 0;
    }
#endif
    int failed = check_box_loads();
    failed |= check_pipeline();
    failed |= check_store();
    failed |= check_map_rules();
#if defined(EMU_CUDA_EMU_H)
    failed |= check_emulation();
#endif
    return failed;
}

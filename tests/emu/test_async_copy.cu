/* Unit test of the emulated cp.async (kernels/cuda/async_copy.cuh, the
 * queues of tests/emu/emu_runtime.cpp) and of dynamic shared memory:
 * - a copy lands when its group is waited for, not before: its destination
 *   reads NaN until then (so a kernel that forgets the wait reads NaN), and
 *   async_wait<1> leaves the newest group in flight; copies not yet
 *   committed are not waited for; after the wait and a __syncthreads every
 *   thread sees every thread's copies;
 * - a 4-byte copy (async_copy4_or_zero) likewise reads NaN until waited
 *   for, and with src-size 0 lands a +0 without reading its source;
 * - dynamic shared memory past 48 KiB works after the kernel's
 *   cudaFuncSetAttribute opt-in, and reads NaN in a block that did not
 *   write it;
 * - errors, each in a child process that must exit with the emulator's
 *   status 3 (or abort) and name the problem: a thread exiting with copies
 *   in flight, a launch over 48 KiB without the opt-in, a cp.async into
 *   global memory, a 4-byte copy from a misaligned source.
 * Prints "ok NAME" / "not ok NAME - reason"; exit 1 on a failure. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cuda/async_copy.cuh"
#include "tests/tap.h"

#define THREADS 64
#define CHUNK 4 /* floats per 16-byte copy */

/* What each thread saw of its own two copies (group A, then group B) and of
 * its neighbour's, at each step; see check_groups. */
enum { SEEN_A_BEFORE, SEEN_A_AFTER_WAIT1, SEEN_B_AFTER_WAIT1, SEEN_OPEN_AFTER_WAIT0, SEEN_NEIGHBOUR, SEEN_A_REFILLING, SEEN_COUNT };

__global__ void groups_kernel(float *seen, const float *src) {
    __shared__ __align__(16) float tile[3 * THREADS * CHUNK];
    const int t = threadIdx.x;
    float *a = tile + t * CHUNK, *b = a + THREADS * CHUNK, *open = b + THREADS * CHUNK;
    float *mine = seen + t * SEEN_COUNT * CHUNK;
    async_copy16(a, src + t * CHUNK);
    async_commit();
    async_copy16(b, src + (THREADS + t) * CHUNK);
    async_commit();
    memcpy(mine + SEEN_A_BEFORE * CHUNK, a, 16);
    async_wait<1>();
    memcpy(mine + SEEN_A_AFTER_WAIT1 * CHUNK, a, 16);
    memcpy(mine + SEEN_B_AFTER_WAIT1 * CHUNK, b, 16);
    async_copy16(open, src + (2 * THREADS + t) * CHUNK); /* not committed: wait<0> leaves it */
    async_wait<0>();
    memcpy(mine + SEEN_OPEN_AFTER_WAIT0 * CHUNK, open, 16);
    async_commit();
    async_wait<0>();
    __syncthreads();
    memcpy(mine + SEEN_NEIGHBOUR * CHUNK, tile + ((t + 1) % THREADS) * CHUNK, 16);
    __syncthreads();
    async_copy16(a, src + (THREADS + t) * CHUNK); /* a buffer reused (double buffering): not its old bytes either */
    async_commit();
    memcpy(mine + SEEN_A_REFILLING * CHUNK, a, 16);
    async_wait<0>();
}

static bool all_nan(const float *x) {
    for (int i = 0; i < CHUNK; i++)
        if (x[i] == x[i]) return false;
    return true;
}

/* Runs launch(seen, src) on device copies of src (src_bytes) and seen
 * (seen_bytes), then copies seen back. */
static void run_on_device(void (*launch)(float *, const float *), const float *src, size_t src_bytes, float *seen,
                          size_t seen_bytes) {
    float *d_src, *d_seen;
    cudaMalloc((void **)&d_src, src_bytes);
    cudaMalloc((void **)&d_seen, seen_bytes);
    cudaMemcpy(d_src, src, src_bytes, cudaMemcpyHostToDevice);
    launch(d_seen, d_src);
    cudaMemcpy(seen, d_seen, seen_bytes, cudaMemcpyDeviceToHost);
    cudaFree(d_src);
    cudaFree(d_seen);
}

static void launch_groups(float *seen, const float *src) { groups_kernel<<<1, THREADS>>>(seen, src); }

static int check_groups(void) {
    float src[3 * THREADS * CHUNK], seen[THREADS * SEEN_COUNT * CHUNK];
    for (int i = 0; i < 3 * THREADS * CHUNK; i++) src[i] = (float)i;
    run_on_device(launch_groups, src, sizeof src, seen, sizeof seen);
    bool before = true, a_in = true, b_out = true, open_out = true, neighbour = true, refilling = true;
    for (int t = 0; t < THREADS; t++) {
        const float *mine = seen + t * SEEN_COUNT * CHUNK;
        before &= all_nan(mine + SEEN_A_BEFORE * CHUNK);
        a_in &= memcmp(mine + SEEN_A_AFTER_WAIT1 * CHUNK, src + t * CHUNK, 16) == 0;
        b_out &= all_nan(mine + SEEN_B_AFTER_WAIT1 * CHUNK);
        open_out &= all_nan(mine + SEEN_OPEN_AFTER_WAIT0 * CHUNK);
        neighbour &= memcmp(mine + SEEN_NEIGHBOUR * CHUNK, src + (t + 1) % THREADS * CHUNK, 16) == 0;
        refilling &= all_nan(mine + SEEN_A_REFILLING * CHUNK);
    }
    int failed = tap_result(before, "emu_cp_async_unwaited_copy_reads_nan", "a copy was visible before its wait");
    failed |= tap_result(a_in, "emu_cp_async_wait_group_1_lands_older_group", "the older group did not land");
    failed |= tap_result(b_out, "emu_cp_async_wait_group_1_leaves_newest_group", "the newest group landed");
    failed |= tap_result(open_out, "emu_cp_async_uncommitted_copy_not_waited", "wait<0> performed an uncommitted copy");
    failed |= tap_result(neighbour, "emu_cp_async_visible_to_block_after_wait_and_barrier", "a neighbour's copy is missing");
    failed |= tap_result(refilling, "emu_cp_async_refilled_buffer_reads_nan_until_waited", "the old bytes were still readable");
    return failed;
}

/* Block 0 copies src into the last 16 bytes of 64 KiB of dynamic shared
 * memory (past the default 48 KiB); block 1 only reads them. */
#define DYN_BYTES (64 << 10)
template <typename T>
__global__ void dynamic_kernel(T *out, const T *src) {
    extern __shared__ __align__(16) unsigned char dyn[];
    T *tail = (T *)(dyn + DYN_BYTES - 16);
    if (blockIdx.x == 0) {
        async_copy16(tail, src);
        async_commit();
        async_wait<0>();
    }
    memcpy(out + blockIdx.x * (16 / sizeof(T)), tail, 16);
}

static int check_dynamic_shared(void) {
    float src[CHUNK] = {1, 2, 3, 4}, got[2 * CHUNK], *d_src, *d_out;
    cudaMalloc((void **)&d_src, sizeof src);
    cudaMalloc((void **)&d_out, sizeof got);
    cudaMemcpy(d_src, src, sizeof src, cudaMemcpyHostToDevice);
    const cudaError_t set = cudaFuncSetAttribute((const void *)dynamic_kernel<float>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, DYN_BYTES);
    dynamic_kernel<float><<<2, 1, DYN_BYTES>>>(d_out, d_src);
    const cudaError_t launched = cudaGetLastError();
    cudaMemcpy(got, d_out, sizeof got, cudaMemcpyDeviceToHost);
    cudaFree(d_src);
    cudaFree(d_out);
    int failed = tap_result(set == cudaSuccess && launched == cudaSuccess && memcmp(got, src, 16) == 0,
                        "emu_dynamic_shared_memory_past_48k_after_opt_in", "the copy through dynamic shared memory failed");
    failed |= tap_result(all_nan(got + CHUNK), "emu_dynamic_shared_memory_poisoned_per_block", "block 1 saw block 0's bytes");
    return failed;
}

/* async_copy4_or_zero: thread t copies src[t] when t is even, a zero
 * otherwise (src-size 0: the source is not read); seen holds what each
 * thread read of its float before the wait, then after it. */
__global__ void copy4_kernel(float *seen, const float *src) {
    __shared__ float tile[THREADS];
    const int t = threadIdx.x;
    async_copy4_or_zero(&tile[t], src + t, t % 2 == 0);
    async_commit();
    seen[t] = tile[t];
    async_wait<0>();
    seen[THREADS + t] = tile[t];
}

static void launch_copy4(float *seen, const float *src) { copy4_kernel<<<1, THREADS>>>(seen, src); }

static int check_copy4(void) {
    float src[THREADS], seen[2 * THREADS];
    for (int i = 0; i < THREADS; i++) src[i] = 1.0f + (float)i;
    run_on_device(launch_copy4, src, sizeof src, seen, sizeof seen);
    bool before = true, landed = true, zeros = true;
    for (int t = 0; t < THREADS; t++) {
        before &= seen[t] != seen[t];
        if (t % 2 == 0) landed &= seen[THREADS + t] == src[t];
        else zeros &= seen[THREADS + t] == 0.0f && !signbit(seen[THREADS + t]);
    }
    int failed = tap_result(before, "emu_cp_async4_unwaited_copy_reads_nan", "a 4-byte copy was visible before its wait");
    failed |= tap_result(landed, "emu_cp_async4_copy_lands_after_wait", "a 4-byte copy did not land");
    failed |= tap_result(zeros, "emu_cp_async4_src_size_0_lands_positive_zero", "src-size 0 did not give +0");
    return failed;
}

/* ---- errors, each in a child process ---- */

__global__ void exit_pending_kernel(const float *src) {
    __shared__ __align__(16) float tile[CHUNK];
    async_copy16(tile, src);
    async_commit(); /* and no wait */
}

__global__ void copy_to_global_kernel(float *dst, const float *src) {
    async_copy16(dst, src);
    async_commit();
    async_wait<0>();
}

static void child_exit_pending(float *a, float *b) {
    (void)b;
    exit_pending_kernel<<<1, 1>>>(a);
}
static void child_no_opt_in(float *a, float *b) {
    dynamic_kernel<double><<<1, 1, DYN_BYTES>>>((double *)a, (const double *)b); /* <double>: never opted in */
}
static void child_copy_to_global(float *a, float *b) { copy_to_global_kernel<<<1, 1>>>(a, b); }

__global__ void copy4_misaligned_kernel(const float *src) {
    __shared__ float tile[2];
    async_copy4_or_zero(tile, (const float *)((const char *)src + 2), false); /* src-size 0 still needs the alignment */
    async_commit();
    async_wait<0>();
}
static void child_copy4_misaligned(float *a, float *b) {
    (void)b;
    copy4_misaligned_kernel<<<1, 1>>>(a);
}

/* Runs body in a child whose stderr is kept: it must end with exit status 3
 * or SIGABRT, and its stderr must contain `needle`. */
static int expect_error(const char *name, void (*body)(float *, float *), const char *needle) {
    float *a, *b;
    cudaMalloc((void **)&a, 64);
    cudaMalloc((void **)&b, 64);
    cudaMemset(a, 0, 64);
    cudaMemset(b, 0, 64);
    FILE *log = tmpfile();
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fileno(log), 2);
        body(a, b);
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
    cudaFree(b);
    const bool failed_run = (WIFEXITED(status) && WEXITSTATUS(status) == 3) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    char why[256];
    snprintf(why, sizeof why, "child status %#x, stderr without \"%s\"", status, needle);
    return tap_result(failed_run && strstr(text, needle) != NULL, name, why);
}

int main(void) {
    int failed = check_groups();
    failed |= check_dynamic_shared();
    failed |= check_copy4();
    failed |= expect_error("emu_cp_async_exit_with_copies_in_flight_reported", child_exit_pending, "cp.async copies not waited for");
    failed |= expect_error("emu_dynamic_shared_memory_without_opt_in_rejected", child_no_opt_in,
                           "beyond the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize");
    failed |= expect_error("emu_cp_async_into_global_memory_rejected", child_copy_to_global,
                           "is not in the block's shared memory");
    failed |= expect_error("emu_cp_async4_misaligned_source_rejected", child_copy4_misaligned, "cp.async of 4 bytes misaligned");
    return failed;
}

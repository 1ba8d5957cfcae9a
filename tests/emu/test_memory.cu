/* Unit test of the emulated device's fresh memory (tests/emu/emu_device_memory.cpp):
 * - every byte of a fresh allocation holds EMU_MALLOC_FILL's byte (255 when
 *   unset: NaN as float), as a kernel reads it and as cudaMemcpy copies it
 *   back, in allocations of 1 byte to several pattern chunks (PATTERN:
 *   emu_device_memory.cpp's PATTERN_BYTES), at the ends of each chunk too;
 * - an allocation is aligned to 256 bytes (cudaMalloc's promise);
 * - a kernel's writes stay, and stay its allocation's: another allocation
 *   made before or after reads the fill still (the pattern is shared, its
 *   writes must not be);
 * - memory freed and allocated again reads the fill, not the bytes it held
 *   (a GPU makes no promise, and a kernel that reads what it did not write
 *   must not pass on a previous test's bytes).
 * Prints "ok NAME" / "not ok NAME - reason"; exit 1 on a failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>

#include "tests/tap.h"

#define MIB ((size_t)1 << 20)
#define PATTERN (4 * MIB)

/* Counts the bytes of p[0..n) that are not `fill` into *bad (one thread:
 * the emulator runs it as a plain loop). */
__global__ void count_unlike_kernel(const unsigned char *p, size_t n, unsigned char fill, unsigned long long *bad) {
    unsigned long long b = 0;
    for (size_t i = 0; i < n; i++) b += p[i] != fill;
    *bad = b;
}

__global__ void write_kernel(unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) p[i] = v;
}

static unsigned char expected_fill(void) {
    const char *e = getenv("EMU_MALLOC_FILL");
    return e ? (unsigned char)atoi(e) : 0xff;
}

/* The bytes of device p[0..n) unlike `fill`, as a kernel reads them. */
static unsigned long long unlike_on_device(const void *p, size_t n, unsigned char fill) {
    unsigned long long *bad, got = ~0ull;
    cudaMalloc((void **)&bad, sizeof *bad);
    count_unlike_kernel<<<1, 1>>>((const unsigned char *)p, n, fill, bad);
    cudaMemcpy(&got, bad, sizeof got, cudaMemcpyDeviceToHost);
    cudaFree(bad);
    return got;
}

/* The bytes unlike `fill` among the ones at the edges of each pattern chunk
 * of device p[0..n) and its last ones, as cudaMemcpy copies them back. */
static size_t unlike_copied(const unsigned char *p, size_t n, unsigned char fill) {
    unsigned char edge[64];
    size_t bad = 0;
    for (size_t at = 0; at < n; at += PATTERN / 2) {
        size_t from = at >= 32 ? at - 32 : 0, len = std::min(n - from, sizeof edge);
        cudaMemcpy(edge, p + from, len, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < len; i++) bad += edge[i] != fill;
    }
    size_t len = std::min(n, sizeof edge);
    cudaMemcpy(edge, p + n - len, len, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < len; i++) bad += edge[i] != fill;
    return bad;
}

static int check_fresh(unsigned char fill) {
    const size_t sizes[] = {1, 255, 4096, 4097, PATTERN - 1, PATTERN, PATTERN + 1, 2 * PATTERN + 12345};
    int failed = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        char name[96], why[160];
        void *p = NULL;
        cudaError_t e = cudaMalloc(&p, sizes[s]);
        unsigned long long on_device = e == cudaSuccess ? unlike_on_device(p, sizes[s], fill) : ~0ull;
        size_t copied = e == cudaSuccess ? unlike_copied((const unsigned char *)p, sizes[s], fill) : ~(size_t)0;
        snprintf(name, sizeof name, "emu_fresh_memory_holds_the_fill_%zu_bytes", sizes[s]);
        snprintf(why, sizeof why, "cudaMalloc %d, %llu bytes unlike %u in a kernel, %zu copied back", (int)e, on_device,
                 (unsigned)fill, copied);
        failed |= tap_result(e == cudaSuccess && on_device == 0 && copied == 0, name, why);
        snprintf(name, sizeof name, "emu_fresh_memory_aligned_to_256_%zu_bytes", sizes[s]);
        failed |= tap_result(((uintptr_t)p & 255) == 0, name, "not a multiple of 256");
        cudaFree(p);
    }
    return failed;
}

/* Two allocations over more than one chunk: a kernel writes all of the
 * second; the first, and a third made after, still read the fill, the
 * second reads the kernel's bytes; freed and made again, the fill. */
static int check_private(unsigned char fill) {
    const size_t n = 2 * PATTERN + 999;
    const unsigned char v = (unsigned char)(fill ^ 0x5a);
    unsigned char *a, *b, *c;
    cudaMalloc((void **)&a, n);
    cudaMalloc((void **)&b, n);
    write_kernel<<<1, 256>>>(b, n, v);
    cudaMalloc((void **)&c, n);
    int failed = tap_result(unlike_on_device(b, n, v) == 0, "emu_fresh_memory_keeps_a_kernels_writes", "the written bytes changed");
    failed |= tap_result(unlike_on_device(a, n, fill) == 0 && unlike_on_device(c, n, fill) == 0,
                         "emu_fresh_memory_writes_stay_in_their_allocation",
                         "an allocation beside the written one, made before or after it, lost the fill");
    cudaFree(b);
    unsigned char *again;
    cudaMalloc((void **)&again, n);
    failed |= tap_result(unlike_on_device(again, n, fill) == 0, "emu_memory_allocated_again_holds_the_fill",
                         "an allocation after a free read the freed memory's bytes");
    cudaFree(again);
    cudaFree(a);
    cudaFree(c);
    return failed;
}

int main(void) {
    const unsigned char fill = expected_fill();
    int failed = check_fresh(fill);
    failed |= check_private(fill);
    return failed;
}

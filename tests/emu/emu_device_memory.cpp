/* The emulated device's fresh memory (emu_runtime.cpp's cudaMalloc and
 * cudaFree). A GPU's fresh memory holds garbage; the emulation's holds bytes
 * of EMU_MALLOC_FILL (default 255: NaN in float32 and bf16), so that a kernel
 * reading what nobody wrote computes NaN and fails its check.
 *
 * Filling each allocation with memset made that cost paid for every byte,
 * read or not: a tiny trainer run's buffers (the kernels' 64 MB scratch,
 * mostly never touched at test sizes) took 40% of its time in the memset and
 * its page faults. Here an allocation is a private mapping of one small
 * pattern file of the fill (4 MiB), repeated: a page reads as the fill until it is
 * written, and only a page written gets memory of its own. The same bytes a
 * kernel can see, at the cost of the pages it touches.
 *
 * Under AddressSanitizer (EMU_ASAN=1) an allocation is still exactly its
 * bytes from the heap, filled: whole pages would hide overruns up to the
 * next page, which compute-sanitizer would report. */
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "emu_internal.h"

namespace {

/* The pattern file's size: an allocation maps it once per this many bytes
 * (at 4 MiB, 64 GiB of allocations are 16384 of the 65530 mappings a process
 * may hold by default). */
const size_t PATTERN_BYTES = (size_t)4 << 20;

int fill_byte() {
    static const int fill = getenv("EMU_MALLOC_FILL") ? atoi(getenv("EMU_MALLOC_FILL")) : 0xff;
    return fill;
}

#if !defined(__SANITIZE_ADDRESS__)
/* PATTERN_BYTES of the fill in memory that is no file's (made on first use),
 * or -1 where the system refused it (then allocations are filled by memset). */
int pattern_fd() {
    static const int fd = [] {
        int f = memfd_create("emu_device_fill", MFD_CLOEXEC);
        if (f < 0) return -1;
        static unsigned char chunk[64 << 10];
        memset(chunk, fill_byte(), sizeof chunk);
        for (size_t off = 0; off < PATTERN_BYTES; off += sizeof chunk)
            if (pwrite(f, chunk, sizeof chunk, (off_t)off) != (ssize_t)sizeof chunk) {
                close(f);
                return -1;
            }
        return f;
    }();
    return fd;
}

/* The bytes mapped for an allocation of `bytes`: whole pages. */
size_t mapped_bytes(size_t bytes) {
    static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (std::max<size_t>(bytes, 1) + page - 1) / page * page;
}

/* Maps the pattern over [m, m + n) in place of what is reserved there. */
bool map_pattern(char *m, size_t n, int fd) {
    for (size_t off = 0; off < n; off += PATTERN_BYTES) {
        size_t len = std::min(PATTERN_BYTES, n - off);
        if (mmap(m + off, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED) return false;
    }
    return true;
}
#endif

} // namespace

void *emu_fresh_alloc(size_t bytes) {
#if !defined(__SANITIZE_ADDRESS__)
    int fd = pattern_fd();
    if (fd >= 0) {
        size_t n = mapped_bytes(bytes);
        /* one reservation first, so that the pattern's mappings lie side by side */
        void *m = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return NULL;
        if (!map_pattern((char *)m, n, fd)) {
            munmap(m, n);
            return NULL;
        }
        return m;
    }
#endif
    void *m = NULL;
    size_t n = bytes ? bytes : 1; /* exactly `bytes`: AddressSanitizer sees overruns */
    if (posix_memalign(&m, 256, n) != 0) return NULL;
    memset(m, fill_byte(), n);
    return m;
}

void emu_fresh_free(void *p, size_t bytes) {
#if !defined(__SANITIZE_ADDRESS__)
    if (pattern_fd() >= 0) {
        munmap(p, mapped_bytes(bytes));
        return;
    }
#endif
    (void)bytes;
    free(p);
}

/* The emulation's own host heap. Emulated work copies device buffers into
 * temporaries that live for one call (cuBLASLt's operands, each rank's part of
 * an NCCL collective), often megabytes, freed at once. glibc serves blocks that
 * large from mappings of their own and unmaps them on free, so every call paid
 * page faults for memory it had just given back. Kept, against the same build
 * with mallopt made a no-op (2026-12-02, 2 cores, one run each): the full
 * kernel checks 101 s -> 81 s; test_nccl at 2 ranks 8.7 s -> 5.5 s, its system
 * time 5.9 s -> 2.4 s; the quick kernel checks and the race check's unchanged.
 * Blocks up to 32 MiB (glibc's most) now come from the heap, which keeps up to
 * 1 GiB it was given back. Under AddressSanitizer its allocator decides. */
#if !defined(__SANITIZE_ADDRESS__)
namespace {
struct heap_kept {
    heap_kept() {
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
        mallopt(M_TRIM_THRESHOLD, 1 << 30);
        mallopt(M_TOP_PAD, 64 << 20);
    }
} g_heap_kept;
} // namespace
#endif

/* The CPU emulation of the CUDA runtime, cuBLAS, cuBLASLt and the kernel
 * launcher (tests/emu). Single host thread: every call is synchronous.
 *
 * Launcher: blocks run one at a time in a fixed order (x fastest; reversed
 * with EMU_REVERSE=1); the threads of a block are cooperative fibers
 * scheduled round-robin. __syncthreads is a barrier over the block's live
 * threads; a warp shuffle publishes each lane's value in a double-buffered
 * slot, waits at a warp barrier and reads its partner's slot. A round in
 * which no fiber moves is a deadlock (reported, the program aborts).
 *
 * Everything the emulator finds wrong (bad launch configuration, copies or
 * products outside an allocation, a shuffle with an exited lane, divergent
 * __syncthreads, a cuBLAS(Lt) argument the library would reject) is printed
 * as "emu: ERROR ..." on stderr and counted; the count is printed at exit
 * and makes the exit status 3 when the program would otherwise exit 0. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cuda_emu.h"
#include "emu_hooks.h"
#include "emu_internal.h"

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

/* ------------------------------------------------------------ reporting */

static long g_errors = 0;
static int g_verbose = -1;

void emu_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "emu: ERROR ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    g_errors++;
}

extern "C" long emu_errors(void) { return g_errors; }
extern "C" void emu_errors_forgive(long to) {
    if (to >= 0 && to <= g_errors) g_errors = to;
}

static bool verbose() {
    if (g_verbose < 0) g_verbose = getenv("EMU_VERBOSE") && atoi(getenv("EMU_VERBOSE")) > 0;
    return g_verbose > 0;
}

/* At exit: the count of errors, and exit status 3 if there were any (the
 * test's own failures, exit 1, are then in its output). */
static void at_exit_report() {
    if (!g_errors) return;
    fflush(NULL);
    fprintf(stderr, "emu: %ld error(s) found by the emulator (see 'emu: ERROR' lines); exit status 3\n", g_errors);
    _exit(3);
}
struct exit_hook {
    exit_hook() { atexit(at_exit_report); }
} g_exit_hook;

/* ------------------------------------------------------------ memory map */

static std::map<uintptr_t, size_t> g_device, g_pinned; /* base -> bytes */
static size_t g_device_bytes = 0;
static unsigned long g_device_generation = 0; /* changes with every cudaMalloc and cudaFree (emu_race_space's cache) */
static const size_t TOTAL_MEM = (size_t)80 << 30;
static const size_t CONTEXT_BYTES = (size_t)512 << 20; /* "in use" before any cudaMalloc */

/* The allocation of `m` containing p, or m.end(). */
static std::map<uintptr_t, size_t>::iterator find_alloc(std::map<uintptr_t, size_t> &m, const void *p) {
    uintptr_t a = (uintptr_t)p;
    auto it = m.upper_bound(a);
    if (it == m.begin()) return m.end();
    --it;
    return a < it->first + std::max<size_t>(it->second, 1) ? it : m.end();
}

static bool is_device(const void *p) { return find_alloc(g_device, p) != g_device.end(); }
bool emu_is_device(const void *p) { return is_device(p); }
bool emu_is_pinned(const void *p) { return find_alloc(g_pinned, p) != g_pinned.end(); }

/* Asynchronous copies from pinned host memory to the device are deferred
 * (as a GPU running behind the host would read the pinned buffer later):
 * each waits in order until the host enqueues other device work or
 * synchronizes, so a host that refills a pinned buffer before its copy has
 * run gets its new bytes copied, as on the device, and a test sees it. */
struct pending_copy {
    void *dst;
    const void *src;
    size_t bytes;
};
static std::vector<pending_copy> g_pending;

static void flush_pending_copies() {
    for (const pending_copy &c : g_pending) memmove(c.dst, c.src, c.bytes);
    g_pending.clear();
}
void emu_flush_pending_copies() { flush_pending_copies(); }

/* p..p+bytes lies in one device allocation (else an error naming `what`). */
static int device_range_ok(const void *p, size_t bytes, const char *what) {
    if (bytes == 0) return 1;
    auto it = find_alloc(g_device, p);
    if (it == g_device.end()) {
        emu_error("%s: %p (%zu bytes) is not in any device allocation", what, p, bytes);
        return 0;
    }
    uintptr_t end = (uintptr_t)p + bytes, aend = it->first + it->second;
    if (end > aend) {
        emu_error("%s: [%p, +%zu) runs %zu bytes past the end of its allocation [%p, +%zu)", what, p, bytes,
                  (size_t)(end - aend), (void *)it->first, it->second);
        return 0;
    }
    return 1;
}

/* The same for a use of device memory by the device (a kernel, a copy, a
 * library call), which runs after every copy queued before it. */
extern "C" int emu_check_device_range(const void *p, size_t bytes, const char *what) {
    flush_pending_copies();
    return device_range_ok(p, bytes, what);
}

/* Host-side range: a pinned allocation's end if p is in one, else trusted. */
static int check_host_range(const void *p, size_t bytes, const char *what) {
    auto it = find_alloc(g_pinned, p);
    if (it != g_pinned.end() && (uintptr_t)p + bytes > it->first + it->second) {
        emu_error("%s: [%p, +%zu) runs past the end of its pinned host allocation", what, p, bytes);
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------ runtime */

static cudaError_t g_last = cudaSuccess;
static cudaError_t fail(cudaError_t e) {
    g_last = e;
    return e;
}
cudaError_t emu_fail(cudaError_t e) { return fail(e); }

double emu_now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A call a GPU refuses during a stream capture fails with this (the error
 * is reported by emu_capture_refuses). */
#define REFUSED_IN_CAPTURE(call)                                                    \
    do {                                                                            \
        if (emu_capture_refuses(call)) return fail(cudaErrorStreamCaptureUnsupported); \
    } while (0)

extern "C" {

/* EMU_DEVICES=N (default 1, at most 64): the devices this process may
 * choose from. They are one emulated device under N numbers: a process uses
 * one, as the trainer does; the number tells ranks apart (two ranks of an
 * emulated NCCL communicator on one number are refused, as on a GPU). */
static int device_count() {
    static const int n = [] {
        const char *v = getenv("EMU_DEVICES");
        const int k = v ? atoi(v) : 1;
        return k >= 1 && k <= 64 ? k : 1;
    }();
    return n;
}
static int g_current_device = 0; /* cudaSetDevice's: test infrastructure, one host thread */

cudaError_t cudaGetDeviceCount(int *count) {
    *count = device_count();
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
    g_current_device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
    *device = g_current_device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "EMULATED (tests/emu, CPU)");
    prop->totalGlobalMem = TOTAL_MEM;
    prop->sharedMemPerBlock = 48 << 10;
    prop->sharedMemPerBlockOptin = 227 << 10;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = 1024, prop->maxThreadsDim[1] = 1024, prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 0x7fffffff, prop->maxGridSize[1] = 65535, prop->maxGridSize[2] = 65535;
    prop->major = 9, prop->minor = 0;
    prop->multiProcessorCount = 132;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    REFUSED_IN_CAPTURE("cudaDeviceSynchronize");
    emu_lazy_sync_device();
    flush_pending_copies();
    return cudaSuccess;
}
cudaError_t cudaDeviceReset(void) { return cudaSuccess; }

cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = NULL;
    REFUSED_IN_CAPTURE("cudaMalloc");
    if (g_device_bytes + bytes + CONTEXT_BYTES > TOTAL_MEM) return fail(cudaErrorMemoryAllocation);
    /* fresh device memory is garbage: here EMU_MALLOC_FILL's bytes (0xff: NaN in float32 and bf16) */
    void *m = emu_fresh_alloc(bytes);
    if (!m) return fail(cudaErrorMemoryAllocation);
    g_device[(uintptr_t)m] = bytes;
    g_device_bytes += bytes;
    g_device_generation++;
    *p = m;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    REFUSED_IN_CAPTURE("cudaFree");
    emu_lazy_sync_device(); /* cudaFree waits for the device */
    flush_pending_copies();
    if (!p) return cudaSuccess;
    auto it = g_device.find((uintptr_t)p);
    if (it == g_device.end()) {
        emu_error("cudaFree(%p): not the start of a device allocation", p);
        return fail(cudaErrorInvalidValue);
    }
    const size_t bytes = it->second;
    emu_race_free(p, bytes);
    g_device_bytes -= bytes;
    g_device.erase(it);
    g_device_generation++;
    emu_fresh_free(p, bytes);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) {
    REFUSED_IN_CAPTURE("cudaMallocHost");
    void *m = NULL;
    if (posix_memalign(&m, 256, std::max<size_t>(bytes, 1)) != 0) return fail(cudaErrorMemoryAllocation);
    g_pinned[(uintptr_t)m] = bytes;
    *p = m;
    return cudaSuccess;
}
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags) {
    (void)flags;
    return cudaMallocHost(p, bytes);
}
cudaError_t cudaFreeHost(void *p) {
    REFUSED_IN_CAPTURE("cudaFreeHost");
    emu_lazy_sync_device();
    flush_pending_copies();
    if (!p) return cudaSuccess;
    auto it = g_pinned.find((uintptr_t)p);
    if (it == g_pinned.end()) {
        emu_error("cudaFreeHost(%p): not a pinned allocation", p);
        return fail(cudaErrorInvalidValue);
    }
    g_pinned.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    *total_bytes = TOTAL_MEM;
    *free_bytes = TOTAL_MEM - CONTEXT_BYTES - g_device_bytes;
    return cudaSuccess;
}

/* Checks a copy's kind and ranges, then copies when `run` (a copy to be
 * captured is only checked). */
static cudaError_t copy_checked(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, bool run) {
    if (bytes == 0) return cudaSuccess;
    const bool dd = is_device(dst), sd = is_device(src);
    static const char *names[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice", "Default"};
    bool ok = true;
    switch (kind) {
    case cudaMemcpyHostToDevice: ok = dd && !sd; break;
    case cudaMemcpyDeviceToHost: ok = !dd && sd; break;
    case cudaMemcpyDeviceToDevice: ok = dd && sd; break;
    case cudaMemcpyHostToHost: ok = !dd && !sd; break;
    case cudaMemcpyDefault: break;
    default: ok = false;
    }
    if (!ok) {
        emu_error("cudaMemcpy%s(dst %p [%s], src %p [%s], %zu bytes): the pointers do not match the kind",
                  (unsigned)kind < 5 ? names[kind] : "?", dst, dd ? "device" : "host", src, sd ? "device" : "host", bytes);
        return fail(cudaErrorInvalidValue);
    }
    if ((dd && !emu_check_device_range(dst, bytes, "cudaMemcpy dst")) ||
        (sd && !emu_check_device_range(src, bytes, "cudaMemcpy src")) ||
        (!dd && !check_host_range(dst, bytes, "cudaMemcpy dst")) || (!sd && !check_host_range(src, bytes, "cudaMemcpy src")))
        return fail(cudaErrorInvalidValue);
    if ((const char *)dst < (const char *)src + bytes && (const char *)src < (const char *)dst + bytes && dst != src)
        emu_error("cudaMemcpy: overlapping ranges dst %p src %p, %zu bytes", dst, src, bytes);
    if (run) memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    REFUSED_IN_CAPTURE("cudaMemcpy (synchronous)");
    emu_lazy_sync_legacy();
    return copy_checked(dst, src, bytes, kind, true);
}
/* A captured copy: checked now, run by each launch of the graph. Pageable
 * host memory cannot take part (the copy would be synchronous). */
static cudaError_t capture_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    if ((!is_device(dst) && !emu_is_pinned(dst)) || (!is_device(src) && !emu_is_pinned(src))) {
        emu_capture_refuses("cudaMemcpyAsync with pageable host memory");
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    const cudaError_t err = copy_checked(dst, src, bytes, kind, false);
    if (err == cudaSuccess) emu::capture_node([dst, src, bytes] { memmove(dst, src, bytes); });
    return err;
}
/* Under EMU_LAZY=1: checked now, run in stream order. A copy to pageable
 * host memory returns when it is done (its stream ran first); one from
 * pageable memory reads it now, as CUDA stages it before returning. */
static cudaError_t lazy_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    const cudaError_t err = copy_checked(dst, src, bytes, kind, false);
    if (err != cudaSuccess || bytes == 0) return err;
    if (!is_device(dst) && !emu_is_pinned(dst)) {
        emu_lazy_sync_stream(stream);
        memmove(dst, src, bytes);
    } else if (!is_device(src) && !emu_is_pinned(src)) {
        auto staged = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + bytes);
        emu::lazy_take(stream, [dst, staged] { memcpy(dst, staged->data(), staged->size()); });
    } else {
        emu::lazy_take(stream, [dst, src, bytes] { memmove(dst, src, bytes); });
    }
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    if (emu::capturing(stream)) return capture_copy(dst, src, bytes, kind);
    if (emu_lazy_active()) return lazy_copy(dst, src, bytes, kind, stream);
    const bool deferred = bytes > 0 && is_device(dst) && find_alloc(g_pinned, src) != g_pinned.end() &&
                          (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDefault);
    if (!deferred) return copy_checked(dst, src, bytes, kind, true);
    if (!device_range_ok(dst, bytes, "cudaMemcpyAsync dst") || !check_host_range(src, bytes, "cudaMemcpyAsync src"))
        return fail(cudaErrorInvalidValue);
    g_pending.push_back(pending_copy{dst, src, bytes});
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int value, size_t bytes) {
    REFUSED_IN_CAPTURE("cudaMemset (synchronous)");
    emu_lazy_sync_legacy();
    if (bytes == 0) return cudaSuccess;
    if (!emu_check_device_range(p, bytes, "cudaMemset")) return fail(cudaErrorInvalidValue);
    memset(p, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return cudaSuccess;
    if (!emu_check_device_range(p, bytes, "cudaMemsetAsync")) return fail(cudaErrorInvalidValue);
    std::function<void()> set = [p, value, bytes] { memset(p, value, bytes); };
    if (emu::capturing(stream)) emu::capture_node(std::move(set));
    else if (!emu::lazy_take(stream, set)) set();
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *p) {
    memset(attr, 0, sizeof *attr);
    if (is_device(p)) {
        attr->type = cudaMemoryTypeDevice;
        attr->device = g_current_device; /* a process uses one device number (EMU_DEVICES) */
        attr->devicePointer = (void *)p;
    } else if (find_alloc(g_pinned, p) != g_pinned.end()) {
        attr->type = cudaMemoryTypeHost;
        attr->device = g_current_device;
        attr->devicePointer = attr->hostPointer = (void *)p;
    } else {
        attr->type = cudaMemoryTypeUnregistered;
        attr->device = -2;
    }
    return cudaSuccess;
}

struct emu_stream {
    unsigned long long serial; /* streams in order of creation: a new stream may reuse a destroyed one's address */
};
static unsigned long long g_streams_created;
struct emu_event {
    int recorded;
    double t_ms;       /* host clock at the record: the emulator runs synchronously */
    int record_called; /* cudaEventRecord was called on it (also when captured, before the graph ran) */
    int timing;        /* made without cudaEventDisableTiming: cudaEventElapsedTime may read it */
};
/* Time the emulated cuBLASLt algorithms cost on top of the host's
 * (emu_lt_algo_cost_ms), so that events can tell them apart. */
static double g_lt_virtual_ms = 0.0;
static double now_ms() { return emu_now_s() * 1e3 + g_lt_virtual_ms; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    *s = new emu_stream{++g_streams_created};
    emu_lazy_stream_created(*s, (flags & cudaStreamNonBlocking) != 0);
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    emu_lazy_stream_destroyed(s);
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    REFUSED_IN_CAPTURE("cudaStreamSynchronize");
    emu_lazy_sync_stream(s);
    flush_pending_copies();
    return cudaSuccess;
}
/* A wait for an event never recorded waits for nothing: legal CUDA, but in
 * this code always a record that went missing (say a collective's `done`),
 * which the synchronous emulator could not otherwise show. */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    (void)flags;
    if (!e->record_called) emu_error("cudaStreamWaitEvent on an event never recorded: the stream would wait for nothing");
    if (!emu_capture_wait(s, e)) return cudaErrorStreamCaptureIsolation;
    if (emu_lazy_active() && !emu_capture_has(s)) emu_lazy_wait(s, e); /* a capturing stream's work is the graph's */
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = new emu_event{0, 0.0, 0, 1};
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    *e = new emu_event{0, 0.0, 0, (flags & cudaEventDisableTiming) ? 0 : 1};
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    emu_lazy_event_destroyed(e);
    emu_capture_event_recorded(e);
    delete e;
    return cudaSuccess;
}
/* What cudaEventRecord does when it runs. */
static void emu_event_mark(cudaEvent_t e) {
    e->recorded = 1;
    e->t_ms = now_ms();
}
/* Without the emulated NCCL (emu_nccl.cpp defines the real one) nothing
 * of NCCL's is pending. */
extern "C++" __attribute__((weak)) bool emu_nccl_event_too_early(cudaStream_t s, const char **why) {
    (void)s, (void)why;
    return false;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    const char *why = "";
    if (emu_nccl_event_too_early(s, &why))
        emu_error("cudaEventRecord on stream %p %s: the event would complete before the collectives ran", (void *)s, why);
    e->record_called = 1;
    if (emu::capturing(s)) {
        emu::capture_record(e, s, [e] { emu_event_mark(e); });
        return cudaSuccess;
    }
    emu_capture_event_recorded(e);
    if (emu_lazy_active())
        emu_lazy_record(e, s, [e] { emu_event_mark(e); });
    else
        emu_event_mark(e);
    return cudaSuccess;
}
/* cudaEventRecordExternal inside a capture makes the record a node of the
 * graph, which marks the event at every launch, so the host may read it
 * after one (a plain record there only orders streams inside the capture).
 * Outside a capture the flag changes nothing. */
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned flags) {
    if (flags & ~(unsigned)cudaEventRecordExternal) {
        emu_error("cudaEventRecordWithFlags: unknown flags %#x", flags);
        return fail(cudaErrorInvalidValue);
    }
    const cudaError_t r = cudaEventRecord(e, s);
    if (r == cudaSuccess && (flags & cudaEventRecordExternal) && emu::capturing(s)) emu_capture_event_recorded(e);
    return r;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    REFUSED_IN_CAPTURE("cudaEventSynchronize");
    if (emu_capture_event_unusable(e, "cudaEventSynchronize")) return fail(cudaErrorInvalidValue);
    emu_lazy_event_wait(e, "cudaEventSynchronize");
    flush_pending_copies(); /* one stream: everything before any event is done */
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    REFUSED_IN_CAPTURE("cudaEventQuery");
    if (emu_capture_event_unusable(e, "cudaEventQuery")) return fail(cudaErrorInvalidValue);
    if (emu_lazy_event_pending(e)) return cudaErrorNotReady; /* it ran now; the next query sees it done */
    flush_pending_copies();
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop) {
    REFUSED_IN_CAPTURE("cudaEventElapsedTime");
    if (!start->timing || !stop->timing) { /* what a GPU answers for such an event */
        emu_error("cudaEventElapsedTime on an event made with cudaEventDisableTiming");
        return fail(cudaErrorInvalidResourceHandle);
    }
    if (emu_capture_event_unusable(start, "cudaEventElapsedTime") || emu_capture_event_unusable(stop, "cudaEventElapsedTime"))
        return fail(cudaErrorInvalidValue);
    if (emu_lazy_event_queued(start) || emu_lazy_event_queued(stop)) return fail(cudaErrorNotReady);
    if (!start->recorded || !stop->recorded) {
        emu_error("cudaEventElapsedTime on an event never recorded");
        return fail(cudaErrorInvalidValue);
    }
    *ms = (float)(stop->t_ms - start->t_ms); /* the emulator's own (CPU) time */
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) {
    cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return g_last; }
const char *cudaGetErrorName(cudaError_t err) {
    switch (err) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    default: return "cudaErrorUnknown";
    }
}
const char *cudaGetErrorString(cudaError_t err) { return cudaGetErrorName(err); }
/* Each kernel's opt-in to dynamic shared memory beyond the default 48 KiB
 * (cudaFuncAttributeMaxDynamicSharedMemorySize), checked at its launches. */
static std::map<const void *, int> g_shared_optin;
static const int SHARED_DEFAULT = 48 << 10, SHARED_OPTIN_MAX = 227 << 10; /* the emulated device's (sm_90) */

cudaError_t cudaFuncSetAttribute(const void *func, int attr, int value) {
    if (!func) return fail(cudaErrorInvalidValue);
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess; /* carveout and the like: hints */
    if (value < 0 || value > SHARED_OPTIN_MAX) return fail(cudaErrorInvalidValue);
    g_shared_optin[func] = value;
    return cudaSuccess;
}

} // extern "C"

/* ------------------------------------------------------------ fibers */

/* x86-64 System V context switch: saves the callee-saved registers, MXCSR
 * and the x87 control word on the current stack, stores the stack pointer
 * in *from, and resumes the context whose stack pointer is `to`. */
extern "C" void emu_switch(void **from, void *to);
__asm__(".text\n"
        ".globl emu_switch\n"
        ".type emu_switch,@function\n"
        "emu_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size emu_switch, .-emu_switch\n");

namespace {

const size_t STACK_BYTES = (size_t)64 << 10, GUARD_BYTES = 4096;
const int MAX_THREADS = 1024;

enum wait_kind { RUNNING, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE };

/* One cp.async not yet performed (bytes to dst, the first src_bytes of
 * them from src, zeros after): group is the number of groups its thread
 * had committed when it was issued (== committed: still open). */
struct async_copy {
    void *dst;
    const void *src;
    unsigned bytes, src_bytes;
    unsigned group;
};

struct fiber {
    void *sp;
    char *stack_lo; /* usable stack [stack_lo, stack_lo + STACK_BYTES) */
    int tid, warp, lane;
    uint3 idx;
    unsigned shfl_count; /* shuffles done: picks the slot buffer */
    wait_kind state;
    std::vector<async_copy> copies; /* in issue order */
    unsigned committed;             /* cp.async groups committed */
    uint32_t bars, warp_syncs;      /* __syncthreads and warp-level syncs passed (emu_race_position) */
    unsigned wg_count;              /* warpgroup_gather calls: picks the buffer */
};

struct barrier {
    int arrived;
    unsigned gen;
    const char *file;
    int line;
};

struct warp_state {
    int lanes, live;   /* lanes that exist, lanes not exited */
    barrier bar;
    uint64_t slots[2][32];
    uint32_t words[2][32][EMU_GATHER_WORDS]; /* warp_gather's, double-buffered like the slots */
};

/* Warps 4g..4g+3 (wgmma's warpgroup g): warpgroup_gather's barrier and words. */
struct warpgroup_state {
    barrier bar;
    uint32_t words[2][128][EMU_GATHER_WORDS];
};

struct block_state {
    int nthreads, live;
    barrier bar;
    warp_state warps[MAX_THREADS / 32];
    warpgroup_state warpgroups[MAX_THREADS / 128];
    void (*body)(void *);
    void *ctx;
    const char *kernel;
    bool shfl_exit_reported, partial_warp_reported, mask_reported, copies_exit_reported, wg_reported;
};

fiber g_fibers[MAX_THREADS];
char *g_stacks = NULL;
unsigned char *g_dynamic_shared = NULL; /* the launch's dynamic shared memory */
size_t g_dynamic_bytes = 0;
void *g_sched_sp = NULL;
fiber *g_cur = NULL;
block_state g_block;
unsigned long long g_progress = 0;
uint32_t g_block_serial = 0, g_launch_first = 0; /* emu_race_position */

/* EMU_REVERSE=1: blocks and threads run in reverse order. */
bool reverse_order() {
    static const bool reverse = getenv("EMU_REVERSE") && atoi(getenv("EMU_REVERSE")) > 0;
    return reverse;
}

extern "C" char __start_emu_shared[] __attribute__((weak));
extern "C" char __stop_emu_shared[] __attribute__((weak));

void fiber_main() {
    g_block.body(g_block.ctx);
    /* the thread returned: it leaves every barrier count */
    fiber *f = g_cur;
    if (!f->copies.empty() && !g_block.copies_exit_reported) { /* they would land after nobody can wait for them */
        emu_error("%s: block (%u,%u,%u) thread %d exited with %zu cp.async copies not waited for (cp.async.wait_group)",
                  g_block.kernel, blockIdx.x, blockIdx.y, blockIdx.z, f->tid, f->copies.size());
        g_block.copies_exit_reported = true;
    }
    f->copies.clear();
    emu_tma_thread_exit(f->tid); /* bulk stores still reading shared memory (emu_tma.cpp) */
    f->state = DONE;
    g_progress++;
    block_state &b = g_block;
    b.live--;
    warp_state &w = b.warps[f->warp];
    w.live--;
    if (b.bar.arrived > 0 && b.bar.arrived == b.live) {
        b.bar.arrived = 0;
        b.bar.gen++;
    }
    if (w.bar.arrived > 0 && w.bar.arrived == w.live) {
        if (!b.shfl_exit_reported) {
            emu_error("%s: block (%u,%u,%u) thread %d exited while its warp's lanes wait in a shuffle/__syncwarp", b.kernel,
                      blockIdx.x, blockIdx.y, blockIdx.z, f->tid);
            b.shfl_exit_reported = true;
        }
        w.bar.arrived = 0;
        w.bar.gen++;
    }
    barrier &wg = b.warpgroups[f->warp / 4].bar;
    if (wg.arrived > 0) { /* the others would wait for it forever */
        if (!b.wg_reported)
            emu_error("%s: block (%u,%u,%u) thread %d exited while its warpgroup waits in a wgmma instruction", b.kernel,
                      blockIdx.x, blockIdx.y, blockIdx.z, f->tid);
        b.wg_reported = true;
        wg.arrived = 0;
        wg.gen++;
    }
    void *dummy;
    emu_switch(&dummy, g_sched_sp);
    abort(); /* never resumed */
}

void init_stacks() {
    if (g_stacks) return;
    size_t per = STACK_BYTES + GUARD_BYTES;
    g_stacks = (char *)mmap(NULL, per * MAX_THREADS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (g_stacks == MAP_FAILED) {
        perror("emu: mmap fiber stacks");
        abort();
    }
    for (int t = 0; t < MAX_THREADS; t++) {
        mprotect(g_stacks + t * per, GUARD_BYTES, PROT_NONE); /* overflow faults */
        g_fibers[t].stack_lo = g_stacks + t * per + GUARD_BYTES;
    }
}

/* A fresh context for fiber f that starts in fiber_main. */
void prime(fiber *f) {
    uint32_t csr[2];
    __asm__ volatile("stmxcsr %0" : "=m"(csr[0]));
    __asm__ volatile("fnstcw %0" : "=m"(csr[1]));
#if defined(__SANITIZE_ADDRESS__)
    __asan_unpoison_memory_region(f->stack_lo, STACK_BYTES); /* stale redzones of the fiber's last run */
#endif
    uintptr_t top = ((uintptr_t)f->stack_lo + STACK_BYTES) & ~(uintptr_t)15;
    uint64_t *a = (uint64_t *)(top - 16); /* return slot, 16-aligned: rsp % 16 == 8 at entry */
    a[0] = (uint64_t)(uintptr_t)&fiber_main;
    for (int i = 1; i <= 6; i++) a[-i] = 0; /* rbp rbx r12 r13 r14 r15 */
    uint64_t *c = a - 7;
    memcpy(c, csr, 8);
    f->sp = c;
}

void yield() { emu_switch(&g_cur->sp, g_sched_sp); }

/* The race check's join of warp w's live lanes (a warp-level sync completed). */
void race_join_warp(int w) {
    static const bool checking = emu_race_linked(); /* a warp sync costs nothing more without the check */
    if (!checking) return;
    int tids[32], n = 0;
    for (int t = w * 32; t < w * 32 + g_block.warps[w].lanes; t++)
        if (g_fibers[t].state != DONE) tids[n++] = t;
    emu_race_join(tids, n);
}
void race_join_my_warp() { race_join_warp(g_cur->warp); }
void race_join_my_warpgroup() { /* wgmma's sync is each warp's, not the warpgroup's */
    for (int w = g_cur->warp / 4 * 4; w < g_cur->warp / 4 * 4 + 4; w++) race_join_warp(w);
}

/* on_complete: run by the last thread to arrive, before any leaves. */
void wait_barrier(barrier &bar, int expected, const char *file, int line, const char *what, void (*on_complete)() = NULL) {
    if (bar.arrived == 0) {
        bar.file = file;
        bar.line = line;
    } else if (file && bar.file && (bar.line != line || strcmp(bar.file, file) != 0)) {
        emu_error("%s: block (%u,%u,%u): thread %d reached %s at %s:%d while others wait at %s:%d (divergent barrier)",
                  g_block.kernel, blockIdx.x, blockIdx.y, blockIdx.z, g_cur->tid, what, file, line, bar.file, bar.line);
    }
    g_progress++;
    if (++bar.arrived == expected) {
        if (on_complete) on_complete();
        bar.arrived = 0;
        bar.gen++;
        return;
    }
    unsigned gen = bar.gen;
    while (bar.gen == gen) yield();
}

void run_block(const dim3 &b) {
    block_state &B = g_block;
    g_block_serial++;
    B.nthreads = (int)(b.x * b.y * b.z);
    B.live = B.nthreads;
    B.bar = barrier{0, 0, NULL, 0};
    int nwarps = (B.nthreads + 31) / 32;
    for (int w = 0; w < nwarps; w++) {
        warp_state &ws = B.warps[w];
        ws.lanes = std::min(32, B.nthreads - w * 32);
        ws.live = ws.lanes;
        ws.bar = barrier{0, 0, NULL, 0};
    }
    for (int g = 0; g < (nwarps + 3) / 4; g++) B.warpgroups[g].bar = barrier{0, 0, NULL, 0};
    for (int t = 0; t < B.nthreads; t++) {
        fiber &f = g_fibers[t];
        f.tid = t;
        f.warp = t / 32;
        f.lane = t % 32;
        f.idx = uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
        f.shfl_count = 0;
        f.state = RUNNING;
        f.copies.clear();
        f.committed = 0;
        f.bars = f.warp_syncs = 0;
        f.wg_count = 0;
        prime(&f);
    }
    const bool reverse = reverse_order();
    while (B.live > 0) {
        unsigned long long before = g_progress;
        for (int i = 0; i < B.nthreads; i++) {
            int t = reverse ? B.nthreads - 1 - i : i;
            fiber &f = g_fibers[t];
            if (f.state == DONE) continue;
            g_cur = &f;
            threadIdx = f.idx;
            emu_switch(&g_sched_sp, f.sp);
        }
        g_cur = NULL;
        if (B.live > 0 && g_progress == before) {
            emu_error("%s: block (%u,%u,%u): deadlock: %d of %d threads wait forever (block barrier %d arrived from %s:%d)%s",
                      B.kernel, blockIdx.x, blockIdx.y, blockIdx.z, B.live, B.nthreads, B.bar.arrived,
                      B.bar.file ? B.bar.file : "-", B.bar.line, emu_tma_waits().c_str());
            abort();
        }
    }
    emu_tma_block_end(); /* bulk copies never waited for (emu_tma.cpp) */
}

/* Why a launch of `kernel` with `shmem` bytes of dynamic shared memory
 * fails on the device, or NULL. */
const char *shared_refusal(const void *kernel, size_t shmem) {
    if (shmem <= (size_t)SHARED_DEFAULT) return NULL;
    if (shmem > (size_t)SHARED_OPTIN_MAX) return "dynamic shared memory over the device's 227 KiB";
    if (!kernel) return "dynamic shared memory over 48 KiB for a kernel launched without template arguments (the emulator "
                        "cannot name it to check its cudaFuncSetAttribute opt-in)";
    auto it = g_shared_optin.find(kernel);
    if (it == g_shared_optin.end() || (size_t)it->second < shmem)
        return "dynamic shared memory over 48 KiB beyond the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize";
    return NULL;
}

/* The launch's dynamic shared memory, exactly shmem bytes (AddressSanitizer
 * sees reads past it); refilled with 0xff before every block. */
void dynamic_shared_begin(size_t shmem) {
    g_dynamic_bytes = shmem;
    g_dynamic_shared = shmem ? (unsigned char *)malloc(shmem) : NULL;
    if (shmem && !g_dynamic_shared) {
        fprintf(stderr, "emu: out of host memory for %zu bytes of dynamic shared memory\n", shmem);
        abort();
    }
}
void dynamic_shared_end() {
    free(g_dynamic_shared);
    g_dynamic_shared = NULL;
    g_dynamic_bytes = 0;
}

/* The bytes of the static shared arrays (section emu_shared) as spans.
 * Under AddressSanitizer the section also holds the redzones between the
 * arrays: they stay poisoned, so the refill skips them. */
struct span {
    char *p;
    size_t n;
};
std::vector<span> static_shared_spans() {
    std::vector<span> spans;
    char *p = __start_emu_shared, *end = __stop_emu_shared;
    if (!p) return spans;
#if defined(__SANITIZE_ADDRESS__)
    while (p < end) {
        char *bad = (char *)__asan_region_is_poisoned(p, (size_t)(end - p));
        if (!bad) bad = end;
        if (bad > p) spans.push_back(span{p, (size_t)(bad - p)});
        p = bad;
        while (p < end && __asan_address_is_poisoned(p)) p++;
    }
#else
    spans.push_back(span{p, (size_t)(end - p)});
#endif
    return spans;
}

/* The block's shared memory regions, [lo, hi): the static arrays, and the
 * launch's dynamic bytes (lo NULL where there are none). */
struct region {
    const char *lo, *hi;
};
const int SHARED_REGIONS = 2;
void shared_regions(region out[SHARED_REGIONS]) {
    const char *dyn = (const char *)g_dynamic_shared;
    out[0] = region{__start_emu_shared, __stop_emu_shared};
    out[1] = region{dyn, dyn ? dyn + g_dynamic_bytes : NULL};
}

/* The start of the block's shared memory region that [p, p + bytes) lies
 * in, or NULL. */
const char *shared_region(const void *p, size_t bytes) {
    const char *a = (const char *)p;
    region r[SHARED_REGIONS];
    shared_regions(r);
    for (const region &x : r)
        if (x.lo && a >= x.lo && a + bytes <= x.hi) return x.lo;
    return NULL;
}

} // namespace

namespace emu {

int lane_id() { return g_cur->lane; }

bool thread_position(thread_pos *p) {
    if (!g_cur) return false;
    *p = thread_pos{g_cur->tid, g_block.nthreads, g_block_serial, g_block.kernel};
    return true;
}
void spin() { yield(); }
void progress() { g_progress++; }
const char *shared_base(const void *p, size_t bytes) { return shared_region(p, bytes); }
const char *shared_end(const char *base) {
    region r[SHARED_REGIONS];
    shared_regions(r);
    for (const region &x : r)
        if (base && base == x.lo) return x.hi;
    return NULL;
}

void syncthreads(const char *file, int line) {
    if (!g_cur) {
        emu_error("__syncthreads outside a kernel");
        return;
    }
    wait_barrier(g_block.bar, g_block.live, file, line, "__syncthreads");
    g_cur->bars++;
}

static warp_state &warp_checked(unsigned mask, const char *what) {
    warp_state &w = g_block.warps[g_cur->warp];
    unsigned full = w.lanes == 32 ? 0xffffffffu : ((1u << w.lanes) - 1);
    if (mask != 0xffffffffu && !g_block.mask_reported) {
        emu_error("%s: %s with mask %#x: only full-warp masks are emulated", g_block.kernel, what, mask);
        g_block.mask_reported = true;
    }
    if (w.lanes < 32 && (mask & ~full) && !g_block.partial_warp_reported) {
        emu_error("%s: %s with mask %#x in a warp of only %d lanes (blockDim not a multiple of 32)", g_block.kernel, what, mask,
                  w.lanes);
        g_block.partial_warp_reported = true;
    }
    if (w.live < w.lanes && !g_block.shfl_exit_reported) {
        emu_error("%s: block (%u,%u,%u) warp %d: %s while %d of its lanes have exited (undefined on the device)",
                  g_block.kernel, blockIdx.x, blockIdx.y, blockIdx.z, g_cur->warp, what, w.lanes - w.live);
        g_block.shfl_exit_reported = true;
    }
    return w;
}

void syncwarp(unsigned mask) {
    warp_state &w = warp_checked(mask, "__syncwarp");
    wait_barrier(w.bar, w.live, NULL, 0, "__syncwarp", race_join_my_warp);
    g_cur->warp_syncs++;
}

uint64_t shfl(unsigned mask, uint64_t bits, int src_lane) {
    warp_state &w = warp_checked(mask, "shuffle");
    fiber *f = g_cur;
    const int buf = f->shfl_count++ & 1;
    w.slots[buf][f->lane] = bits;
    wait_barrier(w.bar, w.live, NULL, 0, "shuffle", race_join_my_warp);
    f->warp_syncs++;
    if (src_lane < 0 || src_lane >= w.lanes) {
        emu_error("%s: shuffle from lane %d of a %d-lane warp", g_block.kernel, src_lane, w.lanes);
        return bits;
    }
    return w.slots[buf][src_lane];
}

/* The words stay in place until this lane's next exchange: the buffer is
 * written again two exchanges later, which no lane reaches before every
 * lane has arrived at the next one. */
const uint32_t *warp_gather_view(const uint32_t *words, int n) {
    warp_state &w = warp_checked(0xffffffffu, "warp_gather");
    fiber *f = g_cur;
    if (n < 0 || n > EMU_GATHER_WORDS) {
        emu_error("%s: warp_gather of %d words (at most %d)", g_block.kernel, n, EMU_GATHER_WORDS);
        n = 0;
    }
    const int buf = f->shfl_count++ & 1;
    memcpy(w.words[buf][f->lane], words, sizeof(uint32_t) * (size_t)n);
    wait_barrier(w.bar, w.live, NULL, 0, "warp_gather", race_join_my_warp);
    f->warp_syncs++;
    return &w.words[buf][0][0];
}

void warp_gather(const uint32_t *words, int n, uint32_t *all) {
    const uint32_t *view = warp_gather_view(words, n);
    if (n < 0 || n > EMU_GATHER_WORDS) return;
    for (int lane = 0; lane < g_block.warps[g_cur->warp].lanes; lane++)
        memcpy(all + (size_t)lane * n, view + (size_t)lane * EMU_GATHER_WORDS, sizeof(uint32_t) * (size_t)n);
}

bool warpgroup_gather(const uint32_t *words, int n, uint32_t *all) {
    fiber *f = g_cur;
    if (!f) {
        emu_error("a wgmma instruction outside a kernel");
        return false;
    }
    const int first = f->warp / 4 * 4;
    for (int w = first; w < first + 4; w++) {
        const bool whole = w * 32 < g_block.nthreads && g_block.warps[w].lanes == 32;
        if ((!whole || g_block.warps[w].live < 32) && !g_block.wg_reported) {
            emu_error("%s: block (%u,%u,%u) thread %d: a wgmma instruction in warpgroup %d, whose warp %d %s", g_block.kernel,
                      blockIdx.x, blockIdx.y, blockIdx.z, f->tid, first / 4, w,
                      whole ? "has exited lanes" : "is missing or partial (blockDim not a multiple of 128)");
            g_block.wg_reported = true;
        }
        if (!whole || g_block.warps[w].live < 32) return false;
    }
    if (n < 0 || n > EMU_GATHER_WORDS) {
        emu_error("%s: warpgroup_gather of %d words (at most %d)", g_block.kernel, n, EMU_GATHER_WORDS);
        return false;
    }
    warpgroup_state &g = g_block.warpgroups[first / 4];
    const int buf = f->wg_count++ & 1, me = f->tid - first * 32;
    memcpy(g.words[buf][me], words, sizeof(uint32_t) * (size_t)n);
    wait_barrier(g.bar, 128, NULL, 0, "wgmma", race_join_my_warpgroup);
    f->warp_syncs++;
    for (int t = 0; t < 128; t++) memcpy(all + (size_t)t * n, g.words[buf][t], sizeof(uint32_t) * (size_t)n);
    return true;
}

void ldmatrix(uint32_t *r, int count, bool trans, const void *row) {
    fiber *f = g_cur;
    if (!f) {
        emu_error("ldmatrix outside a kernel");
        return;
    }
    if (count != 1 && count != 2 && count != 4) {
        emu_error("%s: ldmatrix of %d matrices (x1, x2 or x4)", g_block.kernel, count);
        abort();
    }
    const bool gives = f->lane < 8 * count; /* this lane's address is used */
    if (gives && ((uintptr_t)row & 15)) {
        emu_error("%s: ldmatrix row address %p (lane %d) is not 16-byte aligned", g_block.kernel, row, f->lane);
        abort(); /* a misaligned address faults on the device */
    }
    if (gives && !shared_region(row, 16)) {
        emu_error("%s: ldmatrix row address %p (lane %d) is not in the block's shared memory", g_block.kernel, row, f->lane);
        abort();
    }
    if (gives) emu_race_access(row, 16, false, __builtin_return_address(0));
    const uintptr_t at = (uintptr_t)row;
    const uint32_t mine[2] = {(uint32_t)at, (uint32_t)((uint64_t)at >> 32)};
    uint32_t all[32][2];
    warp_gather(mine, 2, &all[0][0]);
    const int i = f->lane >> 2, j = f->lane & 3;
    for (int m = 0; m < count; m++) {
        uint16_t half[2];
        for (int h = 0; h < 2; h++) {
            const int src = 8 * m + (trans ? 2 * j + h : i), col = trans ? i : 2 * j + h; /* row src of matrix m, element col */
            const uintptr_t p = (uintptr_t)all[src][0] | ((uintptr_t)all[src][1] << 32);
            memcpy(&half[h], (const char *)p + 2 * col, 2);
        }
        r[m] = (uint32_t)half[0] | ((uint32_t)half[1] << 16);
    }
}

/* EMU_LAUNCH_LOG=FILE: each distinct (source file, line, kernel as the launch
 * names it, threads per block, dynamic shared bytes) that this process
 * launches is appended to FILE as a tab-separated line. scripts/kernel_resources.py sets these beside
 * ptxas's registers and shared memory, which the emulation cannot see. */
static void log_launch(const char *file, int at, const char *name, unsigned long long threads, size_t shmem) {
    static const char *path = getenv("EMU_LAUNCH_LOG");
    static std::set<std::string> seen;
    if (!path || !*path) return;
    char line[512];
    snprintf(line, sizeof line, "%s\t%d\t%s\t%llu\t%zu\n", file, at, name, threads, shmem);
    if (!seen.insert(line).second) return;
    FILE *f = fopen(path, "a");
    if (!f || fputs(line, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "emu: cannot append to EMU_LAUNCH_LOG %s\n", path);
        exit(2);
    }
}

/* Kernel launches so far, by the kernel's name as launched, template arguments left out. */
static std::map<std::string, long> &kernel_launches() {
    static std::map<std::string, long> launches;
    return launches;
}
void count_launch(const char *name) {
    const char *args = strchr(name, '<');
    kernel_launches()[args ? std::string(name, (size_t)(args - name)) : std::string(name)]++;
}
extern "C" long emu_kernel_launches(const char *kernel) {
    const auto it = kernel_launches().find(kernel);
    return it == kernel_launches().end() ? 0 : it->second;
}

void run_grid(const char *name, const void *kernel, const char *file, int line, const config &c, void (*body)(void *),
              void *ctx) {
    const dim3 &g = c.grid, &b = c.block;
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    const char *bad = NULL;
    if (g.x == 0 || g.y == 0 || g.z == 0) bad = "empty grid";
    else if (b.x == 0 || b.y == 0 || b.z == 0) bad = "empty block";
    else if (threads > 1024) bad = "more than 1024 threads per block";
    else if (b.x > 1024 || b.y > 1024 || b.z > 64) bad = "block dimension over its limit (1024, 1024, 64)";
    else if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) bad = "grid dimension over its limit (2^31-1, 65535, 65535)";
    else bad = shared_refusal(kernel, c.shmem);
    if (bad) {
        emu_error("%s:%d: launch of %s<<<(%u,%u,%u), (%u,%u,%u), %zu>>> rejected: %s", file, line, name, g.x, g.y, g.z, b.x,
                  b.y, b.z, c.shmem, bad);
        g_last = strstr(bad, "shared memory") ? cudaErrorLaunchOutOfResources : cudaErrorInvalidConfiguration;
        return;
    }
    if (g_cur) {
        emu_error("%s: launch from inside a kernel (dynamic parallelism) is not emulated", name);
        abort();
    }
    flush_pending_copies();
    log_launch(file, line, name, threads, c.shmem);
    if (verbose())
        fprintf(stderr, "emu: %s:%d %s<<<(%u,%u,%u), (%u,%u,%u)>>>\n", file, line, name, g.x, g.y, g.z, b.x, b.y, b.z);
    init_stacks();
    g_block.body = body;
    g_block.ctx = ctx;
    g_block.kernel = name;
    g_block.shfl_exit_reported = g_block.partial_warp_reported = g_block.mask_reported =
        g_block.copies_exit_reported = g_block.wg_reported = false;
    gridDim = g;
    blockDim = b;
    const bool reverse = reverse_order();
    g_launch_first = g_block_serial + 1;
    const unsigned long long nblocks = (unsigned long long)g.x * g.y * g.z;
    static const std::vector<span> shared = static_shared_spans();
    dynamic_shared_begin(c.shmem);
    for (unsigned long long i = 0; i < nblocks; i++) {
        unsigned long long k = reverse ? nblocks - 1 - i : i;
        blockIdx = uint3{(unsigned)(k % g.x), (unsigned)(k / g.x % g.y), (unsigned)(k / ((unsigned long long)g.x * g.y))};
        for (const span &sp : shared) memset(sp.p, 0xff, sp.n);
        if (c.shmem) memset(g_dynamic_shared, 0xff, c.shmem);
        run_block(b);
    }
    dynamic_shared_end();
}

void *dynamic_shared() {
    if (!g_cur) emu_error("dynamic shared memory used outside a kernel");
    return g_dynamic_shared;
}

/* The calling thread, or NULL (an error naming `what`) outside a kernel. */
static fiber *current(const char *what) {
    if (!g_cur) emu_error("%s outside a kernel", what);
    return g_cur;
}

void cp_async(void *dst, const void *src, unsigned bytes, unsigned src_bytes) {
    fiber *f = current("cp.async");
    if (!f) return;
    if ((bytes != 4 && bytes != 8 && bytes != 16) || src_bytes > bytes) {
        emu_error("%s: cp.async of %u bytes (%u from the source): the ISA allows 4, 8 or 16, src-size at most that",
                  g_block.kernel, bytes, src_bytes);
        abort();
    }
    if (((uintptr_t)dst | (uintptr_t)src) & (bytes - 1)) {
        emu_error("%s: cp.async of %u bytes misaligned (%p <- %p)", g_block.kernel, bytes, dst, src);
        abort(); /* a misaligned address faults on the device */
    }
    if (!shared_region(dst, bytes)) {
        emu_error("%s: cp.async destination %p is not in the block's shared memory", g_block.kernel, dst);
        abort();
    }
    if (src_bytes) { /* src-size 0 reads nothing: the source need not be valid memory */
        if (!emu_check_device_range(src, src_bytes, "cp.async source")) abort();
        emu_race_access(src, src_bytes, false, __builtin_return_address(0));
    }
    emu_race_access(dst, bytes, true, __builtin_return_address(0)); /* the copy may land any time from here to its wait */
    memset(dst, 0xff, bytes);                                        /* undefined until waited for: NaN */
    f->copies.push_back(async_copy{dst, src, bytes, src_bytes, f->committed});
}

void cp_async_commit() {
    fiber *f = current("cp.async.commit_group");
    if (f) f->committed++;
}

void cp_async_wait(int newest_pending) {
    fiber *f = current("cp.async.wait_group");
    if (!f) return;
    if (newest_pending < 0) {
        emu_error("%s: cp.async.wait_group %d", g_block.kernel, newest_pending);
        return;
    }
    /* groups below `done` complete; the open group is never waited for */
    const unsigned done = f->committed > (unsigned)newest_pending ? f->committed - (unsigned)newest_pending : 0;
    size_t kept = 0;
    for (const async_copy &c : f->copies) {
        if (c.group < done) {
            /* the source as it is now: read late, as the device may (and so checked for races here too) */
            if (c.src_bytes) emu_race_access(c.src, c.src_bytes, false, __builtin_return_address(0));
            memcpy(c.dst, c.src, c.src_bytes);
            memset((char *)c.dst + c.src_bytes, 0, c.bytes - c.src_bytes);
            emu_race_access(c.dst, c.bytes, true, __builtin_return_address(0));
        } else f->copies[kept++] = c;
    }
    f->copies.resize(kept);
}

} // namespace emu

/* ------------------------------------------------------------ race check support */

bool emu_race_position(emu_race_pos *pos) {
    if (!g_cur) return false;
    *pos = emu_race_pos{g_block_serial, g_launch_first, g_cur->bars, g_cur->warp_syncs, g_cur->tid, g_cur->warp, g_block.kernel};
    return true;
}

void emu_race_block_of(uint32_t serial, unsigned idx[3]) {
    const unsigned long long n = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
    unsigned long long k = serial - g_launch_first;
    if (reverse_order()) k = n - 1 - k;
    idx[0] = (unsigned)(k % gridDim.x);
    idx[1] = (unsigned)(k / gridDim.x % gridDim.y);
    idx[2] = (unsigned)(k / ((unsigned long long)gridDim.x * gridDim.y));
}

/* Called for every memory access of an instrumented kernel: the common
 * answers (a thread's stack, the program's globals) come first and cheap. */
emu_space emu_race_space(const void *p, const char **base) {
    const char *a = (const char *)p;
    if ((*base = shared_region(p, 1))) return EMU_SPACE_SHARED;
    const size_t stacks = (STACK_BYTES + GUARD_BYTES) * MAX_THREADS;
    if (g_stacks && a >= g_stacks && a < g_stacks + stacks) return EMU_SPACE_OTHER;
    static unsigned long gen = ~0ul;
    static uintptr_t lo = 0, hi = 0, hit_base = 0, hit_end = 0; /* device memory's bounds; the last allocation hit */
    if (gen != g_device_generation) {
        gen = g_device_generation;
        hit_base = hit_end = 0;
        lo = g_device.empty() ? 0 : g_device.begin()->first;
        hi = g_device.empty() ? 0 : g_device.rbegin()->first + g_device.rbegin()->second;
    }
    const uintptr_t u = (uintptr_t)p;
    if (u < lo || u >= hi) return EMU_SPACE_OTHER;
    if (u < hit_base || u >= hit_end) {
        auto it = find_alloc(g_device, p);
        if (it == g_device.end()) return EMU_SPACE_OTHER;
        hit_base = it->first;
        hit_end = it->first + std::max<size_t>(it->second, 1);
    }
    *base = (const char *)hit_base;
    return EMU_SPACE_DEVICE;
}

/* Without emu_race.cpp (every build but EMU_RACE=1), nothing to record. */
__attribute__((weak)) void emu_race_access(const void *, size_t, bool, const void *) {}
__attribute__((weak)) void emu_race_free(const void *, size_t) {}
__attribute__((weak)) bool emu_race_linked() { return false; }
__attribute__((weak)) void emu_race_join(const int *, int) {}
__attribute__((weak)) void emu_race_release(const void *, uint64_t) {}
__attribute__((weak)) void emu_race_acquire(const void *, uint64_t) {}
__attribute__((weak)) void emu_race_agent_release(const void *, uint64_t) {}
__attribute__((weak)) void emu_race_async_write(const void *, size_t, const void *, uint64_t, const void *) {}
__attribute__((weak)) void emu_race_async_read(const void *, size_t, const void *) {}
__attribute__((weak)) void emu_race_proxy_fence() {}

/* ------------------------------------------------------------ GEMM */

namespace {

size_t elem_bytes(cudaDataType t) { return t == CUDA_R_16BF || t == CUDA_R_16F ? 2 : t == CUDA_R_64F ? 8 : 4; }

float load(const void *p, cudaDataType t, size_t i) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    __nv_bfloat16 h = ((const __nv_bfloat16 *)p)[i];
    return __bfloat162float(h);
}
void store(void *p, cudaDataType t, size_t i, float v) {
    if (t == CUDA_R_32F) ((float *)p)[i] = v;
    else ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}

/* Elements a column-major [rows, cols] matrix with leading dimension ld spans. */
size_t span(long long rows, long long cols, long long ld) { return rows && cols ? (size_t)((cols - 1) * ld + rows) : 0; }

bool overlaps(const void *a, size_t an, const void *b, size_t bn) {
    return an && bn && (const char *)a < (const char *)b + bn && (const char *)b < (const char *)a + an;
}

/* The GELU's derivative, tanh approximation (what cuBLASLt's DGELU
 * epilogues apply: PyTorch decomposes its GELU epilogue as
 * gelu(approximate="tanh")). */
float dgelu(float x) {
    const float k = 0.7978845608028654f, c = 0.044715f;
    const float th = tanhf(k * (x + c * x * x * x));
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * k * (1.0f + 3.0f * c * x * x);
}

/* The GELU, tanh approximation, as cublasLt.h's note on the GELU
 * epilogues writes it: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
float gelu_tanh(float x) {
    const float k = 0.7978845608028654f, c = 0.044715f;
    return 0.5f * x * (1.0f + tanhf(k * (x + c * x * x * x)));
}

/* Which sums a bias-gradient epilogue writes (cublasLt.h). */
enum bgrad_kind {
    BGRAD_NONE,
    BGRAD_OF_D, /* DGELU_BGRAD: row i's sum of the stored values (m entries) */
    BGRAD_OF_A  /* BGRADA: row i of op(A) summed over k (m entries) */
};

/* What a cuBLASLt epilogue does to the product before it is stored. */
struct gemm_epilogue {
    const void *bias;     /* BIAS, GELU_AUX_BIAS: bias[i] added to row i, type bias_t */
    const void *aux;      /* DGELU: the value times dgelu(aux[i, j]); aux has D's type, ld aux_ld */
    void *gelu_in;        /* GELU_AUX_BIAS: the GELU's input stored here (D's type, ld aux_ld), gelu of it in D */
    long long aux_ld;
    void *bgrad;          /* BGRAD*: the sums of bgrad_of, type bias_t (overwritten) */
    bgrad_kind bgrad_of;
    cudaDataType bias_t;
};

/* The bias gradient of BGRADA: the sums of op(A)'s rows over k (rows:
 * [count][k]), in float, k in order. */
void operand_sums(const std::vector<float> &rows, int count, int k, void *out, cudaDataType t) {
    for (int i = 0; i < count; i++) {
        float s = 0.0f;
        for (int p = 0; p < k; p++) s += rows[(size_t)i * k + p];
        store(out, t, (size_t)i, s);
    }
}

/* Four floats, loaded unaligned (SSE's width: wider generic vectors live
 * in memory without AVX). */
typedef float floats4 __attribute__((vector_size(16), aligned(4)));

/* The dot products of rows ai[0..R) with column bj (each k long) into
 * acc[0..R): lane u of a row's 8 partial sums (lo: 0-3, hi: 4-7) takes the
 * products at p = u mod 8 in order of p, and the 8 are combined pairwise.
 * Rows go R at a time so that 2R sums are in flight, not 2: the same sums,
 * in the same order, as one row at a time. */
template <int R> void dots(const float *const *ai, const float *bj, int k, float *acc) {
    floats4 lo[R], hi[R]; /* unrolled, so that they stay in registers */
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) lo[r] = hi[r] = floats4{0, 0, 0, 0};
    int p = 0;
    for (; p + 8 <= k; p += 8) {
        const floats4 b0 = *(const floats4 *)(bj + p), b1 = *(const floats4 *)(bj + p + 4);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            lo[r] += *(const floats4 *)(ai[r] + p) * b0;
            hi[r] += *(const floats4 *)(ai[r] + p + 4) * b1;
        }
    }
    for (int r = 0; r < R; r++) {
        float s8[8];
        memcpy(s8, &lo[r], 16);
        memcpy(s8 + 4, &hi[r], 16);
        for (int q = p; q < k; q++) s8[q & 7] += ai[r][q] * bj[q];
        acc[r] = ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
    }
}

/* D = epilogue(alpha op(A) op(B) + beta C), one batch entry; float32
 * products accumulated in float32 (8 interleaved partial sums, then
 * combined: an order a tiled GPU kernel might also use). C is read only
 * when beta != 0, as cuBLAS documents. */
void gemm_one(bool ta, bool tb, int m, int n, int k, float alpha, const void *A, cudaDataType at, long long lda, const void *B,
              cudaDataType bt, long long ldb, float beta, const void *C, cudaDataType ct, long long ldc, void *D,
              cudaDataType dt, long long ldd, const gemm_epilogue &ep) {
    std::vector<float> a((size_t)m * k), bm((size_t)n * k); /* op(A) rows, op(B) columns, both along k */
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++) a[(size_t)i * k + p] = load(A, at, ta ? (size_t)p + (size_t)i * lda : (size_t)i + (size_t)p * lda);
    for (int j = 0; j < n; j++)
        for (int p = 0; p < k; p++) bm[(size_t)j * k + p] = load(B, bt, tb ? (size_t)j + (size_t)p * ldb : (size_t)p + (size_t)j * ldb);
    static int acc_double = getenv("EMU_GEMM_DOUBLE") && atoi(getenv("EMU_GEMM_DOUBLE")) > 0;
    std::vector<float> sums(ep.bgrad_of == BGRAD_OF_D ? (size_t)m * n : 0); /* the values the bias gradient adds, [j][i] */
#pragma omp parallel for schedule(static)
    for (int j = 0; j < n; j++) {
        const float *bj = &bm[(size_t)j * k];
        float accs[4];
        for (int i = 0; i < m; i++) {
            const float *ai = &a[(size_t)i * k];
            float acc;
            if (acc_double) {
                double s = 0;
                for (int p = 0; p < k; p++) s += (double)ai[p] * bj[p];
                acc = (float)s;
            } else {
                if (i % 4 == 0) { /* rows i to i + 3 at once (the rest one at a time) */
                    const float *rows[4] = {ai, ai, ai, ai};
                    for (int r = 1; r < 4 && i + r < m; r++) rows[r] = ai + (size_t)r * k;
                    if (i + 4 <= m) dots<4>(rows, bj, k, accs);
                    else
                        for (int r = 0; i + r < m; r++) dots<1>(rows + r, bj, k, accs + r);
                }
                acc = accs[i % 4];
            }
            float v = alpha * acc;
            if (beta != 0.0f) v += beta * load(C, ct, (size_t)i + (size_t)j * ldc);
            if (ep.bias) v += load(ep.bias, ep.bias_t, (size_t)i);
            if (ep.aux) v *= dgelu(load(ep.aux, dt, (size_t)i + (size_t)j * ep.aux_ld));
            if (ep.gelu_in) {
                store(ep.gelu_in, dt, (size_t)i + (size_t)j * ep.aux_ld, v);
                v = gelu_tanh(v);
            }
            if (ep.bgrad_of == BGRAD_OF_D) sums[(size_t)j * m + i] = v;
            store(D, dt, (size_t)i + (size_t)j * ldd, v);
        }
    }
    for (int i = 0; ep.bgrad_of == BGRAD_OF_D && i < m; i++) {
        float s = 0.0f;
        for (int j = 0; j < n; j++) s += sums[(size_t)j * m + i];
        store(ep.bgrad, ep.bias_t, (size_t)i, s);
    }
    if (ep.bgrad_of == BGRAD_OF_A) operand_sums(a, m, k, ep.bgrad, ep.bias_t);
}

bool type_ok(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }

} // namespace

/* ------------------------------------------------------------ cuBLASLt */

struct emu_lt {
    int dummy;
};
struct emu_lt_desc {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int32_t transa, transb, pointer_mode;
    uint32_t epilogue;
    const void *bias;  /* BIAS: read; DGELU_BGRAD: the bias gradient, written */
    int32_t bias_type; /* -1: D's type */
    const void *aux;   /* DGELU*: the GELU's input */
    int64_t aux_ld;
};
struct emu_lt_layout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t order, batch;
    int64_t batch_stride;
};
struct emu_lt_pref {
    uint64_t max_workspace;
    uint32_t align[4]; /* A B C D */
};

namespace {
template <typename V>
bool take(const void *buf, size_t bytes, V *out, const char *what) {
    if (bytes != sizeof(V)) {
        emu_error("%s: attribute size %zu, cuBLASLt expects %zu (CUBLAS_STATUS_INVALID_VALUE)", what, bytes, sizeof(V));
        return false;
    }
    memcpy(out, buf, sizeof(V));
    return true;
}

bool epilogue_emulated(uint32_t e) {
    return e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_DGELU ||
           e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
/* The bias is read (BIAS, GELU_AUX_BIAS) or a bias gradient written (the BGRAD ones). */
bool adds_bias(uint32_t e) { return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
bgrad_kind bgrad_of(uint32_t e) {
    return e == CUBLASLT_EPILOGUE_DGELU_BGRAD ? BGRAD_OF_D : e == CUBLASLT_EPILOGUE_BGRADA ? BGRAD_OF_A : BGRAD_NONE;
}
bool uses_bias(uint32_t e) { return adds_bias(e) || bgrad_of(e) != BGRAD_NONE; }
/* aux: read (DGELU*), or written (GELU_AUX_BIAS: the GELU's input). */
bool uses_aux(uint32_t e) {
    return e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

/* The alignment the heuristic takes from an epilogue pointer's value (it
 * has no preference attribute for them; cuBLAS's guide: routines that do
 * not dereference it, like the heuristic, "depend on its value to
 * determine expected pointer alignment"), up to 256 bytes, the default the
 * preference's alignments have: an algorithm chosen for one pointer may
 * need all of that of the next call's. */
uint64_t pointer_alignment(const void *p) {
    uint64_t align = 256;
    while (align > 1 && (uintptr_t)p % align != 0) align /= 2;
    return align;
}

/* What cublasLtMatmul would reject; m, n, k from the layouts. */
bool lt_validate(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                 cublasLtMatrixLayout_t d, const char *who, int *m_out, int *n_out, int *k_out) {
    bool ok = true;
    if (op->compute != CUBLAS_COMPUTE_32F || op->scale != CUDA_R_32F) {
        emu_error("%s: compute %d / scale %d not emulated", who, op->compute, op->scale);
        ok = false;
    }
    for (cublasLtMatrixLayout_t l : {a, b, c, d})
        if (l->order != CUBLASLT_ORDER_COL || l->batch != 1 || (int64_t)l->ld < (int64_t)std::max<uint64_t>(1, l->rows)) {
            emu_error("%s: layout rows %llu cols %llu ld %lld order %d batch %d not valid/emulated", who,
                      (unsigned long long)l->rows, (unsigned long long)l->cols, (long long)l->ld, l->order, l->batch);
            ok = false;
        }
    const bool ta = op->transa != CUBLAS_OP_N, tb = op->transb != CUBLAS_OP_N;
    const uint64_t m = d->rows, n = d->cols, k = ta ? a->rows : a->cols;
    const uint64_t am = ta ? a->cols : a->rows, bk = tb ? b->cols : b->rows, bn = tb ? b->rows : b->cols;
    if (am != m || bk != k || bn != n || c->rows != d->rows || c->cols != d->cols) {
        emu_error("%s: shapes disagree: op(A) %llux%llu, op(B) %llux%llu, C %llux%llu, D %llux%llu", who,
                  (unsigned long long)am, (unsigned long long)k, (unsigned long long)bk, (unsigned long long)bn,
                  (unsigned long long)c->rows, (unsigned long long)c->cols, (unsigned long long)m, (unsigned long long)n);
        ok = false;
    }
    const bool types = a->type == b->type && c->type == d->type && type_ok(a->type) && type_ok(d->type) &&
                       !(a->type == CUDA_R_32F && d->type != CUDA_R_32F);
    if (!types) {
        emu_error("%s: unsupported types A %d B %d C %d D %d", who, a->type, b->type, c->type, d->type);
        ok = false;
    }
    if (!epilogue_emulated(op->epilogue)) {
        emu_error("%s: epilogue %u not emulated", who, op->epilogue);
        ok = false;
    }
    const int32_t bt = op->bias_type == -1 ? (int32_t)d->type : op->bias_type;
    if (adds_bias(op->epilogue)) {
        if (!op->bias) {
            emu_error("%s: epilogue %u without a bias pointer", who, op->epilogue);
            ok = false;
        }
        if (!type_ok((cudaDataType)bt) || (d->type == CUDA_R_32F && bt != CUDA_R_32F)) {
            emu_error("%s: bias type %d with D type %d", who, bt, d->type);
            ok = false;
        }
    }
    if (bgrad_of(op->epilogue) != BGRAD_NONE) {
        /* cublasLt.h: "Bias gradient vector elements are the same type as the output elements" */
        if (!op->bias) {
            emu_error("%s: bias-gradient epilogue %u without a bias (gradient) pointer", who, op->epilogue);
            ok = false;
        }
        if (bt != (int32_t)d->type) {
            emu_error("%s: bias gradient type %d with D type %d (must be D's)", who, bt, d->type);
            ok = false;
        }
    }
    if (uses_aux(op->epilogue)) {
        /* cublasLt.h, EPILOGUE_AUX_LD: "Must be divisible by 8 and be no less than the number of rows in the output" */
        if (!op->aux) {
            emu_error("%s: GELU epilogue %u without an aux pointer (the GELU's input)", who, op->epilogue);
            ok = false;
        }
        if (op->aux_ld % 8 != 0 || op->aux_ld < (int64_t)d->rows) {
            emu_error("%s: aux ld %lld: must be divisible by 8 and at least D's %llu rows", who, (long long)op->aux_ld,
                      (unsigned long long)d->rows);
            ok = false;
        }
    }
    *m_out = (int)m, *n_out = (int)n, *k_out = (int)k;
    return ok;
}
} // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    *h = new emu_lt{0};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale) {
    *d = new emu_lt_desc{compute, scale, CUBLAS_OP_N, CUBLAS_OP_N, 0, CUBLASLT_EPILOGUE_DEFAULT, NULL, -1, NULL, 0};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t bytes) {
    const char *w = "cublasLtMatmulDescSetAttribute";
    bool ok;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: ok = take(buf, bytes, &d->transa, w); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: ok = take(buf, bytes, &d->transb, w); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: ok = take(buf, bytes, &d->epilogue, w); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: ok = take(buf, bytes, &d->bias, w); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: ok = take(buf, bytes, &d->bias_type, w); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: ok = take(buf, bytes, &d->aux, w); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: ok = take(buf, bytes, &d->aux_ld, w); break;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: ok = take(buf, bytes, &d->pointer_mode, w); break;
    default:
        emu_error("%s: attribute %d not emulated", w, (int)attr);
        ok = false;
    }
    return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    *l = new emu_lt_layout{type, rows, cols, ld, CUBLASLT_ORDER_COL, 1, 0};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t bytes) {
    const char *w = "cublasLtMatrixLayoutSetAttribute";
    bool ok;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_ORDER: ok = take(buf, bytes, &l->order, w); break;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: ok = take(buf, bytes, &l->batch, w); break;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: ok = take(buf, bytes, &l->batch_stride, w); break;
    case CUBLASLT_MATRIX_LAYOUT_ROWS: ok = take(buf, bytes, &l->rows, w); break;
    case CUBLASLT_MATRIX_LAYOUT_COLS: ok = take(buf, bytes, &l->cols, w); break;
    case CUBLASLT_MATRIX_LAYOUT_LD: ok = take(buf, bytes, &l->ld, w); break;
    default:
        emu_error("%s: attribute %d not emulated", w, (int)attr);
        ok = false;
    }
    return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = new emu_lt_pref{0, {256, 256, 256, 256}};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t bytes) {
    const char *w = "cublasLtMatmulPreferenceSetAttribute";
    bool ok;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: ok = take(buf, bytes, &p->max_workspace, w); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: ok = take(buf, bytes, &p->align[0], w); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: ok = take(buf, bytes, &p->align[1], w); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: ok = take(buf, bytes, &p->align[2], w); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: ok = take(buf, bytes, &p->align[3], w); break;
    default:
        emu_error("%s: attribute %d not emulated", w, (int)attr);
        ok = false;
    }
    return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

/* The heuristic offers EMU_LT_ALGOS algorithms for every valid problem
 * (fewer when asked for fewer), ids 0, 1, ... in algo.data[7]; each
 * remembers the alignments the preference promised (A B C D) and those of
 * the epilogue's pointers (bias, aux), and cublasLtMatmul checks the
 * pointers keep them. They compute the same product; they differ only in
 * the time they cost (emu_lt_algo_cost_ms). */
#define EMU_LT_ALGOS 5
/* The id of the fastest algorithm for an m x n x k product: 0 (the
 * heuristic's first, as cuBLASLt ranks them), or under EMU_LT_FASTEST=shape
 * (m + n + k) mod EMU_LT_ALGOS, so that tuning has a different answer per
 * shape to find. */
static int emu_lt_fastest(int m, int n, int k) {
    static const bool by_shape = [] {
        const char *v = getenv("EMU_LT_FASTEST");
        return v && strcmp(v, "shape") == 0;
    }();
    return by_shape ? (m + n + k) % EMU_LT_ALGOS : 0;
}
/* What running algorithm `id` adds to the events' clock: 1 s per id away
 * from the fastest, far above the host time of the emulated products, so
 * that timing them always finds the fastest; the fastest adds nothing. */
static double emu_lt_algo_cost_ms(int m, int n, int k, int id) { return 1000.0 * std::abs(id - emu_lt_fastest(m, n, k)); }

static long g_lt_heuristic_calls = 0;
static std::map<unsigned, long> g_lt_matmul_calls; /* by epilogue */
long emu_lt_heuristic_calls(void) { return g_lt_heuristic_calls; }
long emu_lt_matmul_calls(unsigned epilogue) { return g_lt_matmul_calls[epilogue]; }
static std::set<unsigned long long> g_lt_matmul_streams; /* every stream a product was enqueued on, by serial (not the legacy one) */
long emu_lt_matmul_streams(void) { return (long)g_lt_matmul_streams.size(); }

/* EMU_LT_NO_EPILOGUE=1: the heuristic finds no algorithm for any epilogue, as
 * a GPU's cuBLASLt may for some shapes, types or alignments, so that the
 * unfused paths the kernels fall back to run here too. =matmul: the
 * heuristic offers one, and cublasLtMatmul answers CUBLAS_STATUS_NOT_SUPPORTED
 * ("the current implementation on the selected device doesn't support the
 * configured operation"), which the kernels must take as the same refusal. */
enum epilogue_refusal { REFUSE_NONE, REFUSE_HEURISTIC, REFUSE_MATMUL };
static epilogue_refusal refuse_epilogues() {
    static const epilogue_refusal refuse = [] {
        const char *v = getenv("EMU_LT_NO_EPILOGUE");
        if (!v || !*v) return REFUSE_NONE;
        if (strcmp(v, "matmul") == 0) return REFUSE_MATMUL;
        return atoi(v) > 0 ? REFUSE_HEURISTIC : REFUSE_NONE;
    }();
    return refuse;
}
extern "C" int emu_lt_epilogues_refused(void) { return refuse_epilogues() != REFUSE_NONE; }

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t *results, int *returned) {
    (void)h;
    g_lt_heuristic_calls++;
    *returned = 0;
    /* Plans belong before a capture: cuBLASLt has been seen to fail the
     * heuristic while a stream captures (CUDA 13.3: CUBLAS_STATUS_INTERNAL_ERROR,
     * "Could not obtain green context information"), so the trainer builds
     * every plan in the warm step before the captured one. */
    if (emu_capture_refuses("cublasLtMatmulAlgoGetHeuristic")) return CUBLAS_STATUS_INTERNAL_ERROR;
    int m, n, k;
    if (requested < 1 || !lt_validate(op, a, b, c, d, "cublasLtMatmulAlgoGetHeuristic", &m, &n, &k))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (op->epilogue != CUBLASLT_EPILOGUE_DEFAULT && refuse_epilogues() == REFUSE_HEURISTIC)
        return CUBLAS_STATUS_NOT_SUPPORTED; /* as cuBLASLt answers a shape it has no algorithm for */
    const int offered = std::min(requested, EMU_LT_ALGOS);
    for (int r = 0; r < offered; r++) {
        memset(&results[r], 0, sizeof results[r]);
        results[r].algo.data[0] = 0xe3e3e3e3ull;
        for (int i = 0; i < 4; i++) results[r].algo.data[1 + i] = pref->align[i];
        results[r].algo.data[5] = uses_bias(op->epilogue) ? pointer_alignment(op->bias) : 1;
        results[r].algo.data[6] = uses_aux(op->epilogue) ? pointer_alignment(op->aux) : 1;
        results[r].algo.data[7] = (uint64_t)r; /* the algorithm's id */
        results[r].workspaceSize = 0;
        results[r].state = CUBLAS_STATUS_SUCCESS;
        results[r].wavesCount = 1.0f;
    }
    *returned = offered;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceBytes, cudaStream_t stream) {
    if (op->epilogue != CUBLASLT_EPILOGUE_DEFAULT && refuse_epilogues() == REFUSE_MATMUL)
        return CUBLAS_STATUS_NOT_SUPPORTED; /* refused at the call, before anything is enqueued */
    if (stream) g_lt_matmul_streams.insert(stream->serial); /* not a node's replay (nullptr, below) */
    const bool captured = emu::capturing(stream);
    if ((captured || emu_lazy_active()) && op->pointer_mode == 0) {
        /* cuBLASLt reads the descriptors and host scalars when it is called:
         * the node keeps copies, and the caller may change or free its own */
        auto desc = std::make_shared<emu_lt_desc>(*op);
        auto lay = std::make_shared<std::vector<emu_lt_layout>>(std::vector<emu_lt_layout>{*Adesc, *Bdesc, *Cdesc, *Ddesc});
        const float al = *(const float *)alpha, be = *(const float *)beta;
        const bool has_algo = algo != nullptr;
        cublasLtMatmulAlgo_t algo_copy = has_algo ? *algo : cublasLtMatmulAlgo_t{};
        std::function<void()> node = [=]() mutable {
            emu_lt_layout *l = lay->data();
            cublasLtMatmul(h, desc.get(), &al, A, &l[0], B, &l[1], &be, C, &l[2], D, &l[3], has_algo ? &algo_copy : nullptr,
                           workspace, workspaceBytes, nullptr);
        };
        if (captured) emu::capture_node(std::move(node));
        else emu::lazy_take(stream, std::move(node));
        return CUBLAS_STATUS_SUCCESS;
    }
    (void)h, (void)stream;
    int m, n, k;
    if (!lt_validate(op, Adesc, Bdesc, Cdesc, Ddesc, "cublasLtMatmul", &m, &n, &k)) return CUBLAS_STATUS_INVALID_VALUE;
    if (op->pointer_mode != 0) {
        emu_error("cublasLtMatmul: device pointer mode not emulated");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (algo && algo->data[0] == 0xe3e3e3e3ull) {
        const void *ptrs[6] = {A, B, C, D, uses_bias(op->epilogue) ? op->bias : NULL, uses_aux(op->epilogue) ? op->aux : NULL};
        const char *names[6] = {"A", "B", "C", "D", "bias", "aux"};
        for (int i = 0; i < 6; i++)
            if ((uintptr_t)ptrs[i] % (algo->data[1 + i] ? algo->data[1 + i] : 1) != 0)
                emu_error("cublasLtMatmul: operand %s at %p is not aligned to the %llu bytes the heuristic was given",
                          names[i], ptrs[i], (unsigned long long)algo->data[1 + i]);
    } else {
        emu_error("cublasLtMatmul: the algorithm did not come from cublasLtMatmulAlgoGetHeuristic");
    }
    if (workspaceBytes && !emu_check_device_range(workspace, workspaceBytes, "cublasLtMatmul workspace"))
        return CUBLAS_STATUS_INVALID_VALUE;
    const float al = *(const float *)alpha, be = *(const float *)beta;
    const bool ta = op->transa != CUBLAS_OP_N, tb = op->transb != CUBLAS_OP_N;
    const size_t a_bytes = span(Adesc->rows, Adesc->cols, Adesc->ld) * elem_bytes(Adesc->type),
                 b_bytes = span(Bdesc->rows, Bdesc->cols, Bdesc->ld) * elem_bytes(Bdesc->type),
                 c_bytes = span(Cdesc->rows, Cdesc->cols, Cdesc->ld) * elem_bytes(Cdesc->type),
                 d_bytes = span(Ddesc->rows, Ddesc->cols, Ddesc->ld) * elem_bytes(Ddesc->type);
    gemm_epilogue ep = {};
    ep.bias_t = op->bias_type == -1 ? Ddesc->type : (cudaDataType)op->bias_type;
    if (adds_bias(op->epilogue)) ep.bias = op->bias;
    ep.bgrad_of = bgrad_of(op->epilogue);
    if (ep.bgrad_of != BGRAD_NONE) ep.bgrad = (void *)op->bias;
    if (op->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) ep.gelu_in = (void *)op->aux, ep.aux_ld = op->aux_ld;
    else if (uses_aux(op->epilogue)) ep.aux = op->aux, ep.aux_ld = op->aux_ld;
    /* every emulated bias (gradient) runs along D's m rows (BGRADB's would run along its n columns) */
    const size_t bias_bytes = (size_t)m * elem_bytes(ep.bias_t),
                 aux_bytes = uses_aux(op->epilogue) ? span(m, n, op->aux_ld) * elem_bytes(Ddesc->type) : 0;
    bool ok = emu_check_device_range(A, a_bytes, "cublasLtMatmul A") && emu_check_device_range(B, b_bytes, "cublasLtMatmul B") &&
              emu_check_device_range(D, d_bytes, "cublasLtMatmul D");
    if (be != 0.0f) ok = ok && emu_check_device_range(C, c_bytes, "cublasLtMatmul C");
    if (uses_bias(op->epilogue)) ok = ok && emu_check_device_range(op->bias, bias_bytes, "cublasLtMatmul bias");
    if (uses_aux(op->epilogue)) ok = ok && emu_check_device_range(op->aux, aux_bytes, "cublasLtMatmul aux");
    if (!ok) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (overlaps(D, d_bytes, A, a_bytes) || overlaps(D, d_bytes, B, b_bytes))
        emu_error("cublasLtMatmul: D overlaps A or B");
    if (C != D && be != 0.0f && overlaps(D, d_bytes, C, c_bytes)) emu_error("cublasLtMatmul: D partially overlaps C");
    if (overlaps(D, d_bytes, ep.aux, aux_bytes)) emu_error("cublasLtMatmul: D overlaps the epilogue's aux input");
    if (ep.gelu_in && (overlaps(ep.gelu_in, aux_bytes, D, d_bytes) || overlaps(ep.gelu_in, aux_bytes, A, a_bytes) ||
                       overlaps(ep.gelu_in, aux_bytes, B, b_bytes) || overlaps(ep.gelu_in, aux_bytes, ep.bias, bias_bytes) ||
                       (be != 0.0f && overlaps(ep.gelu_in, aux_bytes, C, c_bytes))))
        emu_error("cublasLtMatmul: the epilogue's aux output (the GELU's input) overlaps an operand");
    if (ep.bgrad && (overlaps(ep.bgrad, bias_bytes, D, d_bytes) || overlaps(ep.bgrad, bias_bytes, ep.aux, aux_bytes) ||
                     overlaps(ep.bgrad, bias_bytes, A, a_bytes) || overlaps(ep.bgrad, bias_bytes, B, b_bytes)))
        emu_error("cublasLtMatmul: the bias gradient overlaps an operand");
    g_lt_matmul_calls[op->epilogue]++;
    if (algo && algo->data[0] == 0xe3e3e3e3ull) {
        const int id = (int)algo->data[7];
        if (id < 0 || id >= EMU_LT_ALGOS) emu_error("cublasLtMatmul: algorithm id %d was never offered", id);
        g_lt_virtual_ms += emu_lt_algo_cost_ms(m, n, k, id);
    }
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    gemm_one(ta, tb, m, n, k, al, A, Adesc->type, Adesc->ld, B, Bdesc->type, Bdesc->ld, be, C, Cdesc->type, Cdesc->ld, D,
             Ddesc->type, Ddesc->ld, ep);
    return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"

/* Unit test of the emulation's lazy device (tests/emu/emu_lazy.cpp): run
 * with EMU_LAZY=1 or 2 (1 when unset): stream work runs only when the host
 * needs it, so the orderings a GPU does not promise fail here too.
 * - a launch, an asynchronous copy into pinned memory and a graph launch do
 *   not run before their stream is synchronized;
 * - a wait for an event runs the event's stream up to its record first, and
 *   without the wait the other stream's work has not run (under 2, the
 *   host waits for the writer and the reader that does not wait runs first);
 * - cudaEventQuery answers cudaErrorNotReady while the record is queued;
 * - a synchronous cudaMemcpy waits for a blocking stream, not for a
 *   cudaStreamNonBlocking one (under 2 that one runs ahead);
 * - an asynchronous copy from pageable memory reads it at the call.
 * The device memory of the emulation is host memory: the test looks at it
 * directly to see what has run. Prints "ok NAME" / "not ok NAME - reason";
 * exit 1 on a failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tap.h"

__global__ void fill_kernel(float *y, float v, int n) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) y[i] = v;
}

#define N 16

static int all_equal(const float *p, float v) {
    for (int i = 0; i < N; i++)
        if (p[i] != v) return 0;
    return 1;
}

static cudaStream_t stream_with(unsigned flags) {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, flags);
    return s;
}

static float *device_zeros(void) {
    float *p;
    cudaMalloc((void **)&p, N * sizeof(float));
    cudaMemset(p, 0, N * sizeof(float));
    return p;
}

/* A launch and a copy into pinned memory wait for cudaStreamSynchronize. */
static int check_stream_work_waits(void) {
    cudaStream_t s = stream_with(cudaStreamNonBlocking);
    float *y = device_zeros(), *pinned;
    cudaMallocHost((void **)&pinned, N * sizeof(float));
    memset(pinned, 0, N * sizeof(float));
    fill_kernel<<<1, 32, 0, s>>>(y, 3.0f, N);
    cudaMemcpyAsync(pinned, y, N * sizeof(float), cudaMemcpyDeviceToHost, s);
    int failed = tap_result(all_equal(y, 0.0f) && all_equal(pinned, 0.0f), "emu_lazy_launch_and_copy_wait",
                            "the kernel or the copy ran before the stream was synchronized");
    cudaStreamSynchronize(s);
    failed |= tap_result(all_equal(y, 3.0f) && all_equal(pinned, 3.0f), "emu_lazy_stream_sync_runs_them",
                         "cudaStreamSynchronize did not run the stream's work");
    cudaFreeHost(pinned);
    cudaFree(y);
    cudaStreamDestroy(s);
    return failed;
}

/* Stream b copies what stream a's kernel writes: right with a wait for an
 * event recorded after the kernel, the old bytes without it. Under
 * EMU_LAZY=2 the host waits for a first, and b runs ahead where it can. */
static int check_cross_stream(int wait, int level, const char *name, const char *why) {
    cudaStream_t a = stream_with(cudaStreamNonBlocking), b = stream_with(cudaStreamNonBlocking);
    cudaEvent_t done;
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    float *x = device_zeros(), *y = device_zeros();
    fill_kernel<<<1, 32, 0, a>>>(x, 5.0f, N);
    cudaEventRecord(done, a);
    if (wait) cudaStreamWaitEvent(b, done, 0);
    cudaMemcpyAsync(y, x, N * sizeof(float), cudaMemcpyDeviceToDevice, b);
    if (level >= 2) cudaStreamSynchronize(a);
    cudaStreamSynchronize(b);
    const int failed = tap_result(all_equal(y, wait ? 5.0f : 0.0f), name, why);
    cudaStreamSynchronize(a);
    cudaFree(x);
    cudaFree(y);
    cudaEventDestroy(done);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    return failed;
}

/* The first query of a queued record answers not ready (and runs it). */
static int check_event_query(void) {
    cudaStream_t s = stream_with(cudaStreamNonBlocking);
    cudaEvent_t e;
    cudaEventCreate(&e);
    float *y = device_zeros();
    fill_kernel<<<1, 32, 0, s>>>(y, 2.0f, N);
    cudaEventRecord(e, s);
    const cudaError_t first = cudaEventQuery(e), second = cudaEventQuery(e);
    const int failed = tap_result(first == cudaErrorNotReady && second == cudaSuccess && all_equal(y, 2.0f),
                                  "emu_lazy_event_query_not_ready_then_done", "the queries did not answer not ready, then done");
    cudaFree(y);
    cudaEventDestroy(e);
    cudaStreamDestroy(s);
    return failed;
}

/* A synchronous copy reads the kernel's output when its stream is a
 * blocking one, and the old bytes when it is cudaStreamNonBlocking. */
static int check_legacy_sync(unsigned flags, float want, const char *name, const char *why) {
    cudaStream_t s = stream_with(flags);
    float *y = device_zeros(), host[N];
    fill_kernel<<<1, 32, 0, s>>>(y, 7.0f, N);
    cudaMemcpy(host, y, sizeof host, cudaMemcpyDeviceToHost);
    const int failed = tap_result(all_equal(host, want), name, why);
    cudaStreamSynchronize(s);
    cudaFree(y);
    cudaStreamDestroy(s);
    return failed;
}

/* From pageable memory the bytes of the call are copied; from pinned
 * memory those the buffer holds when the copy runs. */
static int check_pageable_source(void) {
    cudaStream_t s = stream_with(cudaStreamNonBlocking);
    float *a = device_zeros(), *b = device_zeros(), pageable[N], *pinned;
    cudaMallocHost((void **)&pinned, N * sizeof(float));
    for (int i = 0; i < N; i++) pageable[i] = pinned[i] = 1.0f;
    cudaMemcpyAsync(a, pageable, N * sizeof(float), cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(b, pinned, N * sizeof(float), cudaMemcpyHostToDevice, s);
    for (int i = 0; i < N; i++) pageable[i] = pinned[i] = 9.0f;
    cudaStreamSynchronize(s);
    const int failed = tap_result(all_equal(a, 1.0f) && all_equal(b, 9.0f), "emu_lazy_pageable_read_at_call_pinned_at_run",
                                  "pageable source not read at the call, or pinned source not read when the copy ran");
    cudaFreeHost(pinned);
    cudaFree(a);
    cudaFree(b);
    cudaStreamDestroy(s);
    return failed;
}

/* A graph launch waits in its stream too. */
static int check_graph_launch(void) {
    cudaStream_t s = stream_with(cudaStreamNonBlocking);
    float *y = device_zeros();
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    fill_kernel<<<1, 32, 0, s>>>(y, 4.0f, N);
    cudaStreamEndCapture(s, &graph);
    cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphLaunch(exec, s);
    cudaGraphExecDestroy(exec); /* the launch keeps its nodes */
    const int before = all_equal(y, 0.0f);
    cudaDeviceSynchronize();
    const int failed = tap_result(before && all_equal(y, 4.0f), "emu_lazy_graph_launch_waits",
                                  "the graph ran at its launch, or not at cudaDeviceSynchronize");
    cudaGraphDestroy(graph);
    cudaFree(y);
    cudaStreamDestroy(s);
    return failed;
}

int main(void) {
    if (!getenv("EMU_LAZY")) setenv("EMU_LAZY", "1", 1);
    const int level = atoi(getenv("EMU_LAZY"));
    if (level < 1) {
        printf("not ok emu_lazy - EMU_LAZY=%d: the lazy device is off\n", level);
        return 1;
    }
    int failed = check_stream_work_waits();
    failed |= check_cross_stream(1, level, "emu_lazy_wait_event_runs_the_other_stream_first",
                                 "stream b copied before stream a's kernel ran, despite the wait");
    failed |= check_cross_stream(0, level, "emu_lazy_no_wait_sees_old_bytes",
                                 "stream b saw stream a's kernel without waiting for it");
    failed |= check_event_query();
    failed |= check_legacy_sync(cudaStreamDefault, 7.0f, "emu_lazy_memcpy_waits_for_blocking_stream",
                                "a synchronous copy did not wait for a blocking stream");
    if (level == 1)
        failed |= check_legacy_sync(cudaStreamNonBlocking, 0.0f, "emu_lazy_memcpy_ignores_nonblocking_stream",
                                    "a synchronous copy waited for a cudaStreamNonBlocking stream");
    else /* the host waits for the legacy stream: every other one runs ahead */
        failed |= check_legacy_sync(cudaStreamNonBlocking, 7.0f, "emu_lazy_nonblocking_stream_runs_ahead_of_a_memcpy",
                                    "a cudaStreamNonBlocking stream did not run ahead while the host waited");
    failed |= check_pageable_source();
    failed |= check_graph_launch();
    return failed;
}

/* Unit test of the emulation's CUDA graphs (tests/emu/emu_graph.cpp), the
 * semantics the trainer's captured step relies on:
 * - nothing captured runs during the capture;
 * - a launch runs the nodes in order, with the kernel parameters and host
 *   scalars of the capture, and reads buffers as they are at the launch (a
 *   pinned buffer refilled between launches is copied with its new bytes);
 * - what a GPU refuses during a capture (synchronizing, a synchronous copy,
 *   allocating, work on the legacy stream; cuBLASLt's heuristic, as CUDA
 *   13.3's fails it there) is reported and invalidates the capture
 *   (cudaStreamEndCapture fails);
 * - a second stream forked off the capture by waiting for an event recorded
 *   in it is captured too, and joined back by the capturing stream's wait:
 *   the launch runs both streams' work in order; a fork never joined back
 *   fails the capture, and an event recorded during the capture cannot be
 *   queried afterwards.
 * Prints "ok NAME" / "not ok NAME - reason"; exit 1 on a failure. */
#include <cublasLt.h>
#include <stdio.h>
#include <string.h>

#include "tests/emu/emu_hooks.h"
#include "tests/tap.h"

__global__ void axpb_kernel(float *y, const float *x, float a, float b, int n) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) y[i] = a * x[i] + b;
}

#define N 40

/* Launches the graph, then checks that y_dev holds a * i + b. */
static int launch_expecting(cudaGraphExec_t exec, cudaStream_t s, const float *y_dev, float a, float b, const char *name,
                            const char *why) {
    float y[N];
    cudaGraphLaunch(exec, s);
    cudaStreamSynchronize(s);
    cudaMemcpy(y, y_dev, sizeof y, cudaMemcpyDeviceToHost);
    int same = 1;
    for (int i = 0; i < N; i++) same &= y[i] == a * i + b;
    return tap_result(same, name, why);
}

/* y = 2 * x + b from a pinned x through a captured copy, b a kernel
 * parameter fixed at capture. */
static int check_capture_and_replay(void) {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *x_pinned, *x_dev, *y_dev, y[N];
    cudaMallocHost((void **)&x_pinned, N * sizeof(float));
    cudaMalloc((void **)&x_dev, N * sizeof(float));
    cudaMalloc((void **)&y_dev, N * sizeof(float));
    cudaMemset(y_dev, 0, N * sizeof(float));
    for (int i = 0; i < N; i++) x_pinned[i] = (float)i;

    cudaGraph_t graph;
    cudaGraphExec_t exec;
    float b = 1.0f;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    cudaMemcpyAsync(x_dev, x_pinned, N * sizeof(float), cudaMemcpyHostToDevice, s);
    axpb_kernel<<<2, 32, 0, s>>>(y_dev, x_dev, 2.0f, b, N);
    b = 100.0f; /* too late: the node holds 1 */
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    cudaMemcpy(y, y_dev, sizeof y, cudaMemcpyDeviceToHost);
    int untouched = 1;
    for (int i = 0; i < N; i++) untouched &= y[i] == 0.0f;
    int failed = tap_result(end == cudaSuccess && untouched, "emu_graph_capture_runs_nothing", "the captured work ran during the capture");

    cudaGraphInstantiate(&exec, graph, 0);
    failed |= launch_expecting(exec, s, y_dev, 2.0f, 1.0f, "emu_graph_launch_runs_with_captured_parameters",
                               "y != 2 x + 1 after the first launch");
    for (int i = 0; i < N; i++) x_pinned[i] = (float)(3 * i);
    failed |= launch_expecting(exec, s, y_dev, 6.0f, 1.0f, "emu_graph_launch_reads_pinned_input_at_launch",
                               "the second launch did not copy the refilled buffer");

    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaFreeHost(x_pinned);
    cudaFree(x_dev);
    cudaFree(y_dev);
    cudaStreamDestroy(s);
    return failed;
}

/* Each refused call is reported (one emulator error, taken back here) and
 * the capture ends invalidated. */
static int check_refused(int which, const char *name) {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *d, host[4] = {0, 0, 0, 0};
    void *extra = NULL;
    cudaMalloc((void **)&d, sizeof host);
    const long errors_before = emu_errors();
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    axpb_kernel<<<1, 32, 0, s>>>(d, d, 1.0f, 0.0f, 4);
    cudaError_t call = cudaSuccess;
    switch (which) {
    case 0: call = cudaStreamSynchronize(s); break;
    case 1: call = cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost); break;
    case 2: call = cudaMalloc(&extra, 16); break;
    case 3: axpb_kernel<<<1, 32>>>(d, d, 1.0f, 0.0f, 4); break; /* the legacy stream */
    case 4: call = cudaMemcpyAsync(d, host, sizeof host, cudaMemcpyHostToDevice, s); break; /* pageable */
    default: { /* cuBLASLt's heuristic: refused before it reads its arguments */
        cublasLtMatmulHeuristicResult_t result;
        int found = 0;
        const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, &result, &found);
        call = st == CUBLAS_STATUS_INTERNAL_ERROR ? cudaErrorUnknown : cudaSuccess;
        break;
    }
    }
    cudaGraph_t graph;
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    const long reported = emu_errors() - errors_before;
    emu_errors_forgive(errors_before);
    char why[160];
    snprintf(why, sizeof why, "call returned %d, end capture %d, %ld emulator errors", (int)call, (int)end, reported);
    const int failed = tap_result(end == cudaErrorStreamCaptureInvalidated && graph == NULL && reported == 1 &&
                                 (which == 3 || call != cudaSuccess),
                             name, why);
    cudaGetLastError();
    if (extra) cudaFree(extra);
    cudaFree(d);
    cudaStreamDestroy(s);
    return failed;
}

__global__ void add_kernel(float *y, const float *x, int n) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) y[i] += x[i];
}

/* Captured on s: y = 2x + 1; forked to t: z = y + y (z = 2y);
 * joined back to s: y += z, so y = 3 (2x + 1). `join` 0 leaves t's work
 * unjoined, which must fail the capture. */
static int check_fork_join(int join, const char *name) {
    cudaStream_t s, t;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking);
    cudaEvent_t forked, done;
    cudaEventCreateWithFlags(&forked, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    float *x, *y, *z, host[N];
    cudaMalloc((void **)&x, N * sizeof(float));
    cudaMalloc((void **)&y, N * sizeof(float));
    cudaMalloc((void **)&z, N * sizeof(float));
    for (int i = 0; i < N; i++) host[i] = (float)i;
    cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice);
    const long errors_before = emu_errors();
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    axpb_kernel<<<2, 32, 0, s>>>(y, x, 2.0f, 1.0f, N);
    cudaEventRecord(forked, s);
    cudaStreamWaitEvent(t, forked, 0);
    cudaMemsetAsync(z, 0, N * sizeof(float), t);
    add_kernel<<<2, 32, 0, t>>>(z, y, N);
    add_kernel<<<2, 32, 0, t>>>(z, y, N);
    cudaEventRecord(done, t);
    if (join) cudaStreamWaitEvent(s, done, 0);
    add_kernel<<<2, 32, 0, s>>>(y, z, N);
    cudaGraph_t graph = NULL;
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    const long reported = emu_errors() - errors_before;
    emu_errors_forgive(errors_before);
    int failed;
    char why[160];
    snprintf(why, sizeof why, "end capture %d, %ld emulator errors", (int)end, reported);
    if (!join) {
        failed = tap_result(end == cudaErrorStreamCaptureInvalidated && graph == NULL && reported == 1, name, why);
    } else {
        failed = tap_result(end == cudaSuccess && reported == 0, name, why);
        cudaGraphExec_t exec;
        cudaGraphInstantiate(&exec, graph, 0);
        for (int launch = 0; launch < 2; launch++) { /* y is rebuilt from x each time */
            cudaGraphLaunch(exec, s);
            cudaStreamSynchronize(s);
        }
        float got[N];
        cudaMemcpy(got, y, sizeof got, cudaMemcpyDeviceToHost);
        int same = 1;
        for (int i = 0; i < N; i++) same &= got[i] == 3.0f * (2.0f * (float)i + 1.0f);
        failed |= tap_result(same, "emu_graph_fork_join_launch_runs_both_streams", "y != 3 (2x + 1) after two launches");
        /* the event marks nothing a launch does: querying it is reported */
        const long before_query = emu_errors();
        const cudaError_t q = cudaEventQuery(done);
        const long query_errors = emu_errors() - before_query;
        emu_errors_forgive(before_query);
        cudaGetLastError();
        snprintf(why, sizeof why, "query returned %d with %ld emulator errors", (int)q, query_errors);
        failed |= tap_result(q != cudaSuccess && query_errors == 1, "emu_graph_captured_event_not_queried", why);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
    }
    cudaGetLastError();
    cudaFree(x);
    cudaFree(y);
    cudaFree(z);
    cudaEventDestroy(forked);
    cudaEventDestroy(done);
    cudaStreamDestroy(s);
    cudaStreamDestroy(t);
    return failed;
}

/* A capturing stream waiting for an event recorded before the capture (on
 * another stream): a dependency from outside the graph into it, which a GPU
 * refuses (cudaErrorStreamCaptureIsolation) and which invalidates the
 * capture. A wait for an event recorded in the capture is checked above. */
static int check_wait_outside_capture(void) {
    cudaStream_t s, t;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking);
    cudaEvent_t before;
    cudaEventCreateWithFlags(&before, cudaEventDisableTiming);
    float *x;
    cudaMalloc((void **)&x, N * sizeof(float));
    cudaMemsetAsync(x, 0, N * sizeof(float), t);
    cudaEventRecord(before, t);
    cudaStreamSynchronize(t);
    const long errors_before = emu_errors();
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    const cudaError_t wait = cudaStreamWaitEvent(s, before, 0);
    axpb_kernel<<<2, 32, 0, s>>>(x, x, 1.0f, 1.0f, N);
    cudaGraph_t graph = NULL;
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    const long reported = emu_errors() - errors_before;
    emu_errors_forgive(errors_before);
    cudaGetLastError();
    char why[160];
    snprintf(why, sizeof why, "wait %d, end capture %d, %ld emulator errors", (int)wait, (int)end, reported);
    const int failed = tap_result(wait == cudaErrorStreamCaptureIsolation && end == cudaErrorStreamCaptureInvalidated &&
                                      graph == NULL && reported == 1,
                                  "emu_graph_refuses_wait_for_event_outside_capture", why);
    cudaFree(x);
    cudaEventDestroy(before);
    cudaStreamDestroy(s);
    cudaStreamDestroy(t);
    return failed;
}

int main(void) {
    int failed = check_capture_and_replay();
    failed |= check_fork_join(1, "emu_graph_fork_join_captures");
    failed |= check_fork_join(0, "emu_graph_unjoined_fork_fails");
    failed |= check_refused(0, "emu_graph_refuses_stream_synchronize");
    failed |= check_refused(1, "emu_graph_refuses_synchronous_copy");
    failed |= check_refused(2, "emu_graph_refuses_cuda_malloc");
    failed |= check_refused(3, "emu_graph_refuses_legacy_stream_launch");
    failed |= check_refused(4, "emu_graph_refuses_pageable_async_copy");
    failed |= check_refused(5, "emu_graph_refuses_cublaslt_heuristic");
    failed |= check_wait_outside_capture();
    return failed;
}

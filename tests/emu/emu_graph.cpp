/* CUDA graphs in the emulation: between cudaStreamBeginCapture and
 * cudaStreamEndCapture, the work enqueued on the capturing stream (kernel
 * launches, asynchronous copies and sets, event records, cuBLAS and
 * cuBLASLt products) is recorded as nodes instead of run; a launch of the
 * instantiated graph runs the nodes in order. As on a GPU, a node reads its
 * buffers when the graph runs, not when it was captured (a pinned host
 * buffer refilled before a launch is copied with its new bytes), and keeps
 * the kernel parameters and host scalars it was captured with.
 *
 * What a GPU refuses during a global-mode capture is an error here
 * (emu_capture_refuses): synchronizing a stream, an event or the device,
 * querying an event, allocating or freeing, synchronous copies and sets,
 * copies with pageable host memory, and work on any other stream (the legacy
 * stream 0 included). The capture then ends with
 * cudaErrorStreamCaptureInvalidated. One capture at a time.
 *
 * EMU_CAPTURE_FAIL=begin or =end (environment) makes every capture fail
 * there, as a device that refuses it would, without an emulator error: the
 * trainer's way back to launching ops one by one is tested with it.
 * EMU_CAPTURE_FAIL=launch refuses the first kernel launched during a
 * capture instead, as a GPU refuses an op it cannot capture: the trainer
 * then stops, and its message says how to run without the graph. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cuda_emu.h"
#include "emu_internal.h"

struct emu_graph {
    std::vector<std::function<void()>> nodes;
};
struct emu_graph_exec {
    std::vector<std::function<void()>> nodes;
};

namespace {
/* EMU_CAPTURE_FAIL: where a capture is made to fail ("begin", "end"), or "". */
const char *capture_fail_at() {
    const char *v = getenv("EMU_CAPTURE_FAIL");
    return v ? v : "";
}

/* The capture under way: test infrastructure, one per process, as the
 * emulator runs one host thread. */
struct capture_state {
    cudaStream_t stream = nullptr; /* nullptr: no capture */
    bool invalidated = false;
    std::vector<std::function<void()>> nodes;
};
capture_state g_capture;
} // namespace

bool emu_capture_refuses(const char *call) {
    if (!g_capture.stream) return false;
    emu_error("%s during a stream capture: a GPU refuses it (cudaErrorStreamCaptureUnsupported) and invalidates the capture",
              call);
    g_capture.invalidated = true;
    return true;
}

namespace emu {

bool capturing(cudaStream_t s) {
    if (!g_capture.stream) return false;
    if (s == g_capture.stream) return true;
    emu_error("work enqueued on stream %p while stream %p is capturing: %s", (void *)s, (void *)g_capture.stream,
              s ? "it would not be part of the graph" : "the legacy stream invalidates the capture (cudaErrorStreamCaptureImplicit)");
    g_capture.invalidated = true;
    return false;
}

void capture_node(std::function<void()> node) { g_capture.nodes.push_back(std::move(node)); }

bool capture_refuses_launch(cudaStream_t s) {
    if (!g_capture.stream || s != g_capture.stream || strcmp(capture_fail_at(), "launch") != 0) return false;
    g_capture.invalidated = true;
    emu_fail(cudaErrorStreamCaptureUnsupported);
    return true;
}

} // namespace emu

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
    if (mode != cudaStreamCaptureModeGlobal) {
        emu_error("cudaStreamBeginCapture: only cudaStreamCaptureModeGlobal is emulated (mode %d)", (int)mode);
        return emu_fail(cudaErrorInvalidValue);
    }
    if (!s || g_capture.stream) {
        emu_error("cudaStreamBeginCapture(%p): %s", (void *)s, s ? "a capture is already under way" : "the legacy stream cannot capture");
        return emu_fail(cudaErrorInvalidValue);
    }
    if (strcmp(capture_fail_at(), "begin") == 0) return emu_fail(cudaErrorStreamCaptureUnsupported);
    emu_flush_pending_copies(); /* work enqueued before the capture is not part of it */
    g_capture.stream = s;
    g_capture.invalidated = false;
    g_capture.nodes.clear();
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph) {
    *graph = nullptr;
    if (!g_capture.stream || s != g_capture.stream) {
        emu_error("cudaStreamEndCapture(%p): that stream is not capturing", (void *)s);
        return emu_fail(cudaErrorInvalidValue);
    }
    const bool invalidated = g_capture.invalidated || strcmp(capture_fail_at(), "end") == 0;
    std::vector<std::function<void()>> nodes = std::move(g_capture.nodes);
    g_capture = capture_state{};
    if (invalidated) return emu_fail(cudaErrorStreamCaptureInvalidated);
    *graph = new emu_graph{std::move(nodes)};
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    (void)flags;
    *exec = nullptr;
    if (!graph) return emu_fail(cudaErrorInvalidValue);
    *exec = new emu_graph_exec{graph->nodes};
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    if (!exec) return emu_fail(cudaErrorInvalidValue);
    if (g_capture.stream) {
        emu_error("cudaGraphLaunch on stream %p during a capture: not emulated", (void *)s);
        return emu_fail(cudaErrorStreamCaptureUnsupported);
    }
    std::vector<std::function<void()>> nodes = exec->nodes; /* the launch keeps them: exec may be destroyed before it runs */
    auto run = [nodes] {
        for (const std::function<void()> &node : nodes) node();
    };
    if (emu::lazy_take(s, run)) return cudaSuccess;
    emu_flush_pending_copies(); /* the stream's earlier work runs first */
    run();
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete graph;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete exec;
    return cudaSuccess;
}

} // extern "C"

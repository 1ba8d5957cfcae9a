/* CUDA graphs in the emulation: between cudaStreamBeginCapture and
 * cudaStreamEndCapture, the work enqueued on the capturing stream (kernel
 * launches, asynchronous copies and sets, event records, cuBLAS and
 * cuBLASLt products) is recorded as nodes instead of run; a launch of the
 * instantiated graph runs the nodes in order. As on a GPU, a node reads its
 * buffers when the graph runs, not when it was captured (a pinned host
 * buffer refilled before a launch is copied with its new bytes), and keeps
 * the kernel parameters and host scalars it was captured with.
 *
 * Other streams join the capture as on a GPU: a stream that waits for an
 * event recorded during the capture (cudaStreamWaitEvent) is capturing from
 * then on, so a communicator's stream forks off the captured stream and its
 * work (an NCCL collective too: emu_nccl.cpp) becomes nodes. Nodes keep the
 * order the host enqueued them in, which respects every dependency the
 * streams had, and a launch runs them in it. Every joined stream's last work
 * must be joined back: the capturing stream must wait for an event
 * recorded on the joined stream after it, or cudaStreamEndCapture fails
 * (cudaErrorStreamCaptureUnjoined on a GPU). An event last recorded during
 * a capture tells nothing of a launch's progress: querying or
 * synchronizing it afterwards is an error, as is a stream outside the
 * capture waiting for it (cudaErrorStreamCaptureIsolation).
 *
 * What a GPU refuses during a global-mode capture is an error here
 * (emu_capture_refuses): synchronizing a stream, an event or the device,
 * querying an event, allocating or freeing, synchronous copies and sets,
 * copies with pageable host memory, and work on any stream that is not
 * capturing (the legacy stream 0 included). The capture then ends with
 * cudaErrorStreamCaptureInvalidated. One capture at a time; thread-local
 * mode is the same (the emulator runs one host thread).
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

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "cuda_emu.h"
#include "emu_internal.h"

/* A node runs its work and returns true; one that waits for other ranks
 * (a collective) may return false when `may_stall` (the lazy device) and is
 * tried again later, or else blocks until it is done. */
using emu_node = std::function<bool(bool may_stall)>;
/* `holds`: what the graph's nodes belong to (emulated NCCL communicators). */
struct emu_graph {
    std::vector<emu_node> nodes;
    std::set<const void *> holds;
};
struct emu_graph_exec {
    std::vector<emu_node> nodes;
    std::set<const void *> holds;
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
    cudaStream_t stream = nullptr; /* the capturing stream; nullptr: no capture */
    bool invalidated = false;
    std::vector<emu_node> nodes;
    cudaStream_t last = nullptr; /* the stream capturing() last said yes for: the next node's */
    /* Streams joined to the capture: nodes captured on each, and how many
     * of them the capturing stream has waited for. */
    std::map<cudaStream_t, std::pair<uint64_t, uint64_t>> joined;
    /* Events recorded during the capture: their stream and its node count then. */
    std::map<cudaEvent_t, std::pair<cudaStream_t, uint64_t>> records;
    std::set<const void *> holds; /* emu::capture_hold */
};
capture_state g_capture;
/* How many graphs and executable graphs hold each owner (emu_graph_holds). */
std::map<const void *, int> g_held;
void hold_all(const std::set<const void *> &owners, int by) {
    for (const void *o : owners)
        if ((g_held[o] += by) == 0) g_held.erase(o);
}
/* Events whose last record was captured (they mark nothing a launch does). */
std::set<cudaEvent_t> g_captured_events;
} // namespace

void emu_capture_event_recorded(cudaEvent_t e) { g_captured_events.erase(e); }

bool emu_capture_event_unusable(cudaEvent_t e, const char *call) {
    if (!g_captured_events.count(e)) return false;
    emu_error("%s on an event last recorded during a stream capture: it marks nothing a launch of the graph does (record "
              "it again after the launch)", call);
    return true;
}

/* A capture under way holds what it recorded too: NCCL counts a captured
 * collective from its capture on. */
int emu_graph_holds(const void *owner) {
    auto h = g_held.find(owner);
    return (h == g_held.end() ? 0 : h->second) + (int)g_capture.holds.count(owner);
}

bool emu_capture_has(cudaStream_t s) {
    return g_capture.stream && (s == g_capture.stream || (s && g_capture.joined.count(s)));
}

bool emu_capture_wait(cudaStream_t s, cudaEvent_t e) {
    auto rec = g_capture.records.find(e);
    if (rec == g_capture.records.end()) {
        if (g_captured_events.count(e))
            emu_error("cudaStreamWaitEvent on an event recorded during an ended capture: it marks nothing a launch does");
        else if (emu_capture_has(s)) { /* a dependency from outside the graph into it */
            emu_error("cudaStreamWaitEvent: a capturing stream waits for an event recorded outside the capture; a GPU "
                      "refuses it (cudaErrorStreamCaptureIsolation: only in-stream order may cross the capture's boundary) "
                      "and invalidates the capture");
            g_capture.invalidated = true;
            return false;
        }
        return true;
    }
    if (s == g_capture.stream) { /* a join back: the capturing stream now follows that stream's work so far */
        auto j = g_capture.joined.find(rec->second.first);
        if (j != g_capture.joined.end() && rec->second.second > j->second.second) j->second.second = rec->second.second;
        return true;
    }
    g_capture.joined.emplace(s, std::make_pair(0, 0)); /* a fork: s captures from now on */
    return true;
}

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
    if (emu_capture_has(s)) {
        g_capture.last = s;
        return true;
    }
    emu_error("work enqueued on stream %p while stream %p is capturing: %s", (void *)s, (void *)g_capture.stream,
              s ? "it has not joined the capture (no wait for an event recorded in it), so it would not be part of the graph"
                : "the legacy stream invalidates the capture (cudaErrorStreamCaptureImplicit)");
    g_capture.invalidated = true;
    return false;
}

/* Counts a node of the stream capturing() last accepted. */
static void count_work() {
    auto j = g_capture.joined.find(g_capture.last);
    if (j != g_capture.joined.end()) j->second.first++;
}

void capture_node(std::function<void()> node) {
    count_work();
    g_capture.nodes.push_back([node](bool) {
        node();
        return true;
    });
}

void capture_hold(const void *owner) { g_capture.holds.insert(owner); }

void capture_attempt_node(std::function<bool(bool)> node) {
    count_work();
    g_capture.nodes.push_back(std::move(node));
}

void capture_record(cudaEvent_t e, cudaStream_t s, std::function<void()> mark) {
    auto j = g_capture.joined.find(s);
    g_capture.records[e] = {s, j == g_capture.joined.end() ? 0 : j->second.first};
    g_captured_events.insert(e);
    g_capture.nodes.push_back([mark](bool) {
        mark();
        return true;
    });
}

bool capture_refuses_launch(cudaStream_t s) {
    if (!g_capture.stream || s != g_capture.stream || strcmp(capture_fail_at(), "launch") != 0) return false;
    g_capture.invalidated = true;
    emu_fail(cudaErrorStreamCaptureUnsupported);
    return true;
}

} // namespace emu

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal) {
        emu_error("cudaStreamBeginCapture: only the global and thread-local modes are emulated (mode %d)", (int)mode);
        return emu_fail(cudaErrorInvalidValue);
    }
    if (!s || g_capture.stream) {
        emu_error("cudaStreamBeginCapture(%p): %s", (void *)s, s ? "a capture is already under way" : "the legacy stream cannot capture");
        return emu_fail(cudaErrorInvalidValue);
    }
    if (strcmp(capture_fail_at(), "begin") == 0) return emu_fail(cudaErrorStreamCaptureUnsupported);
    emu_flush_pending_copies(); /* work enqueued before the capture is not part of it */
    g_capture = capture_state{};
    g_capture.stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph) {
    *graph = nullptr;
    if (!g_capture.stream || s != g_capture.stream) {
        emu_error("cudaStreamEndCapture(%p): that stream is not capturing", (void *)s);
        return emu_fail(cudaErrorInvalidValue);
    }
    bool invalidated = g_capture.invalidated || strcmp(capture_fail_at(), "end") == 0;
    for (const auto &j : g_capture.joined)
        if (j.second.first > j.second.second) {
            emu_error("cudaStreamEndCapture: stream %p joined the capture and its last %llu node(s) were not joined back (the "
                      "capturing stream never waited for an event recorded after them): cudaErrorStreamCaptureUnjoined",
                      (void *)j.first, (unsigned long long)(j.second.first - j.second.second));
            invalidated = true;
        }
    std::vector<emu_node> nodes = std::move(g_capture.nodes);
    std::set<const void *> holds = std::move(g_capture.holds);
    g_capture = capture_state{};
    if (invalidated) return emu_fail(cudaErrorStreamCaptureInvalidated);
    *graph = new emu_graph{std::move(nodes), holds};
    hold_all(holds, 1);
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status) {
    if (!status) return emu_fail(cudaErrorInvalidValue);
    *status = !emu_capture_has(s)        ? cudaStreamCaptureStatusNone
              : g_capture.invalidated ? cudaStreamCaptureStatusInvalidated
                                      : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    (void)flags;
    *exec = nullptr;
    if (!graph) return emu_fail(cudaErrorInvalidValue);
    *exec = new emu_graph_exec{graph->nodes, graph->holds};
    hold_all(graph->holds, 1);
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    if (!exec) return emu_fail(cudaErrorInvalidValue);
    if (g_capture.stream) {
        emu_error("cudaGraphLaunch on stream %p during a capture: not emulated", (void *)s);
        return emu_fail(cudaErrorStreamCaptureUnsupported);
    }
    /* The launch keeps the nodes (exec may be destroyed before it runs); on
     * the lazy device it runs as far as a stalling node, and on from there
     * at the next try. */
    auto nodes = std::make_shared<std::vector<emu_node>>(exec->nodes);
    auto next = std::make_shared<size_t>(0);
    if (emu_lazy_take_until(s, [nodes, next] {
            for (; *next < nodes->size(); ++*next)
                if (!(*nodes)[*next](true)) return false;
            return true;
        }))
        return cudaSuccess;
    emu_flush_pending_copies(); /* the stream's earlier work runs first */
    for (const emu_node &node : *nodes) node(false);
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    if (graph) hold_all(graph->holds, -1);
    delete graph;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    if (exec) hold_all(exec->holds, -1);
    delete exec;
    return cudaSuccess;
}

} // extern "C"

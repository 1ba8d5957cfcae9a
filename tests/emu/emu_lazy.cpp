/* EMU_LAZY=1: the emulated device runs as far behind the host as CUDA
 * allows. Without it every call runs its work at once, so a host that
 * forgets to wait for the device still reads the right bytes here and the
 * wrong ones on a GPU. With it, the work enqueued on a stream (launches,
 * asynchronous copies and sets, cuBLASLt products, the cub sort, graph
 * launches, event records, waits for events) waits in that stream's queue
 * and runs only when the host needs it:
 *   - cudaStreamSynchronize(s): s's queue;
 *   - cudaEventSynchronize(e), cudaEventQuery(e): the queue of e's stream up
 *     to its record; a query that finds the record still queued runs it but
 *     answers cudaErrorNotReady, as a GPU behind the host would;
 *   - cudaDeviceSynchronize, cudaFree, cudaFreeHost: every queue;
 *   - a synchronous cudaMemcpy or cudaMemset: the legacy stream's queue and
 *     those of streams created blocking, not the cudaStreamNonBlocking ones
 *     (as CUDA's legacy stream does);
 *   - an asynchronous copy to pageable host memory: its stream's queue (it
 *     returns when done); one from pageable memory reads it at the call.
 * A queue runs in its own order; a wait for an event first runs the queue
 * of the event's stream up to the record the wait saw. Nothing else runs
 * a stream's work early, so a host that reads a pinned buffer before the
 * copy into it ran, or a stream that reads what another writes after the
 * host's wait, sees the old bytes here too.
 * Work may also stall (emu_lazy_take_until: a collective of several ranks
 * whose peers have not come): it stays at the front of its queue, and its
 * stream goes no further, until an attempt finds it can run. A query then
 * answers cudaErrorNotReady; a synchronizing call waits, as the host would
 * for a GPU, but ends the program with an error after EMU_STALL_S seconds
 * (default 300) rather than hang.
 * EMU_LAZY=2 also runs, before the host waits for one stream, every other
 * stream as far as its waits allow: a stream that reads what the awaited
 * one writes without waiting for it then reads it too early. (Under 1 such
 * a read may come late enough to be right: the host's wait ran the writer
 * first.) */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h> /* nanosleep */

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <vector>

#include "cuda_emu.h"
#include "emu_internal.h"

namespace {

/* One piece of stream work (true: it ran; false: it stalled and is tried
 * again later); `after` a record on another stream it waits for. */
struct queued {
    uint64_t seq;
    std::function<bool()> work;
    cudaStream_t after_stream;
    uint64_t after_seq; /* 0: waits for nothing */
};
struct record_at {
    cudaStream_t stream;
    uint64_t seq;
};

/* The device's queues: test infrastructure, one per process, as the
 * emulator runs one host thread. */
struct lazy_state {
    std::map<cudaStream_t, std::deque<queued>> queues;
    struct known_stream {
        cudaStream_t s;
        bool nonblocking; /* cudaStreamNonBlocking */
    };
    std::vector<known_stream> streams;           /* in creation order; the legacy stream first */
    std::map<cudaEvent_t, record_at> records;    /* each event's latest record not yet run */
    uint64_t next_seq = 1;
    int draining = 0; /* work running from a queue enqueues nothing: it runs */
};
lazy_state g_lazy;

/* EMU_LAZY: 0 off, 1 behind the host, 2 also other streams ahead. */
int lazy_level() {
    static const int level = getenv("EMU_LAZY") ? atoi(getenv("EMU_LAZY")) : 0;
    return level;
}

std::deque<queued> &queue_of(cudaStream_t s) {
    auto it = g_lazy.queues.find(s);
    if (it != g_lazy.queues.end()) return it->second;
    if (!s) g_lazy.streams.insert(g_lazy.streams.begin(), {s, false});
    return g_lazy.queues[s];
}

uint64_t push(cudaStream_t s, std::function<bool()> work, record_at after) {
    const uint64_t seq = g_lazy.next_seq++;
    queue_of(s).push_back(queued{seq, std::move(work), after.stream, after.seq});
    return seq;
}

/* Runs s's queue up to and including the work numbered `last`; false when
 * it stalled before (the stalled work, or a record it waits for, stays). */
bool run_until(cudaStream_t s, uint64_t last) {
    std::deque<queued> &q = queue_of(s);
    while (!q.empty() && q.front().seq <= last) {
        queued w = std::move(q.front());
        q.pop_front();
        bool ran = !w.after_seq || run_until(w.after_stream, w.after_seq);
        if (ran && w.work) {
            g_lazy.draining++;
            ran = w.work();
            g_lazy.draining--;
        }
        if (!ran) {
            queue_of(s).push_front(std::move(w));
            return false;
        }
    }
    return true;
}

bool run_all(cudaStream_t s) { return run_until(s, UINT64_MAX); }

/* A synchronizing call: tries `reached` until it is true, as the host waits
 * for a GPU; stalled work that never runs ends the program (EMU_STALL_S). */
void wait_until(const char *call, const std::function<bool()> &reached) {
    static const double limit = getenv("EMU_STALL_S") && atof(getenv("EMU_STALL_S")) > 0 ? atof(getenv("EMU_STALL_S")) : 300.0;
    const double t0 = emu_now_s();
    while (!reached()) {
        if (emu_now_s() - t0 > limit) {
            emu_error("%s: the stream work it waits for stalled for %.0f s (EMU_STALL_S): a collective whose peers never "
                      "came; a GPU would hang here", call, limit);
            exit(3);
        }
        struct timespec nap = {0, 200000L};
        nanosleep(&nap, nullptr);
    }
}

/* Whether nothing holds w back: the record it waits for has run. */
bool unblocked(const queued &w) {
    if (!w.after_seq) return true;
    const std::deque<queued> &q = queue_of(w.after_stream);
    return q.empty() || q.front().seq > w.after_seq;
}

/* EMU_LAZY=2, before the host waits for `target`: every other stream runs
 * as far as its waits allow, so work that should wait for the target's but
 * does not runs first, as another stream of a GPU may. */
void run_others_ahead(cudaStream_t target) {
    if (lazy_level() < 2) return;
    for (bool moved = true; moved;) {
        moved = false;
        for (auto &kv : g_lazy.queues) {
            if (kv.first == target) continue;
            std::deque<queued> &q = kv.second;
            while (!q.empty() && unblocked(q.front()) && run_until(kv.first, q.front().seq)) moved = true;
        }
    }
}

} // namespace

namespace emu {

bool lazy_active() { return emu_lazy_active(); }

bool lazy_take(cudaStream_t s, std::function<void()> work) {
    return emu_lazy_take_until(s, [work] {
        work();
        return true;
    });
}

} // namespace emu

bool emu_lazy_take_until(cudaStream_t s, std::function<bool()> attempt) {
    if (!emu_lazy_active()) return false;
    push(s, std::move(attempt), record_at{nullptr, 0});
    return true;
}

bool emu_lazy_active() { return lazy_level() > 0 && g_lazy.draining == 0; }

void emu_lazy_stream_created(cudaStream_t s, bool nonblocking) {
    g_lazy.streams.push_back({s, nonblocking});
}

void emu_lazy_stream_destroyed(cudaStream_t s) {
    wait_until("cudaStreamDestroy", [s] { return run_all(s); }); /* its work still runs on the device */
    g_lazy.queues.erase(s);
    auto &v = g_lazy.streams;
    v.erase(std::remove_if(v.begin(), v.end(), [s](const lazy_state::known_stream &k) { return k.s == s; }), v.end());
}

void emu_lazy_record(cudaEvent_t e, cudaStream_t s, std::function<void()> mark) {
    const uint64_t seq = g_lazy.next_seq; /* the number push gives it */
    push(s,
         [e, seq, mark] {
             mark();
             auto it = g_lazy.records.find(e);
             if (it != g_lazy.records.end() && it->second.seq == seq) g_lazy.records.erase(it);
             return true;
         },
         record_at{nullptr, 0});
    g_lazy.records[e] = record_at{s, seq};
}

void emu_lazy_wait(cudaStream_t s, cudaEvent_t e) {
    auto it = g_lazy.records.find(e);
    if (it == g_lazy.records.end()) return; /* its record has run (or there is none): nothing to wait for */
    push(s, nullptr, it->second);
}

bool emu_lazy_event_pending(cudaEvent_t e) {
    auto it = g_lazy.records.find(e);
    if (it == g_lazy.records.end()) return false;
    const record_at at = it->second;
    run_others_ahead(at.stream);
    run_until(at.stream, at.seq);
    return true;
}

bool emu_lazy_event_queued(cudaEvent_t e) { return g_lazy.records.count(e) != 0; }

void emu_lazy_event_wait(cudaEvent_t e, const char *call) {
    wait_until(call, [e] {
        emu_lazy_event_pending(e);
        return !emu_lazy_event_queued(e);
    });
}

void emu_lazy_event_destroyed(cudaEvent_t e) {
    emu_lazy_event_wait(e, "cudaEventDestroy"); /* the record runs before its event is gone */
}

void emu_lazy_sync_stream(cudaStream_t s) {
    wait_until("cudaStreamSynchronize", [s] {
        run_others_ahead(s);
        return run_all(s);
    });
}

/* The newest streams first: work a stream forgot to wait for runs late. */
void emu_lazy_sync_device() {
    wait_until("a device-wide synchronization", [] {
        bool all = true;
        const std::vector<lazy_state::known_stream> order(g_lazy.streams.rbegin(), g_lazy.streams.rend());
        for (const auto &k : order) all = run_all(k.s) && all;
        for (auto &q : g_lazy.queues) all = run_all(q.first) && all;
        return all;
    });
}

void emu_lazy_sync_legacy() {
    wait_until("a synchronous copy or set", [] {
        run_others_ahead(nullptr);
        bool all = run_all(nullptr);
        const std::vector<lazy_state::known_stream> known = g_lazy.streams; /* running may add the legacy stream */
        for (const auto &k : known)
            if (!k.nonblocking) all = run_all(k.s) && all;
        return all;
    });
}

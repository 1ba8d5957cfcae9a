/* Emulated NCCL (tests/emu/include/nccl.h). A communicator of one rank
 * leaves its data or copies it from send to receive buffer: a
 * cudaMemcpyAsync on the stream, so it runs in stream order (and is
 * recorded during a capture) and the emulator checks its ranges. The ranks
 * of a larger communicator are processes (each its own emulated device,
 * EMU_DEVICES of them to choose from) that meet in a folder named by the
 * unique id (emu_rendezvous.h): a collective is stream work (run at once,
 * or when the lazy device reaches it) that posts this rank's input, waits
 * for every rank's, and writes its result, reductions in rank order with
 * float32 sums rounded once (as the shm communicator), MAX as fmaxf (a NaN
 * loses, as NCCL's). So a collective waits for its peers where a GPU's
 * would: on the eager device inside the call (a rank that never comes is
 * an asynchronous ncclRemoteError after EMU_NCCL_TIMEOUT_S), on the lazy
 * one by stalling its stream until they come. Two ranks on one device are
 * refused at creation, as NCCL refuses them. Each call checks its
 * communicator, types and device pointers as NCCL would refuse them.
 * Creation in nonblocking mode reports ncclInProgress once, so the
 * caller's polling of the state runs.
 *
 * During a stream capture a collective is a node of the graph (on a
 * stream that joined the capture), which each launch runs anew, meeting
 * the peers' launches of their graphs (NCCL's rule: every rank captures the
 * same collectives and launches the graph that holds them).
 *
 * Groups (ncclGroupStart ... ncclGroupEnd, nested as NCCL allows): a
 * collective inside one is checked and kept; the outermost end runs the
 * kept ones in order, as NCCL enqueues a group's kernel only there. What a
 * GPU would punish silently is an error here: an event recorded on the
 * stream of a kept collective before the end (it would complete before the
 * collective ran), more than 2048 collectives in one group (the limit NCCL
 * 2.9 to 2.11 documented), an end without a start. On a nonblocking
 * communicator the end reports ncclInProgress, and until ncclCommGetAsyncError
 * has reported the state settled, an event recorded on the group's streams
 * is an error too (NCCL's rule: nothing on its streams before).
 *
 * A second communicator of several ranks on the device while the first
 * lives is an error unless NCCL_LAUNCH_ORDER_IMPLICIT=1: NCCL's guide says
 * that collectives of two communicators in flight on one device may
 * deadlock unless their order is serialized, which NCCL 2.26 and later do
 * in the host's launch order with that setting. */
#include <math.h>
#include <nccl.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "emu_internal.h"
#include "emu_nccl_internal.h"
#include "emu_rendezvous.h"

namespace {

/* The group under way and the streams of nonblocking group ends not yet
 * seen settled: test infrastructure, one per process, as the emulator runs
 * one host thread. `last` is the message of a creation that made no
 * communicator (ncclGetLastError(NULL)). */
struct group_state {
    int depth = 0;
    std::vector<collective> kept;
    std::vector<std::pair<ncclComm_t, cudaStream_t>> launching;
    char last[512] = {0};
    int live_multi_rank = 0; /* communicators of several ranks created and not yet destroyed or aborted */
};
group_state g_group;

const size_t GROUP_MAX_OPS = 2048;

/* Checks every collective needs; ncclSuccess or why not. */
ncclResult_t check(const collective &c) {
    ncclComm_t comm = c.comm;
    if (!comm || comm->aborted) {
        emu_error("%s on %s communicator", c.call, comm ? "an aborted" : "a NULL");
        return ncclInvalidArgument;
    }
    if (comm->in_progress) {
        emu_error("%s while the nonblocking communicator's last operation (creation or group end) is in progress: NCCL's rule "
                  "is to poll ncclCommGetAsyncError until it is not", c.call);
        return ncclInvalidUsage;
    }
    if (!emu_nccl_type_bytes(c.type)) {
        snprintf(comm->last, sizeof comm->last, "%s: unknown data type %d", c.call, (int)c.type);
        return ncclInvalidArgument;
    }
    const size_t sb = emu_nccl_send_bytes(c), rb = emu_nccl_recv_bytes(c);
    if ((sb && !emu_is_device(c.src)) || (rb && !emu_is_device(c.dst))) {
        emu_error("%s: a buffer is not device memory (NCCL needs device buffers)", c.call);
        return ncclInvalidArgument;
    }
    if (comm->nranks > 1 && ((sb && !emu_check_device_range(c.src, sb, c.call)) || (rb && !emu_check_device_range(c.dst, rb, c.call))))
        return ncclInvalidArgument;
    const bool reduces = c.kind == ALL_REDUCE || c.kind == REDUCE_SCATTER;
    if (reduces && c.op != ncclSum && !(c.kind == ALL_REDUCE && c.op == ncclMax)) return ncclInvalidArgument;
    if (reduces && c.type != ncclFloat && c.type != ncclBfloat16) return ncclInvalidArgument;
    if (c.kind == BROADCAST && (c.root < 0 || c.root >= comm->nranks)) return ncclInvalidArgument;
    return ncclSuccess;
}

/* A checked collective's work on its stream. */
ncclResult_t run(const collective &c) {
    if (emu_capture_has(c.stream)) emu::capture_hold(c.comm);
    if (c.comm->nranks == 1) {
        const size_t bytes = c.count * emu_nccl_type_bytes(c.type);
        if (!bytes || c.dst == c.src) return ncclSuccess;
        return cudaMemcpyAsync(c.dst, c.src, bytes, cudaMemcpyDeviceToDevice, c.stream) == cudaSuccess ? ncclSuccess
                                                                                                       : ncclUnhandledCudaError;
    }
    if (emu::capturing(c.stream)) emu_nccl_capture_among_ranks(c);
    else emu_nccl_among_ranks(c);
    return ncclSuccess;
}

/* A collective's work now, or kept by the open group. */
ncclResult_t run_or_keep(const collective &c) {
    const ncclResult_t r = check(c);
    if (r != ncclSuccess) return r;
    if (g_group.depth == 0) return run(c);
    if (g_group.kept.size() >= GROUP_MAX_OPS) {
        emu_error("%s: more than %zu collectives in one NCCL group (the limit NCCL 2.9 to 2.11 documented)", c.call, GROUP_MAX_OPS);
        return ncclInvalidUsage;
    }
    g_group.kept.push_back(c);
    return ncclSuccess;
}

void forget_launching(ncclComm_t comm) {
    auto &l = g_group.launching;
    l.erase(std::remove_if(l.begin(), l.end(), [comm](const std::pair<ncclComm_t, cudaStream_t> &x) { return x.first == comm; }),
            l.end());
}

} // namespace

bool emu_nccl_event_too_early(cudaStream_t s, const char **why) {
    for (const collective &k : g_group.kept)
        if (k.stream == s) {
            *why = "between ncclGroupStart and ncclGroupEnd, after a collective of the group on it (NCCL enqueues the group's "
                   "kernel at ncclGroupEnd)";
            return true;
        }
    for (const auto &l : g_group.launching)
        if (l.second == s) {
            *why = "while the nonblocking ncclGroupEnd of its collectives is in progress (poll ncclCommGetAsyncError until it "
                   "is not, NCCL's rule)";
            return true;
        }
    return false;
}

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    std::string why;
    const std::string dir = emu_rendezvous_name(&why);
    if (dir.empty() || dir.size() + 9 >= sizeof id->internal) {
        emu_error("ncclGetUniqueId: %s", dir.empty() ? why.c_str() : "TMPDIR is too long for a unique id");
        return ncclSystemError;
    }
    snprintf(id->internal, sizeof id->internal, "emu-nccl:%s", dir.c_str());
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config) {
    *comm = nullptr;
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        snprintf(g_group.last, sizeof g_group.last, "rank %d of %d ranks", rank, nranks);
        return ncclInvalidArgument;
    }
    emu_nccl_comm *c = new emu_nccl_comm;
    c->blocking = !config || config->blocking;
    c->nranks = nranks;
    c->rank = rank;
    if (nranks > 1) {
        const ncclResult_t r = emu_nccl_meet(c, id, g_group.last, sizeof g_group.last);
        if (r != ncclSuccess) {
            delete c;
            return r;
        }
        const char *order = getenv("NCCL_LAUNCH_ORDER_IMPLICIT");
        if (g_group.live_multi_rank > 0 && !(order && strcmp(order, "1") == 0))
            emu_error("ncclCommInitRankConfig: a second communicator of several ranks on this device without "
                      "NCCL_LAUNCH_ORDER_IMPLICIT=1: collectives of the two in flight together may deadlock (NCCL's guide, "
                      "\"Using multiple NCCL communicators concurrently\")");
        g_group.live_multi_rank++;
    }
    c->in_progress = !c->blocking;
    *comm = c;
    return c->in_progress ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
    if (!comm) return ncclInvalidArgument;
    if (comm->async_error != ncclSuccess) {
        *state = comm->async_error;
        return ncclSuccess;
    }
    *state = comm->in_progress ? ncclInProgress : ncclSuccess;
    if (!comm->in_progress) forget_launching(comm); /* seen settled: its streams may be used */
    comm->in_progress = 0;                          /* done by the next look */
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return comm ? ncclSuccess : ncclInvalidArgument; }

/* NCCL 2.26 and later wait in ncclCommDestroy and ncclCommAbort until no
 * CUDA graph holds the communicator's captured collectives: with one alive,
 * they never return. An error here. */
static bool held_by_a_graph(ncclComm_t comm, const char *call) {
    const int n = emu_graph_holds(comm);
    if (n > 0)
        emu_error("%s while %d CUDA graph(s) hold its captured collectives: NCCL 2.26 and later wait for them to be destroyed, "
                  "so this call would never return (destroy the graphs first)", call, n);
    return n > 0;
}

/* The end of a communicator of several ranks (destroyed or aborted, once). */
static void retire(ncclComm_t comm) {
    if (!comm->aborted) g_group.live_multi_rank--;
    comm->aborted = 1;
}

/* A communicator of several ranks stays allocated: the lazy device may
 * still hold its work, which then finds it aborted and does nothing. */
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclInvalidArgument;
    if (held_by_a_graph(comm, "ncclCommDestroy")) return ncclInvalidUsage;
    forget_launching(comm);
    if (comm->nranks == 1) {
        delete comm;
        return ncclSuccess;
    }
    if (!comm->aborted) {
        cudaDeviceSynchronize(); /* its collectives still queued run first, as NCCL's destroy waits for them */
        emu_rendezvous_leave(&comm->meet, comm->async_error == ncclSuccess);
    }
    retire(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclInvalidArgument;
    if (held_by_a_graph(comm, "ncclCommAbort")) return ncclInvalidUsage;
    if (comm->nranks == 1) return ncclCommDestroy(comm); /* nothing in flight to end */
    forget_launching(comm);
    emu_rendezvous_leave(&comm->meet, false);
    retire(comm);
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclRemoteError: return "remote process exited or there was a network error";
    default: return "internal error";
    }
}

const char *ncclGetLastError(ncclComm_t comm) { return comm ? comm->last : g_group.last; }

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t s) {
    return run_or_keep(collective{comm, s, ALL_REDUCE, "ncclAllReduce", recv, send, count, t, op, 0});
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t s) {
    return run_or_keep(collective{comm, s, REDUCE_SCATTER, "ncclReduceScatter", recv, send, recvcount, t, op, 0});
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t, ncclComm_t comm, cudaStream_t s) {
    return run_or_keep(collective{comm, s, ALL_GATHER, "ncclAllGather", recv, send, sendcount, t, ncclSum, 0});
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t s) {
    return run_or_keep(collective{comm, s, BROADCAST, "ncclBroadcast", recv, send, count, t, ncclSum, root});
}

ncclResult_t ncclGroupStart(void) {
    g_group.depth++;
    return ncclSuccess;
}

/* The outermost end runs the kept collectives in order; a nonblocking
 * communicator among them is left in progress (and its streams with it)
 * until ncclCommGetAsyncError has looked. */
ncclResult_t ncclGroupEnd(void) {
    if (g_group.depth == 0) {
        emu_error("ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--g_group.depth > 0) return ncclSuccess;
    std::vector<collective> kept;
    kept.swap(g_group.kept);
    ncclResult_t res = ncclSuccess, ran = ncclSuccess;
    for (const collective &k : kept) {
        if (ran == ncclSuccess) ran = run(k);
        if (k.comm->blocking) continue;
        k.comm->in_progress = 1;
        g_group.launching.emplace_back(k.comm, k.stream);
        res = ncclInProgress;
    }
    return ran != ncclSuccess ? ran : res;
}

} // extern "C"

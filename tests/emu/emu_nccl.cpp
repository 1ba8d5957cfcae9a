/* Emulated NCCL for communicators of one rank (tests/emu/include/nccl.h).
 * A collective of one rank leaves its data or copies it from send to
 * receive buffer: a cudaMemcpyAsync on the stream, so it runs in stream
 * order (and is recorded during a capture) and the emulator checks its
 * ranges. Each call checks its communicator, types and device pointers as
 * NCCL would refuse them. Creation in nonblocking mode reports
 * ncclInProgress once, so the caller's polling of the state runs.
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
 * is an error too (NCCL's rule: nothing on its streams before). */
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "emu_internal.h"

struct emu_nccl_comm {
    int in_progress; /* nonblocking creation or group end: reported once by ncclCommGetAsyncError */
    int aborted;
    int blocking;
    char last[256];
};

namespace {

/* A collective kept by the open group: its copy on its stream. */
struct kept_collective {
    ncclComm_t comm;
    cudaStream_t stream;
    void *dst;
    const void *src;
    size_t bytes;
};

/* The group under way and the streams of nonblocking group ends not yet
 * seen settled: test infrastructure, one per process, as the emulator runs
 * one host thread. */
struct group_state {
    int depth = 0;
    std::vector<kept_collective> kept;
    std::vector<std::pair<ncclComm_t, cudaStream_t>> launching;
};
group_state g_group;

const size_t GROUP_MAX_OPS = 2048;

size_t type_bytes(ncclDataType_t t) {
    switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclFloat: return 4;
    }
    return 0;
}

/* Checks common to every collective; ncclSuccess or why not. */
ncclResult_t check(ncclComm_t comm, ncclDataType_t t, const void *send, void *recv, size_t send_bytes, size_t recv_bytes,
                   const char *call) {
    if (!comm || comm->aborted) {
        emu_error("%s on %s communicator", call, comm ? "an aborted" : "a NULL");
        return ncclInvalidArgument;
    }
    if (comm->in_progress) {
        emu_error("%s while the nonblocking communicator's last operation (creation or group end) is in progress: NCCL's rule "
                  "is to poll ncclCommGetAsyncError until it is not", call);
        return ncclInvalidUsage;
    }
    if (!type_bytes(t)) {
        snprintf(comm->last, sizeof comm->last, "%s: unknown data type %d", call, (int)t);
        return ncclInvalidArgument;
    }
    if ((send_bytes && !emu_is_device(send)) || (recv_bytes && !emu_is_device(recv))) {
        emu_error("%s: a buffer is not device memory (NCCL needs device buffers)", call);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

ncclResult_t copy_on(cudaStream_t s, void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return ncclSuccess;
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess ? ncclSuccess
                                                                                           : ncclUnhandledCudaError;
}

/* A checked collective's work: now, or kept by the open group. */
ncclResult_t run_or_keep(ncclComm_t comm, cudaStream_t s, void *dst, const void *src, size_t bytes, const char *call) {
    if (g_group.depth == 0) return copy_on(s, dst, src, bytes);
    if (g_group.kept.size() >= GROUP_MAX_OPS) {
        emu_error("%s: more than %zu collectives in one NCCL group (the limit NCCL 2.9 to 2.11 documented)", call, GROUP_MAX_OPS);
        return ncclInvalidUsage;
    }
    g_group.kept.push_back(kept_collective{comm, s, dst, src, bytes});
    return ncclSuccess;
}

void forget_launching(ncclComm_t comm) {
    auto &l = g_group.launching;
    l.erase(std::remove_if(l.begin(), l.end(), [comm](const std::pair<ncclComm_t, cudaStream_t> &x) { return x.first == comm; }),
            l.end());
}

} // namespace

bool emu_nccl_event_too_early(cudaStream_t s, const char **why) {
    for (const kept_collective &k : g_group.kept)
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
    memcpy(id->internal, "emu-nccl", 8);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config) {
    (void)id;
    *comm = nullptr;
    if (nranks != 1 || rank != 0) {
        emu_error("ncclCommInitRankConfig: %d ranks (rank %d): the emulation has communicators of one rank only", nranks, rank);
        return ncclInvalidUsage;
    }
    const int blocking = !config || config->blocking;
    *comm = new emu_nccl_comm{!blocking, 0, blocking, {0}};
    return (*comm)->in_progress ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
    if (!comm) return ncclInvalidArgument;
    *state = comm->in_progress ? ncclInProgress : ncclSuccess;
    if (!comm->in_progress) forget_launching(comm); /* seen settled: its streams may be used */
    comm->in_progress = 0;                          /* done by the next look */
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return comm ? ncclSuccess : ncclInvalidArgument; }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    forget_launching(comm);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); /* nothing in flight to end */ }

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    default: return "internal error";
    }
}

const char *ncclGetLastError(ncclComm_t comm) { return comm ? comm->last : ""; }

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t s) {
    const size_t bytes = count * type_bytes(t);
    ncclResult_t r = check(comm, t, send, recv, bytes, bytes, "ncclAllReduce");
    if (r == ncclSuccess && op != ncclSum && op != ncclMax) r = ncclInvalidArgument;
    return r == ncclSuccess ? run_or_keep(comm, s, recv, send, bytes, "ncclAllReduce") : r;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t s) {
    const size_t bytes = recvcount * type_bytes(t);
    ncclResult_t r = check(comm, t, send, recv, bytes, bytes, "ncclReduceScatter");
    if (r == ncclSuccess && op != ncclSum) r = ncclInvalidArgument;
    return r == ncclSuccess ? run_or_keep(comm, s, recv, send, bytes, "ncclReduceScatter") : r;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t, ncclComm_t comm, cudaStream_t s) {
    const size_t bytes = sendcount * type_bytes(t);
    const ncclResult_t r = check(comm, t, send, recv, bytes, bytes, "ncclAllGather");
    return r == ncclSuccess ? run_or_keep(comm, s, recv, send, bytes, "ncclAllGather") : r;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t s) {
    const size_t bytes = count * type_bytes(t);
    ncclResult_t r = check(comm, t, send, recv, bytes, bytes, "ncclBroadcast");
    if (r == ncclSuccess && root != 0) r = ncclInvalidArgument;
    return r == ncclSuccess ? run_or_keep(comm, s, recv, send, bytes, "ncclBroadcast") : r;
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
    std::vector<kept_collective> kept;
    kept.swap(g_group.kept);
    ncclResult_t res = ncclSuccess, copied = ncclSuccess;
    for (const kept_collective &k : kept) {
        if (copied == ncclSuccess) copied = copy_on(k.stream, k.dst, k.src, k.bytes);
        if (k.comm->blocking) continue;
        k.comm->in_progress = 1;
        g_group.launching.emplace_back(k.comm, k.stream);
        res = ncclInProgress;
    }
    return copied != ncclSuccess ? copied : res;
}

} // extern "C"

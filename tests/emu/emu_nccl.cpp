/* Emulated NCCL for communicators of one rank (tests/emu/include/nccl.h).
 * A collective of one rank leaves its data or copies it from send to
 * receive buffer: a cudaMemcpyAsync on the stream, so it runs in stream
 * order (and is recorded during a capture) and the emulator checks its
 * ranges. Each call checks its communicator, types and device pointers as
 * NCCL would refuse them. Creation in nonblocking mode reports
 * ncclInProgress once, so the caller's polling of the state runs. */
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "emu_internal.h"

struct emu_nccl_comm {
    int in_progress; /* nonblocking creation: reported once by ncclCommGetAsyncError */
    int aborted;
    char last[256];
};

namespace {

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
        emu_error("%s before the nonblocking communicator's creation was seen to complete (NCCL's rule)", call);
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

} // namespace

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
    *comm = new emu_nccl_comm{config && !config->blocking, 0, {0}};
    return (*comm)->in_progress ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
    if (!comm) return ncclInvalidArgument;
    *state = comm->in_progress ? ncclInProgress : ncclSuccess;
    comm->in_progress = 0; /* done by the next look */
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return comm ? ncclSuccess : ncclInvalidArgument; }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
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
    return r == ncclSuccess ? copy_on(s, recv, send, bytes) : r;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t s) {
    const size_t bytes = recvcount * type_bytes(t);
    ncclResult_t r = check(comm, t, send, recv, bytes, bytes, "ncclReduceScatter");
    if (r == ncclSuccess && op != ncclSum) r = ncclInvalidArgument;
    return r == ncclSuccess ? copy_on(s, recv, send, bytes) : r;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t, ncclComm_t comm, cudaStream_t s) {
    const size_t bytes = sendcount * type_bytes(t);
    const ncclResult_t r = check(comm, t, send, recv, bytes, bytes, "ncclAllGather");
    return r == ncclSuccess ? copy_on(s, recv, send, bytes) : r;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t s) {
    const size_t bytes = count * type_bytes(t);
    ncclResult_t r = check(comm, t, send, recv, bytes, bytes, "ncclBroadcast");
    if (r == ncclSuccess && root != 0) r = ncclInvalidArgument;
    return r == ncclSuccess ? copy_on(s, recv, send, bytes) : r;
}

} // extern "C"

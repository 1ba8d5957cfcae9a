/* What emu_nccl.cpp (the calls, their checks, groups) and emu_nccl_ranks.cpp
 * (collectives among ranks that are processes) share. Test infrastructure. */
#ifndef EMU_NCCL_INTERNAL_H
#define EMU_NCCL_INTERNAL_H

#include <nccl.h>
#include <stddef.h>

#include "emu_rendezvous.h"

struct emu_nccl_comm {
    int in_progress = 0; /* nonblocking creation or group end: reported once by ncclCommGetAsyncError */
    int aborted = 0;
    int blocking = 1;
    int nranks = 1, rank = 0;
    emu_rendezvous meet;                  /* more than one rank: where they exchange */
    ncclResult_t async_error = ncclSuccess; /* a collective that failed on the stream (a peer that never came) */
    char last[512] = {0};
};

enum coll_kind { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST };

/* One checked collective: `count` elements per rank (all_reduce's and
 * broadcast's count, reduce_scatter's recvcount, all_gather's sendcount). */
struct collective {
    ncclComm_t comm;
    cudaStream_t stream;
    coll_kind kind;
    const char *call;
    void *dst;
    const void *src;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;
};

size_t emu_nccl_type_bytes(ncclDataType_t t);
/* Bytes this rank sends and receives. */
size_t emu_nccl_send_bytes(const collective &c);
size_t emu_nccl_recv_bytes(const collective &c);

/* A checked collective of several ranks, as stream work: on the lazy device
 * it stalls its stream until every peer's input is there; on the eager one
 * it runs now, waiting for them (EMU_NCCL_TIMEOUT_S). */
void emu_nccl_among_ranks(const collective &c);
/* The same as a node of the graph being captured on c.stream: each launch
 * runs the collective anew (a new exchange with the peers' launches). */
void emu_nccl_capture_among_ranks(const collective &c);
/* Joins the other ranks of a new communicator (nranks > 1); on failure the
 * message goes to last. */
ncclResult_t emu_nccl_meet(ncclComm_t comm, const ncclUniqueId &id, char *last, size_t cap);

#endif

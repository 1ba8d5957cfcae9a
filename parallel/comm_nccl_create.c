/* comm_nccl: creation (the rules are in comm_nccl.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/bootstrap.h"
#include "parallel/comm_nccl_impl.h"
#include "parallel/group.h"

_Static_assert(sizeof(ncclUniqueId) <= GROUP_BLOB_MAX, "the NCCL id travels as the group handshake's blob");

/* The stream and barrier buffer of a group that uses NCCL. */
static int make_cuda_parts(nccl_impl *s, const char *name, tg_err *e) {
    cudaError_t err = cudaGetDevice(&s->device);
    if (err == cudaSuccess) err = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (err == cudaSuccess) err = cudaEventCreateWithFlags(&s->tail, cudaEventDisableTiming);
    if (err == cudaSuccess) err = cudaMalloc((void **)&s->barrier_buf, sizeof(float));
    if (err == cudaSuccess) err = cudaMemsetAsync(s->barrier_buf, 0, sizeof(float), s->stream);
    if (err != cudaSuccess)
        return tg_fail(e, "group %s: setting up the NCCL communicator's stream and buffer: %s (%s)", name,
                       cudaGetErrorName(err), cudaGetErrorString(err));
    return 0;
}

/* Joins the NCCL communicator, bounded by timeout_s.
 * TP and DP communicators share a device and have collectives in flight
 * together (a DP bucket's reduction beside the backward pass's TP
 * collectives). NCCL's guide warns that two communicators' kernels may then
 * deadlock unless their order is serialized; NCCL 2.26 and later keep them
 * in the host's launch order, overlapping still, under
 * NCCL_LAUNCH_ORDER_IMPLICIT=1. That order is the same on every rank here:
 * one host thread starts the collectives in the model's order, and each
 * call is enqueued before the next starts (nccl_enqueued). Set before the
 * first communicator, unless the user set it; older NCCL ignores it. */
static int join_nccl(nccl_impl *s, const char *name, int size, int index, ncclUniqueId id, tg_err *e) {
    setenv("NCCL_LAUNCH_ORDER_IMPLICIT", "1", 0);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t nc = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&nc, size, id, index, &config);
    if (r == ncclInProgress && nc) r = nccl_settle(nc, comm_clock() + s->timeout_s);
    if (r == ncclSuccess && nc) {
        s->nc = nc;
        return 0;
    }
    char why[512];
    if (r == ncclInProgress)
        snprintf(why, sizeof why, "timed out after %g s (parallel.timeout_s); a member of the group may not have joined",
                 s->timeout_s);
    else
        nccl_why(why, sizeof why, nc, r == ncclSuccess ? ncclInternalError : r);
    if (nc) ncclCommAbort(nc);
    return tg_fail(e, "group %s: ncclCommInitRankConfig (member %d of %d on CUDA device %d): %s", name, index, size, s->device,
                   why);
}

/* The group handshake (parallel/group.c) with the NCCL communicator's own
 * check; the first member of a group that uses NCCL makes its id, which id
 * receives on every member. */
static int nccl_handshake(bootstrap *bs, const group_spec *g, const comm_memory *mem, ncclUniqueId *id, tg_err *e) {
    tg_err mine = {{0}};
    memset(id, 0, sizeof *id);
    int bad = group_check_args(bs, g, &mine) != 0;
    if (!bad && (!mem || !mem->device))
        bad = tg_fail(&mine, "group %s: the NCCL communicator needs device buffers (a comm_memory with device = 1, from the "
                      "CUDA backend)", g->name);
    if (!bad && g->blob_name && g->index == 0) {
        ncclResult_t r = ncclGetUniqueId(id);
        if (r != ncclSuccess) {
            char why[512];
            nccl_why(why, sizeof why, NULL, r);
            bad = tg_fail(&mine, "group %s: ncclGetUniqueId: %s", g->name, why);
        }
    }
    return group_handshake(bs, g, bad, &mine, id, sizeof *id, e);
}

/* The impl of a group that uses NCCL, joined; NULL with the reason in mine. */
static nccl_impl *join(const group_spec *g, ncclUniqueId id, tg_err *mine) {
    nccl_impl *s = tg_calloc(1, sizeof *s, "NCCL communicator");
    s->timeout_s = g->timeout_s;
    s->device = -1;
    s->granks = tg_malloc((size_t)g->size * sizeof(int), "group ranks");
    memcpy(s->granks, g->ranks, (size_t)g->size * sizeof(int));
    if (make_cuda_parts(s, g->name, mine) || join_nccl(s, g->name, g->size, g->index, id, mine)) {
        s->broken = 1; /* abort, do not finalize */
        nccl_impl_free(g->name, s);
        return NULL;
    }
    return s;
}

/* comm_nccl_create; with nccl_at_size_1 a group of one rank also gets an
 * NCCL communicator (tests: the whole NCCL path on a single GPU). */
static comm *create(bootstrap *bs, const group_spec *g, const comm_memory *mem, int use_nccl, tg_err *e) {
    ncclUniqueId id;
    if (nccl_handshake(bs, g, mem, &id, e)) return NULL;
    /* groups that use NCCL join their communicator (the others have nothing
     * to do); everyone hears how it went */
    tg_err mine = {{0}};
    nccl_impl *s = use_nccl ? join(g, id, &mine) : NULL;
    if (group_agree(bs, use_nccl && !s, &mine, g->name, e)) {
        if (s) s->broken = 1; /* abort, do not finalize: some member has no communicator */
        nccl_impl_free(g->name, s);
        return NULL;
    }
    comm *c = use_nccl ? tg_calloc(1, sizeof *c, "communicator") : comm_null_create(g->name, 0, 1);
    if (!c) {
        tg_fail(e, "creating communicator %s: out of memory", g->name);
        return NULL;
    }
    comm_use_memory(c, mem);
    if (!use_nccl) return c;
    c->vt = &NCCL_VT;
    c->impl = s;
    c->device_timed = 1;
    snprintf(c->name, sizeof c->name, "%s", g->name);
    c->rank = g->index;
    c->size = g->size;
    return c;
}

comm *comm_nccl_create(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index,
                       const comm_memory *mem, double timeout_s, tg_err *e) {
    int use_nccl = group_size > 1;
    group_spec g = {name, group_ranks, group_size, my_index, timeout_s, 0, use_nccl ? "NCCL id" : NULL};
    return create(bs, &g, mem, use_nccl, e);
}

comm *comm_nccl_create_at_size_1(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index,
                                 const comm_memory *mem, double timeout_s, tg_err *e) {
    group_spec g = {name, group_ranks, group_size, my_index, timeout_s, 0, "NCCL id"};
    return create(bs, &g, mem, 1, e);
}

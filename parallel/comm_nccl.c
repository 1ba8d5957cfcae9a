/* NCCL communicator: the collectives of parallel/comm.h over device buffers,
 * one NCCL communicator per group (a TP group or a DP group).
 *
 * Creation is collective over the whole world, like comm_shm_create. Every
 * rank sends one record through the bootstrap: the communicator's name, its
 * group as it sees it and, from the first member of each group of more than
 * one rank, a fresh ncclUniqueId. Each rank checks that the members of its
 * group agree, takes the id from its group's first member and joins the NCCL
 * communicator (rank = its index in the group, on the CUDA device current at
 * creation). After each stage every rank's status goes through the bootstrap
 * again, so that a failure anywhere fails everywhere with the same message.
 * A group of one rank gets a comm_null (exact at size 1) moving its buffers
 * with `mem`; comm_nccl_create_at_size_1 gives it an NCCL communicator
 * instead, so the whole NCCL path runs on one GPU. The handshake is
 * parallel/group.c's; creation is in comm_nccl_create.c.
 *
 *
 * Ordering. The communicator runs NCCL on a stream of its own (non-blocking
 * with respect to the legacy default stream); each request has two events.
 * The start records `ready` on the compute stream (mem.stream) and makes
 * the comm stream wait for it, so NCCL reads what the compute stream wrote;
 * the NCCL call goes onto the comm stream and `done` is recorded after it;
 * the start then returns. Collectives started one after another run in that
 * order on the comm stream; kernels queued on the compute stream between a
 * start and its wait may run alongside the collective (they must leave its
 * buffers alone). Inside a group (comm_group_begin) the NCCL calls join one
 * NCCL group call and `done` is recorded at its end (comm_nccl_group.c).
 *
 * Waiting. comm_wait makes the compute stream wait for `done`, so later
 * kernels see the result, then waits on the host: first for `ready` (the
 * compute work queued before the start, which is not communication: that
 * wait is taken back out of c->seconds, see nccl_finish), then for `done`,
 * polling cudaEventQuery (yielding the CPU for the first 2 ms, then sleeping
 * 50 us between polls) and ncclCommGetAsyncError at every poll. So a peer
 * that died or never calls the collective becomes an error after timeout_s
 * (counted from `ready`), not a hang. Under deferred waits (comm_defer_waits:
 * a training step) the wait only makes the compute stream wait for `done`;
 * comm_settle then polls `tail`, recorded after every collective on the comm
 * stream (whose end is all of theirs), the same way.
 *
 * Nonblocking NCCL. The NCCL communicator is created with config.blocking = 0:
 * initialisation, the connection set-up NCCL does at the first collective of
 * each kind, and finalisation then never block inside NCCL's own socket
 * exchanges (which have no deadline); the calls return ncclInProgress and we
 * poll the communicator's state with our deadline. Before that state is
 * ncclSuccess nothing else is enqueued on the comm stream (NCCL's rule).
 * NCCL 2.23 and later run every call (each collective, each group's end) of
 * a nonblocking communicator on a thread of their own, created for it and
 * joined by the next ncclCommGetAsyncError (up to 2.21 only calls that set
 * up connections did): a host cost per collective launched op by op, which
 * a step replayed as a CUDA graph does not pay. A graph is captured in
 * thread-local mode, which lets that thread enqueue into the capture
 * (kernels/cuda/graph.cu). Untimed: nothing here has run on a GPU.
 *
 * Failure. A failing CUDA or NCCL call, an asynchronous NCCL error, a wait
 * beyond timeout_s or a bad argument inside a collective aborts the NCCL
 * communicator (ncclCommAbort, which also ends NCCL kernels still running;
 * the device's graphs go first, comm_memory.drop_graphs, as NCCL 2.26 and
 * later wait in the abort until no graph holds the communicator's
 * collectives) and marks the communicator broken: the message names the group, the
 * collective (kind, sequence number, count, type) and NCCL's or CUDA's text,
 * and every later call fails at once. Nothing here exits the process.
 * Buffers are checked with cudaPointerGetAttributes before each collective:
 * host buffers go through a device copy ("host buffers" below); device
 * memory of another device fails with a message saying so.
 *
 * Aliasing (the contract of parallel/comm.h):
 *   all_reduce is in place (NCCL's in-place form);
 *   reduce_scatter: out == in + rank*n is NCCL's in-place form; out disjoint
 *     from in is the plain form; out == in (rank > 0) reduces in place into
 *     in + rank*n, then copies that block to in[0, n) on the comm stream (the
 *     two blocks do not overlap as rank >= 1); the input is consumed anyway,
 *     but note that block `rank` of in is overwritten too. Other overlaps
 *     fail.
 *   all_gather: in == out + rank*n is NCCL's in-place form; in disjoint from
 *     out is the plain form; any other in that does not overlap block `rank`
 *     of out is first copied there (comm stream) and then gathered in place.
 *     Others fail.
 *
 * Numerics. NCCL's reduction order depends on its algorithm (ring, tree,
 * NVLS) and is not rank order: sums are in practice deterministic for a
 * given layout, size and NCCL version, and all_reduce leaves the same bits
 * on every member (tests/test_nccl.c checks it), but they are not bitwise
 * equal to comm_shm's. With two members a sum is one addition, correctly rounded in
 * fp32 and bf16 alike. With more, NCCL rounds bf16 partial sums to bf16 at
 * every step (not one rounding of a float32 sum, as comm.h says for the
 * host communicators). MAX uses fmaxf: a NaN loses to a number, unlike
 * comm_shm's MAX.
 *
 * Time accounting is the collectives' device time, from CUDA events on the
 * comm stream (comm_nccl_time.c), not the host's time inside the calls.
 * Byte accounting is the ring formula of comm.h (comm_ring_bytes_of with
 * the element size, comm_broadcast_bytes), carried by the request and
 * counted by comm_wait, as for comm_null and comm_shm. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm_nccl_impl.h"

static ncclDataType_t nccl_type(tg_dtype t) { return t == TG_BF16 ? ncclBfloat16 : ncclFloat; }

static int ranges_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + b_bytes && y < x + a_bytes;
}

/* A start that failed after taking its request gives it back. */
static comm_req *dropped(comm *c, comm_req *r) {
    comm_req_put(c, r);
    return NULL;
}

/* The last steps of every start: NCCL's call `res` enqueued, `done` after it. */
static comm_req *enqueued(comm *c, comm_req *r, const char *call, ncclResult_t res, tg_err *e) {
    if (nccl_enqueued(c, r, call, res, e) || nccl_mark_done(c, r, e)) return dropped(c, r);
    return r;
}

/* ---- the collectives on device buffers: starts -------------------------- */

static comm_req *nccl_all_reduce(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e) {
    nccl_impl *s = c->impl;
    char what[96];
    snprintf(what, sizeof what, "all_reduce(%s) #%llu of %zu %s", op == REDUCE_MAX ? "max" : "sum",
             (unsigned long long)++s->ops, n, tg_dtype_name(t));
    if (nccl_op_begin(c, what, e) || nccl_bad_dtype(c, what, t, e)) return NULL;
    if (op != REDUCE_SUM && op != REDUCE_MAX) {
        tg_fail(e, "group %s: %s: unknown reduction %d; the communicator is aborted", c->name, what, (int)op);
        nccl_give_up(c);
        return NULL;
    }
    comm_req *r = nccl_req_get(c, COLL_ALL_REDUCE, comm_ring_bytes_of(COLL_ALL_REDUCE, c->size, n, tg_dtype_bytes(t)), what, e);
    if (!r || n == 0) return r;
    if (nccl_check_buffer(c, what, "in/out", buf, e) || nccl_order_after_compute(c, r, e) || nccl_time_begin(c, what, e))
        return dropped(c, r);
    ncclResult_t res = ncclAllReduce(buf, buf, n, nccl_type(t), op == REDUCE_MAX ? ncclMax : ncclSum, s->nc, s->stream);
    return enqueued(c, r, "ncclAllReduce", res, e);
}

static comm_req *nccl_reduce_scatter(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    nccl_impl *s = c->impl;
    char what[96];
    snprintf(what, sizeof what, "reduce_scatter #%llu of %zu %s per rank", (unsigned long long)++s->ops, n, tg_dtype_name(t));
    if (nccl_op_begin(c, what, e) || nccl_bad_dtype(c, what, t, e)) return NULL;
    size_t es = tg_dtype_bytes(t), block = n * es, p = (size_t)c->size;
    char *mine = (char *)in + (size_t)c->rank * block; /* block `rank` of in: where the in-place form leaves the result */
    int in_place = (char *)out == mine, disjoint = !ranges_overlap(out, block, in, p * block);
    int via_block = !in_place && out == in; /* rank > 0 here */
    if (n > 0 && via_block &&
        nccl_refuse_in_group(c, what, "out == in needs a copy after the collective, which would run before the group's "
                                      "launch; use out == in + rank*n", e))
        return NULL;
    if (n > 0 && !in_place && !disjoint && !via_block) {
        tg_fail(e, "group %s: %s: out (%p) overlaps in (%p) but is neither in nor in + rank*n; the communicator is aborted",
                c->name, what, out, in);
        nccl_give_up(c);
        return NULL;
    }
    comm_req *r = nccl_req_get(c, COLL_REDUCE_SCATTER, comm_ring_bytes_of(COLL_REDUCE_SCATTER, c->size, n * p, es), what, e);
    if (!r || n == 0) return r;
    if (nccl_check_buffer(c, what, "in", in, e) || nccl_check_buffer(c, what, "out", out, e) ||
        nccl_order_after_compute(c, r, e) || nccl_time_begin(c, what, e))
        return dropped(c, r);
    ncclResult_t res = ncclReduceScatter(in, disjoint ? out : mine, n, nccl_type(t), ncclSum, s->nc, s->stream);
    if (nccl_enqueued(c, r, "ncclReduceScatter", res, e)) return dropped(c, r);
    if (via_block) {
        cudaError_t err = cudaMemcpyAsync(out, mine, block, cudaMemcpyDeviceToDevice, s->stream);
        if (err != cudaSuccess) {
            nccl_fail_cuda(c, what, "cudaMemcpyAsync(out, in + rank*n)", err, e);
            return dropped(c, r);
        }
    }
    return nccl_mark_done(c, r, e) ? dropped(c, r) : r;
}

static comm_req *nccl_all_gather(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    nccl_impl *s = c->impl;
    char what[96];
    snprintf(what, sizeof what, "all_gather #%llu of %zu %s per rank", (unsigned long long)++s->ops, n, tg_dtype_name(t));
    if (nccl_op_begin(c, what, e) || nccl_bad_dtype(c, what, t, e)) return NULL;
    size_t es = tg_dtype_bytes(t), block = n * es, p = (size_t)c->size;
    char *mine = (char *)out + (size_t)c->rank * block; /* block `rank` of out */
    int in_place = (const char *)in == mine, disjoint = !ranges_overlap(in, block, out, p * block);
    int via_block = !in_place && !disjoint && !ranges_overlap(in, block, mine, block);
    if (n > 0 && !in_place && !disjoint && !via_block) {
        tg_fail(e, "group %s: %s: in (%p) overlaps block %d of out (%p) without being it; the communicator is aborted", c->name,
                what, in, c->rank, out);
        nccl_give_up(c);
        return NULL;
    }
    comm_req *r = nccl_req_get(c, COLL_ALL_GATHER, comm_ring_bytes_of(COLL_ALL_GATHER, c->size, n * p, es), what, e);
    if (!r || n == 0) return r;
    if (nccl_check_buffer(c, what, "in", in, e) || nccl_check_buffer(c, what, "out", out, e) ||
        nccl_order_after_compute(c, r, e) || nccl_time_begin(c, what, e))
        return dropped(c, r);
    if (via_block) {
        cudaError_t err = cudaMemcpyAsync(mine, in, block, cudaMemcpyDeviceToDevice, s->stream);
        if (err != cudaSuccess) {
            nccl_fail_cuda(c, what, "cudaMemcpyAsync(out + rank*n, in)", err, e);
            return dropped(c, r);
        }
    }
    ncclResult_t res = ncclAllGather(disjoint ? in : mine, out, n, nccl_type(t), s->nc, s->stream);
    return enqueued(c, r, "ncclAllGather", res, e);
}

static comm_req *nccl_broadcast(comm *c, void *buf, size_t bytes, int root, tg_err *e) {
    nccl_impl *s = c->impl;
    char what[96];
    snprintf(what, sizeof what, "broadcast #%llu of %zu bytes from %d", (unsigned long long)++s->ops, bytes, root);
    if (nccl_op_begin(c, what, e)) return NULL;
    if (root < 0 || root >= c->size) {
        tg_fail(e, "group %s: %s: root %d is not a member index (group of %d); the communicator is aborted", c->name, what, root,
                c->size);
        nccl_give_up(c);
        return NULL;
    }
    comm_req *r = nccl_req_get(c, COLL_BROADCAST, comm_broadcast_bytes(c->size, c->rank, root, bytes), what, e);
    if (!r || bytes == 0) return r;
    if (nccl_check_buffer(c, what, "in/out", buf, e) || nccl_order_after_compute(c, r, e) || nccl_time_begin(c, what, e))
        return dropped(c, r);
    return enqueued(c, r, "ncclBroadcast", ncclBroadcast(buf, buf, bytes, ncclUint8, root, s->nc, s->stream), e);
}

/* The wait on the host: fails on a broken communicator (an earlier wait or
 * start gave up: this collective was aborted with it), else waits for what
 * the start enqueued (nothing for an empty one or a host buffer's, done
 * already). */
static int wait_on_host(comm *c, comm_req *r, tg_err *e) {
    nccl_impl *s = c->impl;
    nccl_req *q = r->impl;
    if (s->broken) {
        q->enqueued = 0;
        return tg_fail(e, "group %s: %s: the communicator is broken by an earlier failure", c->name, r->what);
    }
    return q->enqueued ? nccl_finish(c, r, e) : 0;
}

/* The wait: on the host, or under deferred waits only ordering the compute
 * stream after the collective (a broken communicator still fails here). */
static int nccl_wait(comm *c, comm_req *r, tg_err *e) {
    const nccl_impl *s = c->impl;
    const nccl_req *q = r->impl;
    if (c->defer_waits && q->enqueued && !s->broken) return nccl_order_compute_after(c, r, e);
    return wait_on_host(c, r, e);
}

/* A max all-reduce of one float that stays 0: returns when every member has
 * reached it (and this rank's compute stream has reached it). Not counted,
 * not timed (no span). */
static int nccl_barrier(comm *c, tg_err *e) {
    nccl_impl *s = c->impl;
    char what[64];
    snprintf(what, sizeof what, "barrier #%llu", (unsigned long long)++s->ops);
    if (nccl_op_begin(c, what, e)) return -1;
    comm_req *r = nccl_req_get(c, COLL_ALL_REDUCE, 0, what, e);
    if (!r) return -1;
    int rc = nccl_order_after_compute(c, r, e);
    if (!rc)
        rc = nccl_enqueued(c, r, "ncclAllReduce",
                           ncclAllReduce(s->barrier_buf, s->barrier_buf, 1, ncclFloat, ncclMax, s->nc, s->stream), e);
    if (!rc) rc = nccl_mark_done(c, r, e) || nccl_finish(c, r, e);
    comm_req_put(c, r);
    return rc ? -1 : 0;
}

/* ---- host buffers ---------------------------------------------------------
 * The trainer also reduces a few host values through its groups (the mean
 * loss, the gradient norm, peak memory, checkpoint tensors, sample logits).
 * NCCL reaches device memory only, so a collective with a host buffer runs
 * on a device copy in `stage` (grown to the largest such call, freed with
 * the communicator), in the in-place form, and copies the result back, all
 * within the start. */

static int is_host(const void *p) {
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged;
}

static void *stage_of(comm *c, size_t bytes, tg_err *e) {
    nccl_impl *s = c->impl;
    if (bytes <= s->stage_bytes) return s->stage;
    if (s->stage) cudaFree(s->stage);
    s->stage = NULL;
    s->stage_bytes = 0;
    cudaError_t err = cudaMalloc(&s->stage, bytes);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        tg_fail(e, "group %s: cannot allocate %zu device bytes to stage a host buffer: %s", c->name, bytes, cudaGetErrorString(err));
        return NULL;
    }
    s->stage_bytes = bytes;
    return s->stage;
}

/* A copy between a caller's buffer and the stage, on the compute stream:
 * after the kernels that wrote a device source, before the collective
 * (whose `ready` that stream records next) or after its wait (`done`). Not
 * cudaMemcpy: it runs on the legacy stream, which our non-blocking streams
 * do not wait for, and from pageable memory it returns before its DMA has
 * run, so the collective could read the stage before the bytes land. The
 * copy back waits (the caller reads it next); the compute stream then
 * holds nothing else, as the collective's wait has seen `ready` and `done`. */
static int stage_copy(comm *c, void *dst, const void *src, size_t bytes, int wait, tg_err *e) {
    cudaStream_t compute = (cudaStream_t)c->mem.stream;
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, compute);
    if (err == cudaSuccess && wait) err = cudaStreamSynchronize(compute);
    if (err == cudaSuccess) return 0;
    (void)cudaGetLastError();
    return tg_fail(e, "group %s: staging a host buffer: %s: %s", c->name, wait ? "copying the result back" : "copying it in",
                   cudaGetErrorString(err));
}

/* A host buffer inside a group or a CUDA graph capture: refused
 * (aborting), as its start must complete the collective to copy the result
 * back (and stages it with synchronous calls a capture refuses). */
static int host_in_group(comm *c, const char *call, tg_err *e) {
    if (c->capturing) {
        tg_fail(e, "group %s: %s inside a CUDA graph capture: a host buffer is staged through the device and needs the result "
                "within the start, which a graph cannot give; the communicator is aborted", c->name, call);
        return nccl_give_up(c);
    }
    return nccl_refuse_in_group(c, call, "a host buffer is staged through the device and needs the result within the start, "
                                         "before the group is launched; start it outside the group", e);
}

/* Completes a device request within the start (the host copy-back needs
 * the result now, deferred waits or not); the request then carries only its
 * byte count. */
static comm_req *finished(comm *c, comm_req *r, tg_err *e) {
    if (r && wait_on_host(c, r, e)) return dropped(c, r);
    return r;
}

static comm_req *any_all_reduce(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e) {
    const size_t bytes = n * tg_dtype_bytes(t);
    if (n == 0 || !is_host(buf)) return nccl_all_reduce(c, buf, n, t, op, e);
    if (host_in_group(c, "all_reduce of a host buffer", e)) return NULL;
    void *d = stage_of(c, bytes, e);
    if (!d || stage_copy(c, d, buf, bytes, 0, e)) return NULL;
    comm_req *r = finished(c, nccl_all_reduce(c, d, n, t, op, e), e);
    return r && stage_copy(c, buf, d, bytes, 1, e) ? dropped(c, r) : r;
}

static comm_req *any_reduce_scatter(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    const size_t block = n * tg_dtype_bytes(t), all = block * (size_t)c->size;
    if (n == 0 || (!is_host(out) && !is_host(in))) return nccl_reduce_scatter(c, out, in, n, t, e);
    if (host_in_group(c, "reduce_scatter of a host buffer", e)) return NULL;
    char *d = stage_of(c, all, e);
    if (!d || stage_copy(c, d, in, all, 0, e)) return NULL;
    char *mine = d + (size_t)c->rank * block;
    comm_req *r = finished(c, nccl_reduce_scatter(c, mine, d, n, t, e), e);
    return r && stage_copy(c, out, mine, block, 1, e) ? dropped(c, r) : r;
}

static comm_req *any_all_gather(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    const size_t block = n * tg_dtype_bytes(t), all = block * (size_t)c->size;
    if (n == 0 || (!is_host(out) && !is_host(in))) return nccl_all_gather(c, out, in, n, t, e);
    if (host_in_group(c, "all_gather of a host buffer", e)) return NULL;
    char *d = stage_of(c, all, e);
    if (!d) return NULL;
    char *mine = d + (size_t)c->rank * block;
    if (stage_copy(c, mine, in, block, 0, e)) return NULL;
    comm_req *r = finished(c, nccl_all_gather(c, d, mine, n, t, e), e);
    return r && stage_copy(c, out, d, all, 1, e) ? dropped(c, r) : r;
}

static comm_req *any_broadcast(comm *c, void *buf, size_t bytes, int root, tg_err *e) {
    if (bytes == 0 || !is_host(buf)) return nccl_broadcast(c, buf, bytes, root, e);
    if (host_in_group(c, "broadcast of a host buffer", e)) return NULL;
    void *d = stage_of(c, bytes, e);
    if (!d || stage_copy(c, d, buf, bytes, 0, e)) return NULL;
    comm_req *r = finished(c, nccl_broadcast(c, d, bytes, root, e), e);
    return r && stage_copy(c, buf, d, bytes, 1, e) ? dropped(c, r) : r;
}

/* Frees what the impl holds; the NCCL communicator is finalized (bounded by
 * timeout_s) and destroyed, or aborted when broken or when that fails.
 * Every rank should destroy its communicators in the same order. */
void nccl_impl_free(const char *name, nccl_impl *s) {
    if (!s) return;
    if (s->nc && !s->broken) {
        ncclResult_t r = ncclCommFinalize(s->nc);
        if (r == ncclInProgress) r = nccl_settle(s->nc, comm_clock() + s->timeout_s);
        if (r == ncclSuccess) {
            r = ncclCommDestroy(s->nc);
            if (r != ncclSuccess) fprintf(stderr, "comm_nccl: group %s: ncclCommDestroy: %s\n", name, ncclGetErrorString(r));
            s->nc = NULL;
        } else {
            fprintf(stderr, "comm_nccl: group %s: finalizing the NCCL communicator %s; aborting it\n", name,
                    r == ncclInProgress ? "timed out" : ncclGetErrorString(r));
            s->broken = 1;
        }
    }
    if (s->nc) ncclCommAbort(s->nc);
    s->nc = NULL;
    if (s->tail) cudaEventDestroy(s->tail);
    nccl_time_free(s);
    if (s->stream) cudaStreamDestroy(s->stream);
    if (s->barrier_buf) cudaFree(s->barrier_buf);
    if (s->stage) cudaFree(s->stage);
    free(s->granks);
    free(s);
}

static void nccl_destroy(comm *c) {
    comm_req_free_all(c, nccl_req_release);
    nccl_impl_free(c->name, c->impl);
    free(c);
}

const comm_vtable NCCL_VT = {any_all_reduce, any_reduce_scatter, any_all_gather, any_broadcast, nccl_wait, nccl_barrier,
                             nccl_destroy, nccl_settle_all, nccl_group_begin, nccl_group_end, nccl_capture_end, nccl_replayed};

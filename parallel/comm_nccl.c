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
 * with `mem`; comm_nccl_create_at_size_1 (tests, not in comm.h) gives it an
 * NCCL communicator instead, so the whole NCCL path runs on one GPU.
 *
 * Ordering. The communicator runs NCCL on a stream of its own (non-blocking
 * with respect to the legacy default stream) and keeps two events. Each
 * collective: `ready` is recorded on the compute stream (mem.stream) and the
 * comm stream waits for it, so NCCL reads what the compute stream wrote;
 * the NCCL call goes onto the comm stream; `done` is recorded there and the
 * compute stream waits for it, so later kernels see the result.
 *
 * Waiting. The host then waits, first for `ready` (the compute work queued
 * before the collective, which is not communication: that wait is taken
 * back out of c->seconds, see op_finish), then for `done`, polling
 * cudaEventQuery (yielding the CPU for the first 2 ms, then sleeping 50 us
 * between polls) and ncclCommGetAsyncError at every poll. So every
 * collective returns complete: its time is what the comm_* wrappers
 * measure, and a peer that died or never calls the collective becomes an
 * error after timeout_s (counted from `ready`), not a hang.
 * Overlapping communication with compute (returning before `done`) is a
 * later step; the two streams and events are already what it needs.
 *
 * Nonblocking NCCL. The NCCL communicator is created with config.blocking = 0:
 * initialisation, the connection set-up NCCL does at the first collective of
 * each kind, and finalisation then never block inside NCCL's own socket
 * exchanges (which have no deadline); the calls return ncclInProgress and we
 * poll the communicator's state with our deadline. Before that state is
 * ncclSuccess nothing else is enqueued on the comm stream (NCCL's rule). The
 * price is a helper thread NCCL starts per collective call (tens of us).
 *
 * Failure. A failing CUDA or NCCL call, an asynchronous NCCL error, a wait
 * beyond timeout_s or a bad argument inside a collective aborts the NCCL
 * communicator (ncclCommAbort, which also ends NCCL kernels still running)
 * and marks the communicator broken: the message names the group, the
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
 * Byte accounting is the ring formula of comm.h (comm_ring_bytes_of with
 * the element size, comm_broadcast_bytes), counted after each successful
 * collective exactly as comm_null and comm_shm count it. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parallel/bootstrap.h"
#include "parallel/comm.h"

#define NAME_MAX_LEN 31
#define MSG_LEN 300
#define SPIN_S 2e-3       /* poll with sched_yield for this long, then sleep */
#define NAP_NS 50000L     /* 50 us between polls after that */

typedef struct {
    ncclComm_t nc;           /* NULL once aborted */
    cudaStream_t stream;     /* where NCCL runs */
    cudaEvent_t ready, done; /* compute -> comm, comm -> compute */
    float *barrier_buf;      /* one float on the device, for barrier() */
    int device;              /* the CUDA device of nc */
    int *granks;             /* global ranks of the members */
    double timeout_s;
    double deadline;         /* of the current wait */
    uint64_t ops;            /* operations begun, for messages */
    int broken;
    void *stage;             /* device copy of host buffers (see "Host buffers"), grown on demand */
    size_t stage_bytes;
} nccl_impl;

/* ---- small helpers ------------------------------------------------------ */

/* One pause between polls: a young wait yields the CPU (collectives of a
 * few microseconds), an older one sleeps 50 us. */
static void poll_pause(double t0) {
    if (comm_clock() - t0 < SPIN_S) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, NAP_NS};
    nanosleep(&ts, NULL);
}

/* "<NCCL's name for r>: <NCCL's last message>" */
static void nccl_why(char *out, size_t cap, ncclComm_t nc, ncclResult_t r) {
    const char *last = ncclGetLastError(nc);
    if (last && last[0])
        snprintf(out, cap, "%s: %.400s", ncclGetErrorString(r), last);
    else
        snprintf(out, cap, "%s", ncclGetErrorString(r));
}

static ncclDataType_t nccl_type(tg_dtype t) { return t == TG_BF16 ? ncclBfloat16 : ncclFloat; }

static int ranges_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + b_bytes && y < x + a_bytes;
}

/* Polls the NCCL communicator's state until it leaves ncclInProgress. Returns
 * the state (ncclSuccess or an error), or ncclInProgress when `deadline`
 * passed first. */
static ncclResult_t nccl_settle(ncclComm_t nc, double deadline) {
    double t0 = comm_clock();
    for (;;) {
        ncclResult_t state = ncclInProgress;
        ncclResult_t q = ncclCommGetAsyncError(nc, &state);
        if (q != ncclSuccess) return q;
        if (state != ncclInProgress) return state;
        if (comm_clock() >= deadline) return ncclInProgress;
        poll_pause(t0);
    }
}

/* ---- failure ------------------------------------------------------------ */

/* Aborts the NCCL communicator (ending its kernels) and marks c broken.
 * Returns -1; e already holds the message. */
static int give_up(comm *c) {
    nccl_impl *s = c->impl;
    if (s->nc) ncclCommAbort(s->nc);
    s->nc = NULL;
    s->broken = 1;
    return -1;
}

static int fail_cuda(comm *c, const char *what, const char *call, cudaError_t err, tg_err *e) {
    tg_fail(e, "group %s: %s: %s failed: %s (%s); the communicator is aborted", c->name, what, call, cudaGetErrorName(err),
            cudaGetErrorString(err));
    return give_up(c);
}

static int fail_nccl(comm *c, const char *what, const char *call, ncclResult_t r, tg_err *e) {
    nccl_impl *s = c->impl;
    char why[512];
    nccl_why(why, sizeof why, s->nc, r);
    tg_fail(e, "group %s: %s: %s failed: %s; the communicator is aborted", c->name, what, call, why);
    return give_up(c);
}

static int fail_timeout(comm *c, const char *what, const char *waiting_for, tg_err *e) {
    nccl_impl *s = c->impl;
    char members[128];
    size_t len = 0;
    members[0] = '\0';
    for (int k = 0; k < c->size && len < sizeof members; k++)
        len += (size_t)snprintf(members + len, sizeof members - len, "%s%d", k ? ", " : "", s->granks[k]);
    tg_fail(e, "group %s: %s: timed out after %g s (parallel.timeout_s) waiting for %s; one of the global ranks %s may have died, "
            "hung, or called a different collective; the communicator is aborted", c->name, what, s->timeout_s, waiting_for,
            members);
    return give_up(c);
}

/* ---- one collective: begin, enqueue, finish ----------------------------- */

/* Starts operation `what` (already formatted by the caller): refuses on a
 * broken communicator, sets the deadline of NCCL's enqueueing. */
static int op_begin(comm *c, const char *what, tg_err *e) {
    nccl_impl *s = c->impl;
    if (s->broken) return tg_fail(e, "group %s: %s: the communicator is broken by an earlier failure", c->name, what);
    s->deadline = comm_clock() + s->timeout_s;
    return 0;
}

/* Checks that buffer `p` of the collective is memory of this
 * communicator's device: NCCL cannot reach host memory, and would fail
 * obscurely (or crash) on it. */
static int check_buffer(comm *c, const char *what, const char *role, const void *p, tg_err *e) {
    nccl_impl *s = c->impl;
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    cudaError_t err = cudaPointerGetAttributes(&a, p);
    if (err != cudaSuccess) return fail_cuda(c, what, "cudaPointerGetAttributes", err, e);
    if (a.type == cudaMemoryTypeManaged) return 0;
    if (a.type != cudaMemoryTypeDevice) {
        tg_fail(e, "group %s: %s: the %s buffer %p is not device memory (%s); the NCCL communicator needs buffers of the CUDA "
                "backend; the communicator is aborted", c->name, what, role, p,
                a.type == cudaMemoryTypeHost ? "pinned host memory" : "host memory");
        return give_up(c);
    }
    if (a.device != s->device) {
        tg_fail(e, "group %s: %s: the %s buffer %p is on device %d, the communicator on device %d; the communicator is aborted",
                c->name, what, role, p, a.device, s->device);
        return give_up(c);
    }
    return 0;
}

/* Orders the comm stream after everything enqueued so far on the compute
 * stream. */
static int order_after_compute(comm *c, const char *what, tg_err *e) {
    nccl_impl *s = c->impl;
    cudaStream_t compute = (cudaStream_t)c->mem.stream;
    cudaError_t err = cudaEventRecord(s->ready, compute);
    if (err != cudaSuccess) return fail_cuda(c, what, "cudaEventRecord(ready, compute stream)", err, e);
    err = cudaStreamWaitEvent(s->stream, s->ready, 0);
    if (err != cudaSuccess) return fail_cuda(c, what, "cudaStreamWaitEvent(comm stream, ready)", err, e);
    return 0;
}

/* After an NCCL call on the comm stream returned r: waits (nonblocking
 * communicator) until NCCL has enqueued its work, so that the comm stream
 * may be used again. */
static int nccl_enqueued(comm *c, const char *what, const char *call, ncclResult_t r, tg_err *e) {
    nccl_impl *s = c->impl;
    if (r == ncclInProgress) r = nccl_settle(s->nc, s->deadline);
    if (r == ncclInProgress) return fail_timeout(c, what, "NCCL to enqueue the collective (connection set-up)", e);
    if (r != ncclSuccess) return fail_nccl(c, what, call, r, e);
    return 0;
}

/* Orders the compute stream after the comm stream, then waits on the host
 * until the collective is done, watching for NCCL errors and the deadline.
 * The wait for the compute stream to reach the collective (`ready`: the
 * kernels queued before it) comes first and is not communication: the
 * deadline starts after it, and for the collectives the comm_* wrappers
 * time (`timed`: all but broadcast and barrier) it is taken back out of
 * c->seconds, to which the wrapper adds the whole call. */
static int op_finish(comm *c, const char *what, int timed, tg_err *e) {
    nccl_impl *s = c->impl;
    cudaStream_t compute = (cudaStream_t)c->mem.stream;
    cudaError_t err = cudaEventRecord(s->done, s->stream);
    if (err != cudaSuccess) return fail_cuda(c, what, "cudaEventRecord(done, comm stream)", err, e);
    err = cudaStreamWaitEvent(compute, s->done, 0);
    if (err != cudaSuccess) return fail_cuda(c, what, "cudaStreamWaitEvent(compute stream, done)", err, e);
    /* `ready` depends on compute kernels only (earlier collectives are
     * complete), so this wait cannot be held up by a peer */
    double t_sync = comm_clock();
    err = cudaEventSynchronize(s->ready);
    if (err != cudaSuccess) return fail_cuda(c, what, "cudaEventSynchronize(ready) (compute work before the collective)", err, e);
    double t_ready = comm_clock();
    if (timed) c->seconds -= t_ready - t_sync;
    s->deadline = t_ready + s->timeout_s;
    for (;;) {
        err = cudaEventQuery(s->done);
        if (err == cudaSuccess) return 0;
        if (err != cudaErrorNotReady) return fail_cuda(c, what, "cudaEventQuery(done) while waiting for the collective", err, e);
        /* "not ready" is no error: make sure it is not left as the thread's
         * last error, where the next kernel launch check would find it */
        if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
        ncclResult_t state = ncclSuccess;
        ncclResult_t q = ncclCommGetAsyncError(s->nc, &state);
        if (q != ncclSuccess) return fail_nccl(c, what, "ncclCommGetAsyncError", q, e);
        if (state != ncclSuccess && state != ncclInProgress) {
            char why[512];
            nccl_why(why, sizeof why, s->nc, state);
            tg_fail(e, "group %s: %s: NCCL reported an asynchronous error: %s; the communicator is aborted", c->name, what, why);
            return give_up(c);
        }
        if (comm_clock() >= s->deadline) return fail_timeout(c, what, "the collective to complete", e);
        poll_pause(t_ready);
    }
}

/* A bad argument inside a collective (e holds why) also aborts: the peers
 * would wait for a collective this rank never enqueues. */
static int fail_arg(comm *c) { return give_up(c); }

static int bad_dtype(comm *c, const char *what, tg_dtype t, tg_err *e) {
    if (t == TG_F32 || t == TG_BF16) return 0;
    tg_fail(e, "group %s: %s: unknown element type %d; the communicator is aborted", c->name, what, (int)t);
    return fail_arg(c);
}

static int nccl_all_reduce(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e) {
    nccl_impl *s = c->impl;
    char what[96];
    snprintf(what, sizeof what, "all_reduce(%s) #%llu of %zu %s", op == REDUCE_MAX ? "max" : "sum",
             (unsigned long long)++s->ops, n, tg_dtype_name(t));
    if (op_begin(c, what, e) || bad_dtype(c, what, t, e)) return -1;
    if (op != REDUCE_SUM && op != REDUCE_MAX) {
        tg_fail(e, "group %s: %s: unknown reduction %d; the communicator is aborted", c->name, what, (int)op);
        return fail_arg(c);
    }
    if (n > 0) {
        if (check_buffer(c, what, "in/out", buf, e) || order_after_compute(c, what, e)) return -1;
        ncclResult_t r = ncclAllReduce(buf, buf, n, nccl_type(t), op == REDUCE_MAX ? ncclMax : ncclSum, s->nc, s->stream);
        if (nccl_enqueued(c, what, "ncclAllReduce", r, e) || op_finish(c, what, 1, e)) return -1;
    }
    c->bytes_sent[COLL_ALL_REDUCE] += comm_ring_bytes_of(COLL_ALL_REDUCE, c->size, n, tg_dtype_bytes(t));
    return 0;
}

static int nccl_reduce_scatter(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    nccl_impl *s = c->impl;
    char what[96];
    snprintf(what, sizeof what, "reduce_scatter #%llu of %zu %s per rank", (unsigned long long)++s->ops, n, tg_dtype_name(t));
    if (op_begin(c, what, e) || bad_dtype(c, what, t, e)) return -1;
    size_t es = tg_dtype_bytes(t), block = n * es, p = (size_t)c->size;
    char *mine = (char *)in + (size_t)c->rank * block; /* block `rank` of in: where the in-place form leaves the result */
    if (n > 0) {
        int in_place = (char *)out == mine, disjoint = !ranges_overlap(out, block, in, p * block);
        int via_block = !in_place && out == in; /* rank > 0 here */
        if (!in_place && !disjoint && !via_block) {
            tg_fail(e, "group %s: %s: out (%p) overlaps in (%p) but is neither in nor in + rank*n; the communicator is aborted",
                    c->name, what, out, in);
            return fail_arg(c);
        }
        if (check_buffer(c, what, "in", in, e) || check_buffer(c, what, "out", out, e) || order_after_compute(c, what, e))
            return -1;
        void *recv = disjoint ? out : mine;
        ncclResult_t r = ncclReduceScatter(in, recv, n, nccl_type(t), ncclSum, s->nc, s->stream);
        if (nccl_enqueued(c, what, "ncclReduceScatter", r, e)) return -1;
        if (via_block) {
            cudaError_t err = cudaMemcpyAsync(out, mine, block, cudaMemcpyDeviceToDevice, s->stream);
            if (err != cudaSuccess) return fail_cuda(c, what, "cudaMemcpyAsync(out, in + rank*n)", err, e);
        }
        if (op_finish(c, what, 1, e)) return -1;
    }
    c->bytes_sent[COLL_REDUCE_SCATTER] += comm_ring_bytes_of(COLL_REDUCE_SCATTER, c->size, n * p, es);
    return 0;
}

static int nccl_all_gather(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    nccl_impl *s = c->impl;
    char what[96];
    snprintf(what, sizeof what, "all_gather #%llu of %zu %s per rank", (unsigned long long)++s->ops, n, tg_dtype_name(t));
    if (op_begin(c, what, e) || bad_dtype(c, what, t, e)) return -1;
    size_t es = tg_dtype_bytes(t), block = n * es, p = (size_t)c->size;
    char *mine = (char *)out + (size_t)c->rank * block; /* block `rank` of out */
    if (n > 0) {
        int in_place = (const char *)in == mine, disjoint = !ranges_overlap(in, block, out, p * block);
        int via_block = !in_place && !disjoint && !ranges_overlap(in, block, mine, block);
        if (!in_place && !disjoint && !via_block) {
            tg_fail(e, "group %s: %s: in (%p) overlaps block %d of out (%p) without being it; the communicator is aborted",
                    c->name, what, in, c->rank, out);
            return fail_arg(c);
        }
        if (check_buffer(c, what, "in", in, e) || check_buffer(c, what, "out", out, e) || order_after_compute(c, what, e))
            return -1;
        if (via_block) {
            cudaError_t err = cudaMemcpyAsync(mine, in, block, cudaMemcpyDeviceToDevice, s->stream);
            if (err != cudaSuccess) return fail_cuda(c, what, "cudaMemcpyAsync(out + rank*n, in)", err, e);
        }
        const void *send = disjoint ? in : mine;
        ncclResult_t r = ncclAllGather(send, out, n, nccl_type(t), s->nc, s->stream);
        if (nccl_enqueued(c, what, "ncclAllGather", r, e) || op_finish(c, what, 1, e)) return -1;
    }
    c->bytes_sent[COLL_ALL_GATHER] += comm_ring_bytes_of(COLL_ALL_GATHER, c->size, n * p, es);
    return 0;
}

static int nccl_broadcast(comm *c, void *buf, size_t bytes, int root, tg_err *e) {
    nccl_impl *s = c->impl;
    char what[96];
    snprintf(what, sizeof what, "broadcast #%llu of %zu bytes from %d", (unsigned long long)++s->ops, bytes, root);
    if (op_begin(c, what, e)) return -1;
    if (root < 0 || root >= c->size) {
        tg_fail(e, "group %s: %s: root %d is not a member index (group of %d); the communicator is aborted", c->name, what, root,
                c->size);
        return fail_arg(c);
    }
    if (bytes > 0) {
        if (check_buffer(c, what, "in/out", buf, e) || order_after_compute(c, what, e)) return -1;
        ncclResult_t r = ncclBroadcast(buf, buf, bytes, ncclUint8, root, s->nc, s->stream);
        if (nccl_enqueued(c, what, "ncclBroadcast", r, e) || op_finish(c, what, 0, e)) return -1;
    }
    c->bytes_sent[COLL_BROADCAST] += comm_broadcast_bytes(c->size, c->rank, root, bytes);
    return 0;
}

/* A max all-reduce of one float that stays 0: returns when every member has
 * reached it (and this rank's compute stream has reached it). Not counted. */
static int nccl_barrier(comm *c, tg_err *e) {
    nccl_impl *s = c->impl;
    char what[64];
    snprintf(what, sizeof what, "barrier #%llu", (unsigned long long)++s->ops);
    if (op_begin(c, what, e) || order_after_compute(c, what, e)) return -1;
    ncclResult_t r = ncclAllReduce(s->barrier_buf, s->barrier_buf, 1, ncclFloat, ncclMax, s->nc, s->stream);
    if (nccl_enqueued(c, what, "ncclAllReduce", r, e)) return -1;
    return op_finish(c, what, 0, e);
}

/* ---- host buffers ---------------------------------------------------------
 * The trainer also reduces a few host values through its groups (the mean
 * loss, the gradient norm, peak memory, checkpoint tensors, sample logits).
 * NCCL reaches device memory only, so a collective with a host buffer runs
 * on a device copy in `stage` (grown to the largest such call, freed with
 * the communicator), in the in-place form, and copies the result back. */

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

static int stage_copy(comm *c, void *dst, const void *src, size_t bytes, tg_err *e) {
    cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    if (err == cudaSuccess) return 0;
    (void)cudaGetLastError();
    return tg_fail(e, "group %s: staging a host buffer: cudaMemcpy: %s", c->name, cudaGetErrorString(err));
}

static int any_all_reduce(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e) {
    const size_t bytes = n * tg_dtype_bytes(t);
    if (n == 0 || !is_host(buf)) return nccl_all_reduce(c, buf, n, t, op, e);
    void *d = stage_of(c, bytes, e);
    if (!d || stage_copy(c, d, buf, bytes, e) || nccl_all_reduce(c, d, n, t, op, e)) return -1;
    return stage_copy(c, buf, d, bytes, e);
}

static int any_reduce_scatter(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    const size_t block = n * tg_dtype_bytes(t), all = block * (size_t)c->size;
    if (n == 0 || (!is_host(out) && !is_host(in))) return nccl_reduce_scatter(c, out, in, n, t, e);
    char *d = stage_of(c, all, e);
    if (!d || stage_copy(c, d, in, all, e)) return -1;
    char *mine = d + (size_t)c->rank * block;
    if (nccl_reduce_scatter(c, mine, d, n, t, e)) return -1;
    return stage_copy(c, out, mine, block, e);
}

static int any_all_gather(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    const size_t block = n * tg_dtype_bytes(t), all = block * (size_t)c->size;
    if (n == 0 || (!is_host(out) && !is_host(in))) return nccl_all_gather(c, out, in, n, t, e);
    char *d = stage_of(c, all, e);
    if (!d) return -1;
    char *mine = d + (size_t)c->rank * block;
    if (stage_copy(c, mine, in, block, e) || nccl_all_gather(c, d, mine, n, t, e)) return -1;
    return stage_copy(c, out, d, all, e);
}

static int any_broadcast(comm *c, void *buf, size_t bytes, int root, tg_err *e) {
    if (bytes == 0 || !is_host(buf)) return nccl_broadcast(c, buf, bytes, root, e);
    void *d = stage_of(c, bytes, e);
    if (!d || stage_copy(c, d, buf, bytes, e) || nccl_broadcast(c, d, bytes, root, e)) return -1;
    return stage_copy(c, buf, d, bytes, e);
}

/* Frees what the impl holds; the NCCL communicator is finalized (bounded by
 * timeout_s) and destroyed, or aborted when broken or when that fails.
 * Every rank should destroy its communicators in the same order. */
static void impl_free(const char *name, nccl_impl *s) {
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
    if (s->done) cudaEventDestroy(s->done);
    if (s->ready) cudaEventDestroy(s->ready);
    if (s->stream) cudaStreamDestroy(s->stream);
    if (s->barrier_buf) cudaFree(s->barrier_buf);
    if (s->stage) cudaFree(s->stage);
    free(s->granks);
    free(s);
}

static void nccl_destroy(comm *c) {
    impl_free(c->name, c->impl);
    free(c);
}

static const comm_vtable NCCL_VT = {any_all_reduce, any_reduce_scatter, any_all_gather, any_broadcast, nccl_barrier,
                                    nccl_destroy};

/* ---- creation ----------------------------------------------------------- */

typedef struct {
    char name[NAME_MAX_LEN + 1];
    int32_t size, index, has_id;
    int32_t failed; /* this rank's own checks failed: it reports why, the others do not judge its record */
    uint64_t group_hash;
    ncclUniqueId id; /* has_id: made by this rank, the first member of its group */
} member_rec;

typedef struct {
    int32_t failed;
    char msg[MSG_LEN];
} status_rec;

/* One bootstrap exchange of every rank's status: fails everywhere (with the
 * first failing rank's message) if any rank failed. */
static int agree(bootstrap *bs, int failed, const tg_err *mine, const char *name, tg_err *e) {
    int world = bootstrap_world(bs), me = bootstrap_rank(bs);
    status_rec st;
    memset(&st, 0, sizeof st);
    st.failed = failed;
    if (failed) snprintf(st.msg, sizeof st.msg, "%.299s", mine->msg);
    status_rec *all = tg_malloc((size_t)world * sizeof *all, "comm_nccl status table");
    int rc = 0;
    if (bootstrap_allgather(bs, &st, sizeof st, all, e)) {
        rc = tg_wrap(e, "creating communicator %s", name);
    } else {
        for (int r = 0; r < world; r++) {
            if (!all[r].failed) continue;
            all[r].msg[MSG_LEN - 1] = '\0';
            if (r == me)
                tg_fail(e, "%s", all[r].msg);
            else
                tg_fail(e, "creating communicator %s: rank %d failed: %s", name, r, all[r].msg);
            rc = -1;
            break;
        }
    }
    free(all);
    return rc;
}

static uint64_t hash_ranks(const int *r, int n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 4; b++) h = (h ^ (uint64_t)((unsigned)r[i] >> (8 * b) & 255u)) * 1099511628211ull;
    return h;
}

/* Checks the group this rank passed against what every member passed, and
 * that its first member made an id. Ranks whose own checks failed are left
 * out: they report their own reason. */
static int check_group(bootstrap *bs, const char *name, const int *g, int size, int needs_id, const member_rec *all, tg_err *e) {
    int world = bootstrap_world(bs), me = bootstrap_rank(bs);
    for (int r = 0; r < world; r++)
        if (!all[r].failed && strncmp(all[r].name, name, sizeof all[r].name) != 0)
            return tg_fail(e, "rank %d creates communicator \"%s\" while rank %d creates \"%s\": every rank must create the "
                           "same communicators in the same order", me, name, r, all[r].name);
    uint64_t h = hash_ranks(g, size);
    for (int i = 0; i < size; i++) {
        int r = g[i];
        if (r < 0 || r >= world) return tg_fail(e, "group %s of rank %d lists rank %d, outside the world of %d", name, me, r, world);
        for (int j = 0; j < i; j++)
            if (g[j] == r) return tg_fail(e, "group %s of rank %d lists rank %d twice", name, me, r);
        if (all[r].failed) continue;
        if (all[r].size != size || all[r].index != i || all[r].group_hash != h)
            return tg_fail(e, "group %s: rank %d and rank %d disagree on its members (rank %d says index %d of %d)", name, me, r, r,
                           all[r].index, all[r].size);
    }
    if (needs_id && !all[g[0]].failed && !all[g[0]].has_id)
        return tg_fail(e, "group %s: its first member, rank %d, sent no NCCL id", name, g[0]);
    return 0;
}

/* The stream, events and barrier buffer of a group of more than one rank. */
static int make_cuda_parts(nccl_impl *s, const char *name, tg_err *e) {
    cudaError_t err = cudaGetDevice(&s->device);
    if (err == cudaSuccess) err = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (err == cudaSuccess) err = cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming);
    if (err == cudaSuccess) err = cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming);
    if (err == cudaSuccess) err = cudaMalloc((void **)&s->barrier_buf, sizeof(float));
    if (err == cudaSuccess) err = cudaMemsetAsync(s->barrier_buf, 0, sizeof(float), s->stream);
    if (err != cudaSuccess)
        return tg_fail(e, "group %s: setting up the NCCL communicator's stream, events and buffer: %s (%s)", name,
                       cudaGetErrorName(err), cudaGetErrorString(err));
    return 0;
}

/* Joins the NCCL communicator, bounded by timeout_s. */
static int join_nccl(nccl_impl *s, const char *name, int size, int index, ncclUniqueId id, tg_err *e) {
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

/* comm_nccl_create; with nccl_at_size_1 a group of one rank also gets an
 * NCCL communicator (tests: the whole NCCL path on a single GPU). */
static comm *create(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index, const comm_memory *mem,
                    double timeout_s, int nccl_at_size_1, tg_err *e) {
    int me = bootstrap_rank(bs), world = bootstrap_world(bs);
    int use_nccl = group_size > 1 || nccl_at_size_1;
    const char *nm = name ? name : "?";
    tg_err mine = {{0}};
    int bad = 0;

    /* 1. what every rank creates; local argument checks travel with it; the
     *    first member of each group that uses NCCL makes its id */
    member_rec rec;
    memset(&rec, 0, sizeof rec);
    snprintf(rec.name, sizeof rec.name, "%s", name ? name : "");
    rec.size = group_size;
    rec.index = my_index;
    if (!name || !name[0] || strlen(name) > NAME_MAX_LEN)
        bad = tg_fail(&mine, "communicator name \"%s\" must be 1-%d characters", nm, NAME_MAX_LEN);
    else if (group_size < 1 || !group_ranks || my_index < 0 || my_index >= group_size || group_ranks[my_index] != me)
        bad = tg_fail(&mine, "group %s: rank %d is not member %d of the group it passed (size %d)", name, me, my_index, group_size);
    else if (!(timeout_s > 0))
        bad = tg_fail(&mine, "group %s: parallel.timeout_s must be positive (got %g)", name, timeout_s);
    else if (!mem || !mem->device)
        bad = tg_fail(&mine, "group %s: the NCCL communicator needs device buffers (a comm_memory with device = 1, from the "
                      "CUDA backend)", name);
    if (!bad) rec.group_hash = hash_ranks(group_ranks, group_size);
    if (!bad && use_nccl && my_index == 0) {
        ncclResult_t r = ncclGetUniqueId(&rec.id);
        if (r == ncclSuccess)
            rec.has_id = 1;
        else {
            char why[512];
            nccl_why(why, sizeof why, NULL, r);
            bad = tg_fail(&mine, "group %s: ncclGetUniqueId: %s", name, why);
        }
    }
    rec.failed = bad != 0;
    member_rec *all = tg_malloc((size_t)world * sizeof *all, "comm_nccl member table");
    if (bootstrap_allgather(bs, &rec, sizeof rec, all, e)) {
        free(all);
        tg_wrap(e, "creating communicator %s", nm);
        return NULL;
    }
    for (int r = 0; r < world; r++) all[r].name[NAME_MAX_LEN] = '\0';
    if (!bad) bad = check_group(bs, name, group_ranks, group_size, use_nccl, all, &mine);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (!bad && use_nccl) id = all[group_ranks[0]].id;
    free(all);
    if (agree(bs, bad, &mine, nm, e)) return NULL;

    /* 2. groups that use NCCL join their communicator (the others have
     *    nothing to do); 3. everyone hears how it went */
    nccl_impl *s = NULL;
    bad = 0;
    if (use_nccl) {
        s = tg_calloc(1, sizeof *s, "NCCL communicator");
        s->timeout_s = timeout_s;
        s->device = -1;
        s->granks = tg_malloc((size_t)group_size * sizeof(int), "group ranks");
        memcpy(s->granks, group_ranks, (size_t)group_size * sizeof(int));
        bad = make_cuda_parts(s, name, &mine) || join_nccl(s, name, group_size, my_index, id, &mine);
    }
    if (agree(bs, bad, &mine, name, e)) {
        if (s) s->broken = 1; /* abort, do not finalize: some member has no communicator */
        impl_free(name, s);
        return NULL;
    }

    comm *c = use_nccl ? tg_calloc(1, sizeof *c, "communicator") : comm_null_create(name, 0, 1);
    if (!c) {
        tg_fail(e, "creating communicator %s: out of memory", name);
        return NULL;
    }
    comm_use_memory(c, mem);
    if (!use_nccl) return c;
    c->vt = &NCCL_VT;
    c->impl = s;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->rank = my_index;
    c->size = group_size;
    return c;
}

comm *comm_nccl_create(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index,
                       const comm_memory *mem, double timeout_s, tg_err *e) {
    return create(bs, name, group_ranks, group_size, my_index, mem, timeout_s, 0, e);
}

comm *comm_nccl_create_at_size_1(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index,
                                 const comm_memory *mem, double timeout_s, tg_err *e) {
    return create(bs, name, group_ranks, group_size, my_index, mem, timeout_s, 1, e);
}

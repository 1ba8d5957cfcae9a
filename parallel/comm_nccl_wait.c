/* comm_nccl: enqueueing, waiting and failure (the rules are in comm_nccl.c). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parallel/comm_nccl_impl.h"

#define SPIN_S 2e-3       /* poll with sched_yield for this long, then sleep */
#define NAP_NS 50000L     /* 50 us between polls after that */

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
void nccl_why(char *out, size_t cap, ncclComm_t nc, ncclResult_t r) {
    const char *last = ncclGetLastError(nc);
    if (last && last[0])
        snprintf(out, cap, "%s: %.400s", ncclGetErrorString(r), last);
    else
        snprintf(out, cap, "%s", ncclGetErrorString(r));
}

/* Polls the NCCL communicator's state until it leaves ncclInProgress. Returns
 * the state (ncclSuccess or an error), or ncclInProgress when `deadline`
 * passed first. */
ncclResult_t nccl_settle(ncclComm_t nc, double deadline) {
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
int nccl_give_up(comm *c) {
    nccl_impl *s = c->impl;
    nccl_group_drop(s); /* an abort inside an open group would wait for its end */
    /* and one while a CUDA graph holds its collectives, for the graph's end
     * (NCCL 2.26 on): the graphs go first, the run being over for them */
    if (s->nc && c->mem.drop_graphs) c->mem.drop_graphs(c->mem.ctx);
    if (s->nc) ncclCommAbort(s->nc);
    s->nc = NULL;
    s->broken = 1;
    return -1;
}

int nccl_fail_cuda(comm *c, const char *what, const char *call, cudaError_t err, tg_err *e) {
    tg_fail(e, "group %s: %s: %s failed: %s (%s); the communicator is aborted", c->name, what, call, cudaGetErrorName(err),
            cudaGetErrorString(err));
    return nccl_give_up(c);
}

int nccl_fail_nccl(comm *c, const char *what, const char *call, ncclResult_t r, tg_err *e) {
    nccl_impl *s = c->impl;
    char why[512];
    nccl_why(why, sizeof why, s->nc, r);
    tg_fail(e, "group %s: %s: %s failed: %s; the communicator is aborted", c->name, what, call, why);
    return nccl_give_up(c);
}

int nccl_fail_timeout(comm *c, const char *what, const char *waiting_for, tg_err *e) {
    nccl_impl *s = c->impl;
    char members[128];
    size_t len = 0;
    members[0] = '\0';
    for (int k = 0; k < c->size && len < sizeof members; k++)
        len += (size_t)snprintf(members + len, sizeof members - len, "%s%d", k ? ", " : "", s->granks[k]);
    tg_fail(e, "group %s: %s: timed out after %g s (parallel.timeout_s) waiting for %s; one of the global ranks %s may have died, "
            "hung, or called a different collective; the communicator is aborted", c->name, what, s->timeout_s, waiting_for,
            members);
    return nccl_give_up(c);
}

/* Starts operation `what` (already formatted by the caller): refuses on a
 * broken communicator, sets the deadline of NCCL's enqueueing. */
int nccl_op_begin(comm *c, const char *what, tg_err *e) {
    nccl_impl *s = c->impl;
    if (s->broken) return tg_fail(e, "group %s: %s: the communicator is broken by an earlier failure", c->name, what);
    s->deadline = comm_clock() + s->timeout_s;
    return 0;
}

/* Checks that buffer `p` of the collective is memory of this
 * communicator's device: NCCL cannot reach host memory, and would fail
 * obscurely (or crash) on it. */
int nccl_check_buffer(comm *c, const char *what, const char *role, const void *p, tg_err *e) {
    nccl_impl *s = c->impl;
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    cudaError_t err = cudaPointerGetAttributes(&a, p);
    if (err != cudaSuccess) return nccl_fail_cuda(c, what, "cudaPointerGetAttributes", err, e);
    if (a.type == cudaMemoryTypeManaged) return 0;
    if (a.type != cudaMemoryTypeDevice) {
        tg_fail(e, "group %s: %s: the %s buffer %p is not device memory (%s); the NCCL communicator needs buffers of the CUDA "
                "backend; the communicator is aborted", c->name, what, role, p,
                a.type == cudaMemoryTypeHost ? "pinned host memory" : "host memory");
        return nccl_give_up(c);
    }
    if (a.device != s->device) {
        tg_fail(e, "group %s: %s: the %s buffer %p is on device %d, the communicator on device %d; the communicator is aborted",
                c->name, what, role, p, a.device, s->device);
        return nccl_give_up(c);
    }
    return 0;
}

comm_req *nccl_req_get(comm *c, coll_kind kind, uint64_t bytes, const char *what, tg_err *e) {
    comm_req *r = comm_req_get(c, kind, bytes, what, e);
    if (!r) {
        nccl_give_up(c); /* the peers would wait for a collective this rank never enqueues */
        return NULL;
    }
    if (!r->impl) {
        nccl_req *q = calloc(1, sizeof *q);
        cudaError_t err = q ? cudaEventCreateWithFlags(&q->ready, cudaEventDisableTiming) : cudaErrorMemoryAllocation;
        if (err == cudaSuccess) err = cudaEventCreateWithFlags(&q->done, cudaEventDisableTiming);
        if (err != cudaSuccess) {
            if (q && q->ready) cudaEventDestroy(q->ready);
            free(q);
            comm_req_put(c, r);
            nccl_fail_cuda(c, what, "cudaEventCreateWithFlags (a request's events)", err, e);
            return NULL;
        }
        r->impl = q;
    }
    ((nccl_req *)r->impl)->enqueued = 0;
    return r;
}

void nccl_req_release(comm *c, comm_req *r) {
    (void)c;
    nccl_req *q = r->impl;
    if (!q) return;
    if (q->done) cudaEventDestroy(q->done);
    if (q->ready) cudaEventDestroy(q->ready);
    free(q);
    r->impl = NULL;
}

/* Orders the comm stream after everything enqueued so far on the compute
 * stream. */
int nccl_order_after_compute(comm *c, comm_req *r, tg_err *e) {
    nccl_impl *s = c->impl;
    nccl_req *q = r->impl;
    cudaStream_t compute = (cudaStream_t)c->mem.stream;
    cudaError_t err = cudaEventRecord(q->ready, compute);
    if (err != cudaSuccess) return nccl_fail_cuda(c, r->what, "cudaEventRecord(ready, compute stream)", err, e);
    err = cudaStreamWaitEvent(s->stream, q->ready, 0);
    if (err != cudaSuccess) return nccl_fail_cuda(c, r->what, "cudaStreamWaitEvent(comm stream, ready)", err, e);
    return 0;
}

/* Ends what the start enqueued: records `done` on the comm stream. */
int nccl_mark_done(comm *c, comm_req *r, tg_err *e) {
    if (c->in_group) return nccl_group_add(c, r, e); /* NCCL enqueues it only at the group's end */
    nccl_impl *s = c->impl;
    nccl_req *q = r->impl;
    if (nccl_time_end(c, r->what, e)) return -1;
    cudaError_t err = cudaEventRecord(q->done, s->stream);
    if (err != cudaSuccess) return nccl_fail_cuda(c, r->what, "cudaEventRecord(done, comm stream)", err, e);
    err = cudaEventRecord(s->tail, s->stream);
    if (err != cudaSuccess) return nccl_fail_cuda(c, r->what, "cudaEventRecord(tail, comm stream)", err, e);
    q->enqueued = 1;
    return 0;
}

/* After an NCCL call on the comm stream returned res: waits (nonblocking
 * communicator) until NCCL has enqueued its work, so that the comm stream
 * may be used again. */
int nccl_enqueued(comm *c, comm_req *r, const char *call, ncclResult_t res, tg_err *e) {
    nccl_impl *s = c->impl;
    if (res == ncclInProgress) res = nccl_settle(s->nc, s->deadline);
    if (res == ncclInProgress) return nccl_fail_timeout(c, r->what, "NCCL to enqueue the collective (connection set-up)", e);
    if (res != ncclSuccess) return nccl_fail_nccl(c, r->what, call, res, e);
    return 0;
}

/* An asynchronous NCCL error, if any: -1 with the message (aborted). */
static int async_error(comm *c, const char *what, tg_err *e) {
    nccl_impl *s = c->impl;
    ncclResult_t state = ncclSuccess;
    ncclResult_t q = ncclCommGetAsyncError(s->nc, &state);
    if (q != ncclSuccess) return nccl_fail_nccl(c, what, "ncclCommGetAsyncError", q, e);
    if (state == ncclSuccess || state == ncclInProgress) return 0;
    char why[512];
    nccl_why(why, sizeof why, s->nc, state);
    tg_fail(e, "group %s: %s: NCCL reported an asynchronous error: %s; the communicator is aborted", c->name, what, why);
    return nccl_give_up(c);
}

/* Orders the compute stream after the collective, then waits on the host
 * until it is done, watching for NCCL errors and the deadline. The wait for
 * the compute stream to reach the collective (`ready`: the kernels queued
 * before its start) comes first and is not communication: the deadline
 * starts after it. Then the spans that have run are read (c->seconds). */
int nccl_finish(comm *c, comm_req *r, tg_err *e) {
    nccl_impl *s = c->impl;
    nccl_req *q = r->impl;
    const char *what = r->what;
    q->enqueued = 0;
    cudaError_t err = cudaStreamWaitEvent((cudaStream_t)c->mem.stream, q->done, 0);
    if (err != cudaSuccess) return nccl_fail_cuda(c, what, "cudaStreamWaitEvent(compute stream, done)", err, e);
    /* `ready` depends on compute kernels and collectives already waited
     * for, so this wait cannot be held up by a peer */
    err = cudaEventSynchronize(q->ready);
    if (err != cudaSuccess) return nccl_fail_cuda(c, what, "cudaEventSynchronize(ready) (compute work before the collective)", err, e);
    const double t_ready = comm_clock();
    s->deadline = t_ready + s->timeout_s;
    for (;;) {
        err = cudaEventQuery(q->done);
        if (err == cudaSuccess) return nccl_time_read(c, e);
        if (err != cudaErrorNotReady) return nccl_fail_cuda(c, what, "cudaEventQuery(done) while waiting for the collective", err, e);
        /* "not ready" is no error: make sure it is not left as the thread's
         * last error, where the next kernel launch check would find it */
        if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
        if (async_error(c, what, e)) return -1;
        if (comm_clock() >= s->deadline) return nccl_fail_timeout(c, what, "the collective to complete", e);
        poll_pause(t_ready);
    }
}


int nccl_order_compute_after(comm *c, comm_req *r, tg_err *e) {
    nccl_impl *s = c->impl;
    nccl_req *q = r->impl;
    q->enqueued = 0;
    const cudaError_t err = cudaStreamWaitEvent((cudaStream_t)c->mem.stream, q->done, 0);
    if (err != cudaSuccess) return nccl_fail_cuda(c, r->what, "cudaStreamWaitEvent(compute stream, done)", err, e);
    s->unsettled = 1;
    return 0;
}

/* The waits recorded during a capture ordered work that has not run (their
 * `tail` marks nothing a launch does). */
void nccl_capture_end(comm *c) {
    nccl_impl *s = c->impl;
    s->unsettled = 0;
    nccl_time_capture_end(s);
}

void nccl_replayed(comm *c) {
    nccl_impl *s = c->impl;
    s->replay_pending = 1;
    s->unsettled = 1;
}

/* The comm stream runs its collectives in order, so the end of the last
 * one enqueued (`tail`) is the end of all. After a launch of a captured
 * graph, whose collectives ran on the graph's fork of the comm stream, the
 * end of the launch on the compute stream is theirs: `tail` is recorded
 * there first. Polled, never waited on blocking: a collective a peer never
 * joins would hold the wait forever. */
int nccl_settle_all(comm *c, tg_err *e) {
    nccl_impl *s = c->impl;
    if (!s->unsettled) return 0;
    const char *what = s->replay_pending ? "the step's collectives (a launch of the captured step)"
                                         : "the step's collectives (deferred waits)";
    if (s->broken) return tg_fail(e, "group %s: %s: the communicator is broken by an earlier failure", c->name, what);
    const int replayed = s->replay_pending;
    if (s->replay_pending) {
        s->replay_pending = 0;
        const cudaError_t err = cudaEventRecord(s->tail, (cudaStream_t)c->mem.stream);
        if (err != cudaSuccess) return nccl_fail_cuda(c, what, "cudaEventRecord(tail, compute stream) after the launch", err, e);
    }
    const double t0 = comm_clock();
    s->deadline = t0 + s->timeout_s;
    for (;;) {
        const cudaError_t err = cudaEventQuery(s->tail);
        if (err == cudaSuccess) {
            s->unsettled = 0;
            return nccl_time_read_settled(c, replayed, e);
        }
        if (err != cudaErrorNotReady) return nccl_fail_cuda(c, what, "cudaEventQuery(tail) while settling", err, e);
        if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
        if (async_error(c, what, e)) return -1;
        if (comm_clock() >= s->deadline)
            return nccl_fail_timeout(c, what, "the collectives to complete (the step's work they wait for may itself wait for "
                                              "another group's collective: its members may be the ones to blame)", e);
        poll_pause(t0);
    }
}

/* A bad argument inside a collective (e holds why) also aborts: the peers
 * would wait for a collective this rank never enqueues. */
int nccl_bad_dtype(comm *c, const char *what, tg_dtype t, tg_err *e) {
    if (t == TG_F32 || t == TG_BF16) return 0;
    tg_fail(e, "group %s: %s: unknown element type %d; the communicator is aborted", c->name, what, (int)t);
    return nccl_give_up(c);
}

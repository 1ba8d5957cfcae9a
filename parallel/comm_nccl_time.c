/* comm_nccl: the collectives' device time (the rules are in comm_nccl.c).
 *
 * Why events. A start only enqueues; under deferred waits (a training step)
 * the wait only orders the compute stream, and a step replayed as a CUDA
 * graph calls no collective at all. Host time inside the calls is then the
 * enqueueing, not the communication. So every collective gets a span: a
 * timing event recorded on the comm stream just before NCCL's call (after
 * the stream's wait for the compute work it needs, `ready`) and one after
 * it. The comm stream runs its collectives one at a time, so spans never
 * overlap, and their sum is the time the stream spent in collectives,
 * waiting for slower peers included (as NCCL's kernels do). A group is one
 * span, from its first collective's start to the end of its launch; the
 * emulation, like NCCL, forbids recording on the stream between the
 * group's calls.
 *
 * Reading. A span is read (cudaEventElapsedTime) once its end has run: at a
 * wait on the host (every span before it has run then), and at comm_settle
 * (every span has). c->seconds gains each span's time once; comm.c adds no
 * host time for this communicator (c->device_timed).
 *
 * Graphs. Recorded during a capture, a span's events become event-record
 * nodes of the graph (cudaEventRecordExternal: a plain record inside a
 * capture only orders streams and marks nothing at a launch). They are the
 * graph's own: kept apart, never recorded again outside it, and read after
 * each launch's settle (one launch between settles, as the trainer does).
 * The next capture takes them over.
 *
 * A span that cannot be read (cudaEventElapsedTime failing) is a fault of
 * accounting, not of communication: it is said once on stderr, and the
 * communicator stops timing (comm_ms then leaves its collectives out)
 * rather than abort a run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm_nccl_impl.h"
#include "util/err.h"

/* The next free span of set v, its events made on first use; NULL with e set. */
static nccl_span *span_next(comm *c, nccl_spans *v, tg_err *e) {
    if (v->n == v->cap && v->head > 0) { /* move the unread ones to the front, keeping every event */
        for (int i = v->head; i < v->n; i++) {
            const nccl_span t = v->v[i - v->head];
            v->v[i - v->head] = v->v[i];
            v->v[i] = t;
        }
        v->n -= v->head;
        v->head = 0;
    }
    if (v->n == v->cap) {
        const int cap = v->cap ? 2 * v->cap : 64;
        v->v = tg_realloc(v->v, (size_t)cap * sizeof *v->v, "NCCL timing events");
        memset(v->v + v->cap, 0, (size_t)(cap - v->cap) * sizeof *v->v);
        v->cap = cap;
    }
    nccl_span *p = &v->v[v->n];
    cudaError_t err = p->start ? cudaSuccess : cudaEventCreate(&p->start);
    if (err == cudaSuccess && !p->end) err = cudaEventCreate(&p->end);
    if (err != cudaSuccess) {
        nccl_fail_cuda(c, "timing the collectives", "cudaEventCreate (a timing event)", err, e);
        return NULL;
    }
    return p;
}

/* Records ev on the comm stream: inside a capture as a node of the graph. */
static cudaError_t record(const comm *c, cudaEvent_t ev) {
    const nccl_impl *s = c->impl;
    return cudaEventRecordWithFlags(ev, s->stream, c->capturing ? cudaEventRecordExternal : cudaEventRecordDefault);
}

int nccl_time_begin(comm *c, const char *what, tg_err *e) {
    nccl_impl *s = c->impl;
    if (s->untimed || s->span_open) return 0; /* in a group, the first collective's start is the group's */
    if (c->capturing && !s->graph_building) { /* a new capture: the last graph's spans are its now */
        s->graph.head = s->graph.n = 0;
        s->graph_building = 1;
    }
    nccl_spans *v = c->capturing ? &s->graph : &s->live;
    nccl_span *p = span_next(c, v, e);
    if (!p) return -1;
    const cudaError_t err = record(c, p->start);
    if (err != cudaSuccess) return nccl_fail_cuda(c, what, "cudaEventRecord(span start, comm stream)", err, e);
    s->span_open = 1;
    return 0;
}

int nccl_time_end(comm *c, const char *what, tg_err *e) {
    nccl_impl *s = c->impl;
    if (!s->span_open) return 0; /* untimed (the barrier), or timing stopped */
    nccl_spans *v = c->capturing ? &s->graph : &s->live;
    const cudaError_t err = record(c, v->v[v->n].end);
    if (err != cudaSuccess) return nccl_fail_cuda(c, what, "cudaEventRecord(span end, comm stream)", err, e);
    v->n++;
    s->span_open = 0;
    return 0;
}

/* Stops timing after a span could not be read (see the top). */
static void stop_timing(comm *c, cudaError_t err) {
    nccl_impl *s = c->impl;
    (void)cudaGetLastError();
    fprintf(stderr, "comm_nccl: group %s: cannot read a collective's CUDA events (cudaEventElapsedTime: %s); its comm time "
            "leaves out the collectives from here on\n", c->name, cudaGetErrorString(err));
    s->untimed = 1;
}

/* Adds the spans of v from head on whose end has run to c->seconds, in
 * order, up to the first that has not (a collective started and not yet
 * waited for). */
static int harvest(comm *c, nccl_spans *v, tg_err *e) {
    nccl_impl *s = c->impl;
    for (; v->head < v->n && !s->untimed; v->head++) {
        const nccl_span *p = &v->v[v->head];
        const cudaError_t q = cudaEventQuery(p->end);
        if (q == cudaErrorNotReady) {
            if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
            return 0;
        }
        if (q != cudaSuccess) return nccl_fail_cuda(c, "timing the collectives", "cudaEventQuery(span end)", q, e);
        float ms = 0;
        const cudaError_t err = cudaEventElapsedTime(&ms, p->start, p->end);
        if (err != cudaSuccess) stop_timing(c, err);
        else c->seconds += 1e-3 * (double)ms;
    }
    if (v->head == v->n) v->head = v->n = 0;
    return 0;
}

int nccl_time_read(comm *c, tg_err *e) {
    if (c->capturing) return 0; /* nothing captured has run */
    return harvest(c, &((nccl_impl *)c->impl)->live, e);
}

int nccl_time_read_settled(comm *c, int replayed, tg_err *e) {
    nccl_impl *s = c->impl;
    if (harvest(c, &s->live, e)) return -1;
    if (!replayed) return 0;
    const int n = s->graph.n; /* read again after every launch (all of it has run: settled) */
    if (harvest(c, &s->graph, e)) return -1;
    s->graph.head = 0;
    s->graph.n = n;
    return 0;
}

void nccl_time_capture_end(nccl_impl *s) {
    s->graph_building = 0;
    s->span_open = 0; /* a capture that failed midway leaves no span open */
}

static void free_spans(nccl_spans *v) {
    for (int i = 0; i < v->cap; i++) {
        if (v->v[i].start) cudaEventDestroy(v->v[i].start);
        if (v->v[i].end) cudaEventDestroy(v->v[i].end);
    }
    free(v->v);
    memset(v, 0, sizeof *v);
}

void nccl_time_free(nccl_impl *s) {
    free_spans(&s->live);
    free_spans(&s->graph);
}

/* Private to the NCCL communicator (comm_nccl.c: the collectives;
 * comm_nccl_wait.c: enqueueing, waiting and failure; comm_nccl_group.c:
 * groups; comm_nccl_time.c: their device time; comm_nccl_create.c:
 * creation). */
#ifndef PARALLEL_COMM_NCCL_IMPL_H
#define PARALLEL_COMM_NCCL_IMPL_H

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdint.h>

#include "parallel/comm.h"

/* A collective's (or a group's) time on the comm stream: two timing events. */
typedef struct {
    cudaEvent_t start, end;
} nccl_span;
/* Spans recorded and not yet read: [head, n) of v (cap made). */
typedef struct {
    nccl_span *v;
    int head, n, cap;
} nccl_spans;

typedef struct {
    ncclComm_t nc;           /* NULL once aborted */
    cudaStream_t stream;     /* where NCCL runs */
    float *barrier_buf;      /* one float on the device, for barrier() */
    int device;              /* the CUDA device of nc */
    int *granks;             /* global ranks of the members */
    double timeout_s;
    double deadline;         /* of the current wait */
    uint64_t ops;            /* operations begun, for messages */
    int broken;
    cudaEvent_t tail;        /* recorded on the comm stream after each collective: its end is every one's */
    int unsettled;           /* a deferred wait has returned since the last settle */
    int replay_pending;      /* a launch of a captured graph holds the collectives to settle */
    void *stage;             /* device copy of host buffers (see "Host buffers"), grown on demand */
    size_t stage_bytes;
    /* The NCCL group under way (comm_nccl_group.c) */
    int group_open;          /* ncclGroupStart called, its ncclGroupEnd not yet */
    int group_ops;           /* collectives in it */
    comm_req *group_first, *group_last; /* their requests in start order (nccl_req.group_next) */
    /* Device time (comm_nccl_time.c) */
    nccl_spans live;         /* spans of collectives run op by op */
    nccl_spans graph;        /* spans recorded in the last capture, read after each launch */
    int span_open;           /* a span's start recorded, its end not yet */
    int graph_building;      /* a capture is recording spans into `graph` */
    int untimed;             /* a span could not be read: timing stopped */
} nccl_impl;

/* A request's part: its two events, made with the request and reused. */
typedef struct {
    cudaEvent_t ready, done; /* compute -> comm, comm -> compute */
    int enqueued;            /* 1 from the start of a device collective to its wait (in a group: from its end) */
    comm_req *group_next;    /* the next request of its NCCL group */
} nccl_req;

/* ---- comm_nccl_wait.c ---- */
ncclResult_t nccl_settle(ncclComm_t nc, double deadline);
void nccl_why(char *out, size_t cap, ncclComm_t nc, ncclResult_t r);
/* Aborts the NCCL communicator and marks c broken; -1 (e already set). */
int nccl_give_up(comm *c);
int nccl_fail_cuda(comm *c, const char *what, const char *call, cudaError_t err, tg_err *e);
int nccl_fail_nccl(comm *c, const char *what, const char *call, ncclResult_t r, tg_err *e);
int nccl_fail_timeout(comm *c, const char *what, const char *waiting_for, tg_err *e);
/* Refuses on a broken communicator; sets the deadline of NCCL's enqueueing. */
int nccl_op_begin(comm *c, const char *what, tg_err *e);
/* Fails on an element type NCCL is not given (aborting, as below). */
int nccl_bad_dtype(comm *c, const char *what, tg_dtype t, tg_err *e);
int nccl_check_buffer(comm *c, const char *what, const char *role, const void *p, tg_err *e);
/* A request for `what` with its events (made on first use); NULL on failure. */
comm_req *nccl_req_get(comm *c, coll_kind kind, uint64_t bytes, const char *what, tg_err *e);
/* Orders the comm stream after the compute stream's work so far (r->ready). */
int nccl_order_after_compute(comm *c, comm_req *r, tg_err *e);
/* After the NCCL call returned `res`: waits until NCCL has enqueued it. */
int nccl_enqueued(comm *c, comm_req *r, const char *call, ncclResult_t res, tg_err *e);
/* The start's last step: records r->done on the comm stream (in a group:
 * hands r to the group, which records it at its end). */
int nccl_mark_done(comm *c, comm_req *r, tg_err *e);
/* The wait of an enqueued request (see comm_nccl.c, "Waiting"). */
int nccl_finish(comm *c, comm_req *r, tg_err *e);
/* A deferred wait: the compute stream waits for the request's `done`. */
int nccl_order_compute_after(comm *c, comm_req *r, tg_err *e);
/* comm_settle: polls `tail` until every collective enqueued so far ended. */
int nccl_settle_all(comm *c, tg_err *e);
/* The vtable's capture_end and replayed (comm.h, comm_capture_begin). */
void nccl_capture_end(comm *c);
void nccl_replayed(comm *c);
/* Destroys r's events (communicator teardown). */
void nccl_req_release(comm *c, comm_req *r);

/* ---- comm_nccl_group.c ---- */
/* The vtable's group_begin and group_end (comm.h, "Groups"). */
int nccl_group_begin(comm *c, tg_err *e);
int nccl_group_end(comm *c, tg_err *e);
/* Joins r, whose NCCL call went into the open group, to it. */
int nccl_group_add(comm *c, comm_req *r, tg_err *e);
/* Closes the open NCCL group, if any, without waiting for it and forgets
 * its requests (the communicator is being aborted). */
void nccl_group_drop(nccl_impl *s);
/* Fails (aborting) when a collective that must complete within its start
 * is started inside a group; `why` says what it is. */
int nccl_refuse_in_group(comm *c, const char *what, const char *why, tg_err *e);

/* ---- comm_nccl_time.c ---- */
/* Records a span's start on the comm stream, just before NCCL's call (in a
 * group: the first collective's only). */
int nccl_time_begin(comm *c, const char *what, tg_err *e);
/* Records the open span's end, after the call (a group: after its launch). */
int nccl_time_end(comm *c, const char *what, tg_err *e);
/* Adds the spans that have run to c->seconds (after a wait on the host). */
int nccl_time_read(comm *c, tg_err *e);
/* The same once every collective has run (comm_settle); `replayed`: also
 * the captured graph's spans, recorded by the launch just settled. */
int nccl_time_read_settled(comm *c, int replayed, tg_err *e);
/* The capture ended: its spans are the graph's. */
void nccl_time_capture_end(nccl_impl *s);
void nccl_time_free(nccl_impl *s);

/* ---- comm_nccl_create.c / comm_nccl.c ---- */
extern const comm_vtable NCCL_VT;
void nccl_impl_free(const char *name, nccl_impl *s);

#endif

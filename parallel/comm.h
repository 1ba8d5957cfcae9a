/* The communicator interface: collectives over one group of ranks (a TP
 * group or a DP group). Implementations: comm_null (one rank standing in for
 * a whole group; at size 1 it is exactly right), comm_shm (ranks of one
 * node, through host memory) and comm_nccl (CUDA builds). Buffers hold
 * float32 or bf16 elements; where they live (host or device) is the
 * communicator's comm_memory. Every implementation counts the bytes this
 * rank sends per collective kind, which the log reports per step. Creating
 * a shm or NCCL communicator runs the group handshake of parallel/group.h. */
#ifndef PARALLEL_COMM_H
#define PARALLEL_COMM_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/dtype.h"
#include "util/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { COLL_ALL_REDUCE, COLL_REDUCE_SCATTER, COLL_ALL_GATHER, COLL_BROADCAST, COLL_KINDS } coll_kind;
typedef enum { REDUCE_SUM, REDUCE_MAX } reduce_op;

typedef struct comm comm;

/* How a communicator reaches the caller's buffers: host memory by default
 * (memcpy); a GPU backend supplies copies between its memory and the host
 * (kernels/ops.h: tg_ops.mem) so host-memory communicators can carry device
 * buffers. copy is buffer to buffer; the blocks it is given never overlap
 * partially (dst == src happens and must be a no-op). */
typedef struct comm_memory {
    void *ctx;
    void (*to_host)(void *ctx, void *host_dst, const void *buf_src, size_t bytes);
    void (*from_host)(void *ctx, void *buf_dst, const void *host_src, size_t bytes);
    void (*copy)(void *ctx, void *buf_dst, const void *buf_src, size_t bytes);
    int device;     /* 1: buffers are device memory (NCCL requires it) */
    void *stream;   /* device: the cudaStream_t the buffers' producers run on */
    /* device: ends a stream capture under way (its graph discarded) and
     * destroys the graphs that may hold collectives, without waiting for
     * their launches; NULL where there are none. Before an abort: NCCL's
     * waits until no graph holds the communicator's collectives. */
    void (*drop_graphs)(void *ctx);
} comm_memory;

/* Plain host memory: every copy is comm_host_copy (memmove; a no-op when
 * dst == src). */
void comm_host_copy(void *ctx, void *dst, const void *src, size_t bytes);
extern const comm_memory COMM_HOST_MEMORY;

/* One collective in flight, from its start to its comm_wait (below). */
typedef struct comm_req comm_req;
struct comm_req {
    comm *c;
    coll_kind kind;
    uint64_t bytes;   /* its ring bytes: added to c->bytes_sent when the wait succeeds */
    char what[96];    /* "all_reduce(sum) #12 of 4096 float32", for messages */
    void *impl;       /* the implementation's part (comm_nccl: its events) */
    double modeled_s; /* comm_null with a link: the seconds this collective would take (else 0) */
    comm_req *next;   /* the communicator's free list */
    comm_req *all;    /* every request the communicator ever made */
};

typedef struct comm_vtable {
    /* Starts: each returns a request from comm_req_get (NULL with e set on
     * failure). In place over n elements of type t. Sums of bf16 are
     * accumulated in float32 and rounded once. */
    comm_req *(*all_reduce)(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e);
    /* in holds size*n elements; this rank receives the sum of block [rank]. */
    comm_req *(*reduce_scatter)(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e);
    /* in holds n elements; out receives size*n, block r from rank r. */
    comm_req *(*all_gather)(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e);
    comm_req *(*broadcast)(comm *c, void *buf, size_t bytes, int root, tg_err *e);
    /* Completes r (comm_wait releases it afterwards): fails on a broken
     * communicator, naming the group. */
    int (*wait)(comm *c, comm_req *r, tg_err *e);
    int (*barrier)(comm *c, tg_err *e);
    void (*destroy)(comm *c);
    /* Waits on the host for every collective waited for under defer_waits
     * (comm_settle); NULL where waits never defer (all work done in the
     * start). */
    int (*settle)(comm *c, tg_err *e);
    /* comm_group_begin / comm_group_end past comm.c's checks; NULL where
     * a group changes nothing (every collective done in its start). */
    int (*group_begin)(comm *c, tg_err *e);
    int (*group_end)(comm *c, tg_err *e);
    /* CUDA graphs (comm_capture_begin below); NULL where the collectives
     * cannot be recorded into a graph (they run on the host). capture_end:
     * nothing captured has run, so nothing is left to settle; replayed:
     * after a launch of the graph, the next settle waits for it. */
    void (*capture_end)(comm *c);
    void (*replayed)(comm *c);
} comm_vtable;

/* A modeled interconnect, for projected runs. Without table rows a
 * collective that sends B bytes from each rank (ring volume, as bytes_sent
 * counts) takes latency_s + B / bus_bytes_per_s, NCCL's "bus bandwidth"
 * convention. With rows (an nccl-tests table: message size -> busbw, per
 * collective and optionally per group size) it takes B / busbw(S), S the
 * message size as nccl-tests counts it (the whole buffer: all_reduce's n
 * elements, reduce_scatter's input, all_gather's output, broadcast's
 * bytes), busbw interpolated linearly in log S between rows, the last row's
 * beyond them, and below the first row the first row's time: latency.
 * Which rows (comm_link_rows_for): a group of n ranks uses its collective's
 * rows for n ranks; else its rows for any size (rows without a ranks
 * column); else its rows for the nearest size that has some (a tie goes to
 * the smaller size: in the shipped tables busbw grows with the group, so
 * that is the less optimistic choice); a collective without rows of its own
 * uses all_reduce's, by the same rule. Sizes are not interpolated: a
 * table's rows for 2, 4 and 8 ranks are three curves, and a curve made
 * between two would be a measurement nobody took. */
#define COMM_LINK_ROWS 64    /* per collective and group size */
#define COMM_LINK_DEGREES 8  /* group sizes per collective (any size counting as one) */
typedef struct comm_link_row {
    double bytes, bus_bytes_per_s;
} comm_link_row;
typedef struct comm_link_set {
    int ranks; /* the group size these rows hold for; 0: any */
    int n;
    comm_link_row rows[COMM_LINK_ROWS]; /* by increasing bytes */
} comm_link_set;
typedef struct comm_link {
    double bus_bytes_per_s, latency_s;
    int n_sets[COLL_KINDS];
    comm_link_set sets[COLL_KINDS][COMM_LINK_DEGREES];
} comm_link;

/* The flat model: every collective latency_s + B / bus_bytes_per_s. */
comm_link comm_link_flat(double bus_bytes_per_s, double latency_s);

/* Reads a table file over l's rows: one "collective bytes busbw_GBps
 * [ranks]" line per row ('#' starts a comment), collective one of
 * all_reduce, reduce_scatter, all_gather, broadcast; ranks (2 or more) the
 * group size the row was measured at, absent for a row that holds at any
 * size; sizes distinct per collective and ranks; at least one all_reduce
 * row. Errors name the file and the line. */
int comm_link_load(comm_link *l, const char *path, tg_err *e);

/* The rows a collective of kind k over a group of `ranks` uses (the rule
 * above), or NULL for the flat model (no rows at all). */
const comm_link_set *comm_link_rows_for(const comm_link *l, coll_kind k, int ranks);

/* The modeled overlap of collectives with compute: collective i becomes
 * ready at ready_s[i] <= end_s and takes seconds[i] on the link, one at a
 * time in order; the compute beside them ends at end_s. Returns the seconds
 * hidden behind it: the total less the time the link is still busy after
 * end_s (which is what the step waits). */
double comm_overlap_hidden_s(const double *ready_s, const double *seconds, int n, double end_s);
/* The modeled overlap of a prefetch with the compute that consumes it:
 * collectives all start at 0 and take seconds[i] on the link, one at a
 * time in order; the compute reaches the point that needs collective i's
 * result at need_s[i] (non-decreasing, on its own clock) and stalls there
 * until it is done, which delays everything after. Returns the seconds
 * hidden: the total less the stalls. */
double comm_prefetch_hidden_s(const double *need_s, const double *seconds, int n);
/* The modeled overlap of TP collectives with the products that run beside
 * them (comm_note_beside): record i's collective takes b[i].seconds on the
 * link while b[i].flops of products run beside it at seconds_per_flop, and
 * the next op waits for both. Returns the seconds hidden: the sum over the
 * records of the shorter of the two. */
typedef struct comm_beside {
    double seconds, flops;
} comm_beside;
double comm_beside_hidden_s(const comm_beside *b, int n, double seconds_per_flop);
/* Modeled seconds of one collective of kind k over a group of `ranks`, a
 * message of msg_bytes of which this rank sends ring_bytes. */
double comm_link_seconds(const comm_link *l, coll_kind k, int ranks, double msg_bytes, double ring_bytes);

struct comm {
    const comm_vtable *vt;
    char name[32];  /* "tp" or "dp", for messages and logs */
    int rank, size; /* within this group */
    uint64_t bytes_sent[COLL_KINDS];
    double seconds;         /* wall time spent inside collectives (the comm_* calls below); device_timed: their device time */
    int device_timed;       /* the implementation adds its collectives' device time to seconds itself (comm_nccl: CUDA
                               events on its stream), and the calls below add no host time */
    double modeled_seconds; /* comm_null with a link: the time the collectives would take */
    comm_link link;
    comm_memory mem;        /* where the buffers live (COMM_HOST_MEMORY unless comm_use_memory) */
    int defer_waits;        /* comm_defer_waits */
    int capturing;          /* between comm_capture_begin and comm_capture_end */
    uint64_t bytes_at_capture[COLL_KINDS]; /* bytes_sent when the capture began */
    uint64_t replay_bytes[COLL_KINDS];     /* what one launch of the captured graph sends */
    int in_group;           /* between comm_group_begin and comm_group_end */
    uint64_t groups;        /* groups ended (comm_group_end), for tests */
    comm_req *free_reqs;    /* finished requests, for reuse */
    comm_req *all_reqs;     /* every request made (chained by ->all), freed by destroy */
    comm_beside *beside;    /* comm_note_beside's records since comm_beside_clear */
    int n_beside, cap_beside;
    void *impl;
};

/* The projection's record of what runs beside a collective in flight: r,
 * started on c and not yet waited for, has flops of this rank's products
 * beside it before its wait (on a GPU the communicator's stream runs it
 * meanwhile). Only collectives with modeled seconds (comm_null with a link)
 * are recorded, for comm_beside_hidden_s; on the others it does nothing. */
void comm_note_beside(comm *c, const comm_req *r, double flops);
/* Forgets the records (at the start of a step). */
static inline void comm_beside_clear(comm *c) { c->n_beside = 0; }

/* Makes c move its buffers with m (before the first collective). */
static inline void comm_use_memory(comm *c, const comm_memory *m) { c->mem = *m; }

/* Deferred waits (what a training step uses, so that the host never waits
 * for a collective inside it): while on, comm_wait of a collective that runs
 * on the device (NCCL) only orders the compute stream after it and returns
 * at once, so later kernels see its result; the host learns that it ended,
 * or failed or hung, at comm_settle, which must come before the host reads
 * anything the collectives wrote (turning deferral off does not settle).
 * Collectives on host buffers still complete in their start. The other
 * communicators finish their work in the start and are unaffected. */
static inline void comm_defer_waits(comm *c, int on) { c->defer_waits = on; }
/* Waits on the host until every collective started on c has ended,
 * watching for failures and parallel.timeout_s (counted from this call, so it
 * includes the compute still queued before the last collective); 0, or -1
 * with e set (the communicator is then broken). Not counted in c->seconds:
 * it mostly waits for compute. */
int comm_settle(comm *c, tg_err *e);

/* CUDA graphs (train.cuda_graph): a training step captured once, under
 * deferred waits, and launched again every step.
 * comm_capturable: whether c's collectives can be recorded into the graph:
 * comm_nccl's run on the device (on its own stream, which forks off the
 * captured compute stream and joins it back at each wait), a comm_null of
 * size 1 does nothing; comm_shm's run on the host and cannot.
 * comm_capture_begin and comm_capture_end bracket the capture: the
 * collectives started in between are recorded, not run, so the bytes their
 * waits counted are taken back and kept as one launch's (replay_bytes).
 * comm_replayed, after each launch of the graph (every rank launches the
 * graph holding the same collectives, NCCL's rule): bytes_sent gains one
 * launch's bytes, and the next comm_settle waits for the launch, watching
 * for failures and parallel.timeout_s as for collectives run op by op.
 * c->seconds gains nothing for a launch (the host waits inside no
 * collective). */
int comm_capturable(const comm *c);
void comm_capture_begin(comm *c);
void comm_capture_end(comm *c);
void comm_replayed(comm *c);

static inline double comm_clock(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The collectives: callers use these rather than the vtable.
 *
 * Non-blocking form: a start returns a request (NULL with e set when it
 * fails), and comm_wait completes it, releases it and returns 0, or -1 with
 * e set (comm_wait(NULL, e) returns -1 and leaves e alone, so
 * comm_wait(comm_x_start(...), e) is the blocking call). Several collectives
 * may be in flight on one communicator; they complete in the order they were
 * started (waits may come in any order), and every rank must start the
 * same collectives in the same order.
 * The buffers belong to the collective until its wait returns: do not read
 * or write them in between. A wait fails, naming the group, when the
 * communicator is broken (by a failure of this or any other collective since
 * the start): the results of every collective in flight are then undefined.
 * Wait for every request before comm_destroy, which frees them all.
 *
 * comm_null and comm_shm do all the work in the start (shm has no progress
 * thread: the ranks meet in the start) and the wait only reports failure
 * since. comm_nccl enqueues the collective on its own stream, after the work
 * already queued on the compute stream (mem.stream), and returns; its wait
 * orders the compute stream after the collective and waits on the host until
 * it is done (unless waits are deferred: see comm_defer_waits), so compute
 * queued between start and wait may overlap it.
 * NCCL collectives on host buffers complete in the start.
 *
 * Accounting: c->seconds gains the time spent inside starts and waits (the
 * blocking call's whole time), or, where c->device_timed (comm_nccl), the
 * time the collective ran on the device, added when the host learns it
 * ended (a wait on the host, comm_settle); bytes_sent[kind] gains the
 * collective's ring bytes once, when its wait succeeds. */
comm_req *comm_all_reduce_start(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e);
comm_req *comm_reduce_scatter_start(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e);
comm_req *comm_all_gather_start(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e);
comm_req *comm_broadcast_start(comm *c, void *buf, size_t bytes, int root, tg_err *e);
int comm_wait(comm_req *r, tg_err *e);

/* Groups: several collectives in one launch.
 *
 * The collectives started on c between comm_group_begin(c) and
 * comm_group_end(c) may go out together: comm_nccl makes them one NCCL
 * group call (ncclGroupStart ... ncclGroupEnd), one fused kernel launch
 * instead of one per collective (comm_nccl_group.c); comm_null and comm_shm
 * do all the work in the start, so there a group changes nothing. A group
 * changes how the collectives are launched, not what they compute or
 * count: each still returns its request, is waited for after the end as
 * usual, and adds its bytes to bytes_sent at its wait. (NCCL may tune its
 * algorithm for the launch as a whole, so with more than two members a
 * sum's bits may differ from the ungrouped launch, as they may between
 * NCCL versions; with two a sum is one addition.)
 *
 * Rules, checked here on every communicator (so that the CPU tests catch
 * what would hang or go wrong under NCCL):
 *   - no comm_wait, comm_settle or comm_barrier on c inside a group: under
 *     NCCL nothing of the group has been enqueued before the end, so the
 *     wait would wait for nothing or forever. They fail at once, naming the
 *     group (-1, e set); a refused wait leaves its request in flight, to
 *     be waited for after comm_group_end. The blocking forms (comm_*_t)
 *     wait, so inside a group they start their collective and then fail,
 *     its request lost to the caller: do not use them there.
 *   - groups do not nest: comm_group_begin inside a group fails, and so
 *     does comm_group_end outside one.
 *   - only c's collectives in between: NCCL's group belongs to the calling
 *     thread, so another NCCL communicator's collective would join it.
 *   - comm_nccl refuses, breaking the communicator, what cannot wait for
 *     the end: host buffers (staged and completed within the start) and a
 *     reduce_scatter with out == in at rank > 0 (its copy follows the
 *     collective); use device buffers and out == in + rank*n.
 * Call comm_group_end after a failed start too (it then fails, the
 * communicator being broken, and the group is closed). A failure of the
 * launch at the end breaks the communicator, naming the group and its first
 * and last collectives; the waits of its requests then fail as after any
 * failure. c->seconds counts the time inside comm_group_end (the launch);
 * c->groups counts the groups ended. */
int comm_group_begin(comm *c, tg_err *e);
int comm_group_end(comm *c, tg_err *e);

/* Blocking: start and wait. */
static inline int comm_all_reduce_t(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e) {
    return comm_wait(comm_all_reduce_start(c, buf, n, t, op, e), e);
}
static inline int comm_reduce_scatter_t(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    return comm_wait(comm_reduce_scatter_start(c, out, in, n, t, e), e);
}
static inline int comm_all_gather_t(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    return comm_wait(comm_all_gather_start(c, out, in, n, t, e), e);
}
static inline int comm_broadcast(comm *c, void *buf, size_t bytes, int root, tg_err *e) {
    return comm_wait(comm_broadcast_start(c, buf, bytes, root, e), e);
}
/* Returns when every member has reached it. Not timed, not counted;
 * refused inside a group. */
int comm_barrier(comm *c, tg_err *e);
/* The float32 forms most callers use. */
static inline int comm_all_reduce(comm *c, float *buf, size_t n, reduce_op op, tg_err *e) {
    return comm_all_reduce_t(c, buf, n, TG_F32, op, e);
}
static inline int comm_reduce_scatter(comm *c, float *out, const float *in, size_t n, tg_err *e) {
    return comm_reduce_scatter_t(c, out, in, n, TG_F32, e);
}
static inline int comm_all_gather(comm *c, float *out, const float *in, size_t n, tg_err *e) {
    return comm_all_gather_t(c, out, in, n, TG_F32, e);
}

/* For implementations: a request of c for one collective of `kind` that
 * sends `bytes` (ring volume), described by `what`; NULL with e set when
 * out of memory. comm_req_put gives it back (a failed start does so itself;
 * comm_wait does so after the wait). */
comm_req *comm_req_get(comm *c, coll_kind kind, uint64_t bytes, const char *what, tg_err *e);
void comm_req_put(comm *c, comm_req *r);
/* Frees every request c made, waited for or not, calling release (if not
 * NULL) on each first; implementations call it from destroy. */
void comm_req_free_all(comm *c, void (*release)(comm *c, comm_req *r));

/* A group of `size` ranks simulated by this one: collectives leave or copy
 * this rank's data, send nothing, and count the bytes a ring algorithm would
 * send (projection mode). At size 1 every collective is the identity. */
comm *comm_null_create(const char *name, int rank, int size);
/* The same, accumulating modeled_seconds for every collective over `link`. */
comm *comm_null_create_modeled(const char *name, int rank, int size, comm_link link);
/* Whether c was made by comm_null_create*: its collectives never leave
 * this process (and at size 1 do nothing at all). */
int comm_is_null(const comm *c);

const char *comm_kind_name(coll_kind k);
void comm_destroy(comm *c);

/* Bytes each rank sends for one collective under a ring algorithm, the
 * traffic every implementation reports in bytes_sent (so measured and
 * projected runs agree). `floats` is the whole buffer: n for all_reduce, the
 * input size*n for reduce_scatter, the output size*n for all_gather:
 * all_reduce 2*(size-1)*(floats/size), reduce_scatter and all_gather
 * (size-1)*(floats/size), times sizeof(float); 0 at size 1. Not for
 * COLL_BROADCAST (returns 0): see comm_broadcast_bytes. */
uint64_t comm_ring_bytes(coll_kind k, int size, size_t floats);
/* The same for elements of elem_bytes each. */
uint64_t comm_ring_bytes_of(coll_kind k, int size, size_t n, size_t elem_bytes);
/* A broadcast of `bytes` counts them at the root only (0 at size 1). */
uint64_t comm_broadcast_bytes(int size, int rank, int root, size_t bytes);

/* Shared-memory communicator for ranks on one node (parallel/comm_shm*.c;
 * its collectives complete in their start, see above).
 * Collective over the whole world: every rank calls it, in the same order
 * and with the same `name` ("tp", "dp"), each passing its own group (global
 * ranks in group order; my_index = this rank's position in it). Members of a
 * group must be on one node. Each group of size > 1 gets one POSIX shm
 * segment of size+1 slots (reserved up front: a full /dev/shm fails here,
 * clearly), already unlinked when this returns; a group of size 1 gets a
 * comm_null (exact at size 1). Every wait gives up after
 * timeout_s or as soon as a member process has died, naming the group, the
 * collective and the global ranks that did not arrive; the communicator is
 * then broken and every later call fails. Sums run in rank order 0..size-1,
 * so results are bitwise equal on every rank and every run (also between
 * all_reduce and reduce_scatter). MAX propagates NaN. all_reduce is in place;
 * reduce_scatter accepts out == in or out == in + rank*n; all_gather accepts
 * in == out + rank*n. */
typedef struct bootstrap bootstrap;
comm *comm_shm_create(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index, double timeout_s,
                      tg_err *e);
/* The same with a chosen per-rank staging slot (bytes; default
 * COMM_SHM_SLOT_BYTES); larger buffers go through it in chunks. */
#define COMM_SHM_SLOT_BYTES ((size_t)4 << 20)
comm *comm_shm_create_slot(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index,
                           double timeout_s, size_t slot_bytes, tg_err *e);

/* NCCL communicator (parallel/comm_nccl*.c, built with make GPU=1): the same
 * collective contract over device buffers, on its own stream ordered after
 * mem->stream with events (a start enqueues, the wait waits, see above). Rank 0 of the group makes the NCCL unique id and
 * the bootstrap carries it (collective over the whole world, like
 * comm_shm_create). A group of size 1 gets a comm_null. A NCCL error, an
 * asynchronous error or a wait beyond timeout_s aborts the communicator
 * (ncclCommAbort) and fails with the group and collective named. NULL with
 * a message in a build without NCCL. */
comm *comm_nccl_create(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index,
                       const comm_memory *mem, double timeout_s, tg_err *e);
/* The same, but a group of size 1 gets a real NCCL communicator too (so the
 * NCCL path runs on a machine with one GPU: tests, parallel.comm = nccl at
 * world size 1). */
comm *comm_nccl_create_at_size_1(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index,
                                 const comm_memory *mem, double timeout_s, tg_err *e);

#ifdef __cplusplus
}
#endif

#endif

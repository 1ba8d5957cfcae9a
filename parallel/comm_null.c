#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

/* Counts a collective's bytes and, with a link, its modeled time. */
static void account(comm *c, coll_kind k, uint64_t bytes) {
    c->bytes_sent[k] += bytes;
    if (c->size > 1 && c->link.bus_bytes_per_s > 0)
        c->modeled_seconds += c->link.latency_s + (double)bytes / c->link.bus_bytes_per_s;
}

static int null_all_reduce(comm *c, float *buf, size_t n, reduce_op op, tg_err *e) {
    (void)buf; (void)op; (void)e;
    account(c, COLL_ALL_REDUCE, comm_ring_bytes(COLL_ALL_REDUCE, c->size, n));
    return 0;
}

static int null_reduce_scatter(comm *c, float *out, const float *in, size_t n, tg_err *e) {
    (void)e;
    memmove(out, in + (size_t)c->rank * n, n * sizeof(float));
    account(c, COLL_REDUCE_SCATTER, comm_ring_bytes(COLL_REDUCE_SCATTER, c->size, n * (size_t)c->size));
    return 0;
}

static int null_all_gather(comm *c, float *out, const float *in, size_t n, tg_err *e) {
    (void)e;
    for (int r = c->size - 1; r >= 0; r--) memmove(out + (size_t)r * n, in, n * sizeof(float));
    account(c, COLL_ALL_GATHER, comm_ring_bytes(COLL_ALL_GATHER, c->size, n * (size_t)c->size));
    return 0;
}

static int null_broadcast(comm *c, void *buf, size_t bytes, int root, tg_err *e) {
    (void)buf; (void)e;
    account(c, COLL_BROADCAST, comm_broadcast_bytes(c->size, c->rank, root, bytes));
    return 0;
}

static int null_barrier(comm *c, tg_err *e) { (void)c; (void)e; return 0; }

static void null_destroy(comm *c) { free(c); }

static const comm_vtable NULL_VT = {null_all_reduce, null_reduce_scatter, null_all_gather, null_broadcast, null_barrier,
                                    null_destroy};

comm *comm_null_create(const char *name, int rank, int size) {
    comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->vt = &NULL_VT;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->rank = rank;
    c->size = size;
    return c;
}

comm *comm_null_create_modeled(const char *name, int rank, int size, comm_link link) {
    comm *c = comm_null_create(name, rank, size);
    if (c) c->link = link;
    return c;
}

/* Bytes a ring algorithm sends from each rank, so projected runs report the
 * traffic their real counterparts would have. */
uint64_t comm_ring_bytes(coll_kind k, int size, size_t floats) {
    if (size <= 1) return 0;
    int passes = k == COLL_ALL_REDUCE ? 2 : (k == COLL_REDUCE_SCATTER || k == COLL_ALL_GATHER) ? 1 : 0;
    return (uint64_t)passes * (uint64_t)(size - 1) * (floats / (size_t)size) * sizeof(float);
}

uint64_t comm_broadcast_bytes(int size, int rank, int root, size_t bytes) {
    return rank == root && size > 1 ? (uint64_t)bytes : 0;
}

const char *comm_kind_name(coll_kind k) {
    static const char *const names[COLL_KINDS] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
    return (unsigned)k < COLL_KINDS ? names[k] : "?";
}

void comm_destroy(comm *c) {
    if (c) c->vt->destroy(c);
}

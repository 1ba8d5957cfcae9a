/* comm_null: one rank standing in for a group. Every collective completes
 * in its start (it moves this rank's data only); the request only carries
 * the ring bytes a real group would send, which comm_wait counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

/* A request for a collective of `bytes`, with its modeled time added now. */
static comm_req *started(comm *c, coll_kind k, uint64_t bytes, tg_err *e) {
    if (c->size > 1 && c->link.bus_bytes_per_s > 0)
        c->modeled_seconds += c->link.latency_s + (double)bytes / c->link.bus_bytes_per_s;
    return comm_req_get(c, k, bytes, comm_kind_name(k), e);
}

static comm_req *null_all_reduce(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e) {
    (void)buf; (void)op;
    return started(c, COLL_ALL_REDUCE, comm_ring_bytes_of(COLL_ALL_REDUCE, c->size, n, tg_dtype_bytes(t)), e);
}

/* This rank's block stands for the sum (the buffers' blocks never overlap
 * partially: out is in itself or another block). */
static comm_req *null_reduce_scatter(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    const size_t bytes = n * tg_dtype_bytes(t);
    c->mem.copy(c->mem.ctx, out, (const char *)in + (size_t)c->rank * bytes, bytes);
    return started(c, COLL_REDUCE_SCATTER,
                   comm_ring_bytes_of(COLL_REDUCE_SCATTER, c->size, n * (size_t)c->size, tg_dtype_bytes(t)), e);
}

/* Every block gets this rank's data. */
static comm_req *null_all_gather(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    const size_t bytes = n * tg_dtype_bytes(t);
    for (int r = c->size - 1; r >= 0; r--) c->mem.copy(c->mem.ctx, (char *)out + (size_t)r * bytes, in, bytes);
    return started(c, COLL_ALL_GATHER, comm_ring_bytes_of(COLL_ALL_GATHER, c->size, n * (size_t)c->size, tg_dtype_bytes(t)),
                   e);
}

static comm_req *null_broadcast(comm *c, void *buf, size_t bytes, int root, tg_err *e) {
    (void)buf;
    return started(c, COLL_BROADCAST, comm_broadcast_bytes(c->size, c->rank, root, bytes), e);
}

/* Nothing can break: the work is done. */
static int null_wait(comm *c, comm_req *r, tg_err *e) { (void)c; (void)r; (void)e; return 0; }

static int null_barrier(comm *c, tg_err *e) { (void)c; (void)e; return 0; }

static void null_destroy(comm *c) {
    comm_req_free_all(c, NULL);
    free(c);
}

static const comm_vtable NULL_VT = {null_all_reduce, null_reduce_scatter, null_all_gather, null_broadcast, null_wait,
                                    null_barrier, null_destroy};

comm *comm_null_create(const char *name, int rank, int size) {
    comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->vt = &NULL_VT;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->rank = rank;
    c->size = size;
    c->mem = COMM_HOST_MEMORY;
    return c;
}

comm *comm_null_create_modeled(const char *name, int rank, int size, comm_link link) {
    comm *c = comm_null_create(name, rank, size);
    if (c) c->link = link;
    return c;
}

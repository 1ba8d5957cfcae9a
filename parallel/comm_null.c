#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

void comm_host_copy(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (dst != src) memmove(dst, src, bytes);
}

const comm_memory COMM_HOST_MEMORY = {NULL, comm_host_copy, comm_host_copy, comm_host_copy, 0, NULL};

/* Counts a collective's bytes and, with a link, its modeled time. */
static void account(comm *c, coll_kind k, uint64_t bytes) {
    c->bytes_sent[k] += bytes;
    if (c->size > 1 && c->link.bus_bytes_per_s > 0)
        c->modeled_seconds += c->link.latency_s + (double)bytes / c->link.bus_bytes_per_s;
}

static int null_all_reduce(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e) {
    (void)buf; (void)op; (void)e;
    account(c, COLL_ALL_REDUCE, comm_ring_bytes_of(COLL_ALL_REDUCE, c->size, n, tg_dtype_bytes(t)));
    return 0;
}

/* This rank's block stands for the sum (the buffers' blocks never overlap
 * partially: out is in itself or another block). */
static int null_reduce_scatter(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    (void)e;
    const size_t bytes = n * tg_dtype_bytes(t);
    c->mem.copy(c->mem.ctx, out, (const char *)in + (size_t)c->rank * bytes, bytes);
    account(c, COLL_REDUCE_SCATTER, comm_ring_bytes_of(COLL_REDUCE_SCATTER, c->size, n * (size_t)c->size, tg_dtype_bytes(t)));
    return 0;
}

/* Every block gets this rank's data. */
static int null_all_gather(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    (void)e;
    const size_t bytes = n * tg_dtype_bytes(t);
    for (int r = c->size - 1; r >= 0; r--) c->mem.copy(c->mem.ctx, (char *)out + (size_t)r * bytes, in, bytes);
    account(c, COLL_ALL_GATHER, comm_ring_bytes_of(COLL_ALL_GATHER, c->size, n * (size_t)c->size, tg_dtype_bytes(t)));
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
    c->mem = COMM_HOST_MEMORY;
    return c;
}

comm *comm_null_create_modeled(const char *name, int rank, int size, comm_link link) {
    comm *c = comm_null_create(name, rank, size);
    if (c) c->link = link;
    return c;
}

/* Bytes a ring algorithm sends from each rank, so projected runs report the
 * traffic their real counterparts would have. */
uint64_t comm_ring_bytes_of(coll_kind k, int size, size_t n, size_t elem_bytes) {
    if (size <= 1) return 0;
    int passes = k == COLL_ALL_REDUCE ? 2 : (k == COLL_REDUCE_SCATTER || k == COLL_ALL_GATHER) ? 1 : 0;
    return (uint64_t)passes * (uint64_t)(size - 1) * (n / (size_t)size) * elem_bytes;
}

uint64_t comm_ring_bytes(coll_kind k, int size, size_t floats) { return comm_ring_bytes_of(k, size, floats, sizeof(float)); }

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

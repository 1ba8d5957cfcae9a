#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

/* Bytes a ring algorithm sends from each rank, so projected runs report the
 * traffic their real counterparts would have. */
static uint64_t ring_bytes(const comm *c, size_t total_floats, int passes) {
    if (c->size <= 1) return 0;
    return (uint64_t)passes * (uint64_t)(c->size - 1) * (total_floats / (size_t)c->size) * sizeof(float);
}

static int null_all_reduce(comm *c, float *buf, size_t n, reduce_op op, tg_err *e) {
    (void)buf; (void)op; (void)e;
    c->bytes_sent[COLL_ALL_REDUCE] += ring_bytes(c, n, 2);
    return 0;
}

static int null_reduce_scatter(comm *c, float *out, const float *in, size_t n, tg_err *e) {
    (void)e;
    memmove(out, in + (size_t)c->rank * n, n * sizeof(float));
    c->bytes_sent[COLL_REDUCE_SCATTER] += ring_bytes(c, n * (size_t)c->size, 1);
    return 0;
}

static int null_all_gather(comm *c, float *out, const float *in, size_t n, tg_err *e) {
    (void)e;
    for (int r = c->size - 1; r >= 0; r--) memmove(out + (size_t)r * n, in, n * sizeof(float));
    c->bytes_sent[COLL_ALL_GATHER] += ring_bytes(c, n * (size_t)c->size, 1);
    return 0;
}

static int null_broadcast(comm *c, void *buf, size_t bytes, int root, tg_err *e) {
    (void)buf; (void)e;
    if (c->rank == root && c->size > 1) c->bytes_sent[COLL_BROADCAST] += bytes;
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

const char *comm_kind_name(coll_kind k) {
    static const char *const names[COLL_KINDS] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
    return (unsigned)k < COLL_KINDS ? names[k] : "?";
}

void comm_destroy(comm *c) {
    if (c) c->vt->destroy(c);
}

/* The communicator interface: collectives over one group of ranks (a TP
 * group or a DP group). Implementations: comm_null (one rank standing in for
 * a whole group; at size 1 it is exactly right), and later comm_shm and
 * comm_nccl. Every implementation counts the bytes this rank sends per
 * collective kind, which the log reports per step. */
#ifndef PARALLEL_COMM_H
#define PARALLEL_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef enum { COLL_ALL_REDUCE, COLL_REDUCE_SCATTER, COLL_ALL_GATHER, COLL_BROADCAST, COLL_KINDS } coll_kind;
typedef enum { REDUCE_SUM, REDUCE_MAX } reduce_op;

typedef struct comm comm;

typedef struct comm_vtable {
    /* In place over n floats. */
    int (*all_reduce)(comm *c, float *buf, size_t n, reduce_op op, tg_err *e);
    /* in holds size*n floats; this rank receives the sum of block [rank]. */
    int (*reduce_scatter)(comm *c, float *out, const float *in, size_t n, tg_err *e);
    /* in holds n floats; out receives size*n, block r from rank r. */
    int (*all_gather)(comm *c, float *out, const float *in, size_t n, tg_err *e);
    int (*broadcast)(comm *c, void *buf, size_t bytes, int root, tg_err *e);
    int (*barrier)(comm *c, tg_err *e);
    void (*destroy)(comm *c);
} comm_vtable;

struct comm {
    const comm_vtable *vt;
    char name[32];  /* "tp" or "dp", for messages and logs */
    int rank, size; /* within this group */
    uint64_t bytes_sent[COLL_KINDS];
    void *impl;
};

/* A group of `size` ranks simulated by this one: collectives leave or copy
 * this rank's data, send nothing, and count the bytes a ring algorithm would
 * send (projection mode). At size 1 every collective is the identity. */
comm *comm_null_create(const char *name, int rank, int size);

const char *comm_kind_name(coll_kind k);
void comm_destroy(comm *c);

#endif

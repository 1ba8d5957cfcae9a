/* Private to the shared-memory communicator (comm_shm.c: the collectives
 * and creation; comm_shm_sync.c: barriers, waits and failure detection;
 * comm_shm_segment.c: the segment and its members' processes). */
#ifndef PARALLEL_COMM_SHM_IMPL_H
#define PARALLEL_COMM_SHM_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "parallel/comm.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "comm_shm needs lock-free atomics to share them between processes");

#define BARRIER_KIND COLL_KINDS /* op kind of barrier(), beyond the counted kinds */

typedef struct {
    _Alignas(64) _Atomic uint64_t arrived; /* barriers reached */
    uint64_t op_seq;                        /* the operation this member is in, for the mismatch check */
    uint64_t op_n;
    int32_t op_kind, op_arg;
    _Atomic int32_t pid;
    int32_t global_rank;
    uint64_t start_time; /* /proc/<pid>/stat start time, against reused pids */
} member_line;

typedef struct {
    uint32_t magic, version;
    uint32_t size, pad;
    uint64_t slot_floats, map_bytes;
    _Alignas(64) _Atomic uint32_t wake_seq; /* futex word: bumped to wake sleeping members */
    _Alignas(64) _Atomic uint32_t sleepers; /* members about to sleep or sleeping on wake_seq */
    _Alignas(64) _Atomic int32_t abort_state; /* 0: fine; 1: a member is writing why it failed; 2: written */
    int32_t abort_rank;          /* global rank that wrote abort_msg */
    char abort_msg[700];
} shm_header;

typedef struct {
    char *base;
    size_t map_bytes;
    shm_header *hdr;
    member_line *mem;
    float *slots; /* member r's slot: slots + r * slot_stride */
    float *result;
    void *scratch; /* private, one slot: a reduce-scatter's sum on its way to device memory */
    size_t slot_floats, slot_stride;
    int *granks; /* global ranks of the members */
    uint64_t gen, ops;
    double timeout_s;
    int broken;
} shm_impl;

static inline float *shm_slot(shm_impl *s, int r) { return s->slots + (size_t)r * s->slot_stride; }

/* ---- comm_shm_sync.c ---- */
/* Marks c broken and tells the other members why (e holds it). Returns -1. */
int shm_fail(comm *c, tg_err *e);
/* One barrier over the members; fails on death, timeout or abort. */
int shm_sync_all(comm *c, const char *what, tg_err *e);
/* Starts an operation (formats `what`), refusing on a broken communicator. */
int shm_begin_op(comm *c, int kind, int arg, size_t n, char *what, size_t cap, tg_err *e);
/* A barrier; after the first of an operation, checks every member called the same one. */
int shm_first_sync(comm *c, const char *what, int first, tg_err *e);
/* 0, or -1 with the reason when c is broken here or any member gave up. */
int shm_check_alive(comm *c, const char *what, tg_err *e);

/* ---- comm_shm_segment.c ---- */
int shm_create_segment(shm_impl *s, int p, const char *shm_name, tg_err *e);
int shm_attach_segment(shm_impl *s, int p, const char *shm_name, tg_err *e);
/* Points the impl at the parts of the mapped segment and registers this member. */
void shm_wire_up(shm_impl *s, int p, int my_index, int my_rank);
/* Whether member m's process has died (or its pid now names another process). */
int shm_member_dead(const member_line *m);

#endif

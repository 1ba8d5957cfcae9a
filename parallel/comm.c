/* What every communicator shares: host memory, requests, the timed and
 * counted entry points of comm.h, ring byte counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

void comm_host_copy(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (dst != src) memmove(dst, src, bytes);
}

const comm_memory COMM_HOST_MEMORY = {NULL, comm_host_copy, comm_host_copy, comm_host_copy, 0, NULL, NULL};

/* ---- requests ------------------------------------------------------------
 * Requests are recycled through a free list: a step starts thousands of
 * collectives, and their implementation parts (CUDA events) are costly to
 * make. */

comm_req *comm_req_get(comm *c, coll_kind kind, uint64_t bytes, const char *what, tg_err *e) {
    comm_req *r = c->free_reqs;
    if (r) {
        c->free_reqs = r->next;
    } else {
        r = calloc(1, sizeof *r);
        if (!r) {
            tg_fail(e, "group %s: %s: out of memory for a request", c->name, what);
            return NULL;
        }
        r->all = c->all_reqs;
        c->all_reqs = r;
    }
    r->c = c;
    r->kind = kind;
    r->bytes = bytes;
    r->modeled_s = 0;
    r->next = NULL;
    snprintf(r->what, sizeof r->what, "%s", what);
    return r;
}

void comm_req_put(comm *c, comm_req *r) {
    r->next = c->free_reqs;
    c->free_reqs = r;
}

void comm_req_free_all(comm *c, void (*release)(comm *c, comm_req *r)) {
    for (comm_req *r = c->all_reqs, *nx; r; r = nx) {
        nx = r->all;
        if (release) release(c, r);
        free(r);
    }
    c->all_reqs = c->free_reqs = NULL;
}

/* ---- the entry points: timed here, counted in comm_wait -------------------- */

/* The clock is read in a statement of its own before the work: C leaves
 * the order in which a call's arguments are evaluated open. */
static comm_req *timed(comm *c, double t0, comm_req *r) {
    if (!c->device_timed) c->seconds += comm_clock() - t0;
    return r;
}

comm_req *comm_all_reduce_start(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e) {
    const double t0 = comm_clock();
    return timed(c, t0, c->vt->all_reduce(c, buf, n, t, op, e));
}

comm_req *comm_reduce_scatter_start(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    const double t0 = comm_clock();
    return timed(c, t0, c->vt->reduce_scatter(c, out, in, n, t, e));
}

comm_req *comm_all_gather_start(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    const double t0 = comm_clock();
    return timed(c, t0, c->vt->all_gather(c, out, in, n, t, e));
}

comm_req *comm_broadcast_start(comm *c, void *buf, size_t bytes, int root, tg_err *e) {
    const double t0 = comm_clock();
    return timed(c, t0, c->vt->broadcast(c, buf, bytes, root, e));
}

/* The refusal of a call that waits, inside a group (comm.h, "Groups"). */
static int refused_in_group(const comm *c, const char *call, const char *what, tg_err *e) {
    return tg_fail(e, "group %s: %s%s%s inside a group (comm_group_begin): the group's collectives are launched only at "
                   "comm_group_end, so it would wait for nothing or forever; wait after the end", c->name, call,
                   what ? " of " : "", what ? what : "");
}

int comm_group_begin(comm *c, tg_err *e) {
    if (c->in_group) return tg_fail(e, "group %s: comm_group_begin inside a group: groups do not nest", c->name);
    if (c->vt->group_begin && c->vt->group_begin(c, e)) return -1;
    c->in_group = 1;
    return 0;
}

int comm_group_end(comm *c, tg_err *e) {
    if (!c->in_group) return tg_fail(e, "group %s: comm_group_end without comm_group_begin", c->name);
    c->in_group = 0;
    c->groups++;
    const double t0 = comm_clock();
    const int rc = c->vt->group_end ? c->vt->group_end(c, e) : 0;
    if (!c->device_timed) c->seconds += comm_clock() - t0;
    return rc;
}

int comm_wait(comm_req *r, tg_err *e) {
    if (!r) return -1; /* the start failed and said why */
    comm *c = r->c;
    if (c->in_group) return refused_in_group(c, "comm_wait", r->what, e); /* r stays in flight */
    double t0 = comm_clock();
    int rc = c->vt->wait(c, r, e);
    if (!c->device_timed) c->seconds += comm_clock() - t0;
    if (rc == 0) c->bytes_sent[r->kind] += r->bytes;
    comm_req_put(c, r);
    return rc;
}

int comm_settle(comm *c, tg_err *e) {
    if (c->in_group) return refused_in_group(c, "comm_settle", NULL, e);
    if (c->capturing) /* the captured collectives have not run: there is nothing to wait for yet */
        return tg_fail(e, "group %s: comm_settle inside a CUDA graph capture (settle after launching the graph)", c->name);
    return c->vt->settle ? c->vt->settle(c, e) : 0;
}

int comm_capturable(const comm *c) { return c->vt->replayed != NULL || (comm_is_null(c) && c->size == 1); }

void comm_capture_begin(comm *c) {
    memcpy(c->bytes_at_capture, c->bytes_sent, sizeof c->bytes_sent);
    c->capturing = 1;
}

void comm_capture_end(comm *c) {
    for (int k = 0; k < COLL_KINDS; k++) {
        c->replay_bytes[k] = c->bytes_sent[k] - c->bytes_at_capture[k];
        c->bytes_sent[k] = c->bytes_at_capture[k];
    }
    c->capturing = 0;
    if (c->vt->capture_end) c->vt->capture_end(c);
}

void comm_replayed(comm *c) {
    for (int k = 0; k < COLL_KINDS; k++) c->bytes_sent[k] += c->replay_bytes[k];
    if (c->vt->replayed) c->vt->replayed(c);
}

int comm_barrier(comm *c, tg_err *e) {
    if (c->in_group) return refused_in_group(c, "comm_barrier", NULL, e);
    if (c->capturing) /* it waits on the host, which a capture refuses */
        return tg_fail(e, "group %s: comm_barrier inside a CUDA graph capture", c->name);
    return c->vt->barrier(c, e);
}

/* ---- byte counts ---------------------------------------------------------- */

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

void comm_note_beside(comm *c, const comm_req *r, double flops) {
    if (!r || r->modeled_s <= 0 || flops <= 0) return;
    if (c->n_beside == c->cap_beside) {
        c->cap_beside = c->cap_beside ? 2 * c->cap_beside : 64;
        c->beside = tg_realloc(c->beside, (size_t)c->cap_beside * sizeof *c->beside, "the projection's overlap records");
    }
    c->beside[c->n_beside++] = (comm_beside){r->modeled_s, flops};
}

void comm_destroy(comm *c) {
    if (!c) return;
    free(c->beside);
    c->vt->destroy(c);
}

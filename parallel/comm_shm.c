/* Shared-memory communicator: the ranks of one group, all on one node, share
 * one POSIX shm segment. Each member owns a staging slot in it; a collective
 * goes through the slots in chunks of at most one slot.
 *
 * Determinism. all_reduce: each member reduces a fixed slice of the chunk
 * (split on 16-float boundaries) over the slots in rank order 0..p-1 into
 * the result area; everybody then copies the whole result. reduce_scatter:
 * each member sums its own block over the slots in the same order. Each
 * element is thus always ((x0 + x1) + x2) + ..., whatever the chunking, the
 * split, the run or the reader: bitwise-equal results everywhere, and
 * reduce_scatter equals the matching part of all_reduce. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "parallel/bootstrap.h"
#include "parallel/comm_shm_impl.h"
#include "parallel/group.h"

#define SHM_PREFIX "/train_gpt_"

static size_t chunks(size_t n, size_t per) { return n == 0 ? 1 : (n + per - 1) / per; }

/* ---- collectives -------------------------------------------------------- */

/* Member r's slice [split(r), split(r+1)) of a chunk of cc elements. */
static size_t split(size_t cc, int r, int p) {
    if (r >= p) return cc;
    size_t x = (cc * (size_t)r / (size_t)p) & ~(size_t)15;
    return x < cc ? x : cc;
}

/* Element j of a float32 or bf16 array, as float. */
static float elem_at(const void *base, size_t j, tg_dtype t) {
    return t == TG_BF16 ? tg_bf16_to_f32(((const uint16_t *)base)[j]) : ((const float *)base)[j];
}

static void elem_set(void *base, size_t j, tg_dtype t, float v) {
    if (t == TG_BF16) ((uint16_t *)base)[j] = tg_f32_to_bf16(v);
    else ((float *)base)[j] = v;
}

/* dst[j] = x0[j] op x1[j] op ... over the slots in rank order, at element
 * offset off, accumulated in float32 and rounded once to t. */
static void reduce_slice(shm_impl *s, int p, void *dst, size_t off, size_t len, reduce_op op, tg_dtype t) {
    const size_t es = tg_dtype_bytes(t);
    if (t == TG_F32) { /* the common case, vectorisable */
        float *d = dst;
        memcpy(d, (const char *)shm_slot(s, 0) + off * es, len * es);
        for (int k = 1; k < p; k++) {
            const float *x = (const float *)((const char *)shm_slot(s, k) + off * es);
            if (op == REDUCE_SUM) {
                for (size_t j = 0; j < len; j++) d[j] += x[j];
            } else {
                for (size_t j = 0; j < len; j++)
                    if (x[j] > d[j] || x[j] != x[j]) d[j] = x[j]; /* NaN wins */
            }
        }
        return;
    }
    for (size_t j = 0; j < len; j++) {
        float acc = elem_at((const char *)shm_slot(s, 0) + off * es, j, t);
        for (int k = 1; k < p; k++) {
            float x = elem_at((const char *)shm_slot(s, k) + off * es, j, t);
            if (op == REDUCE_SUM) acc += x;
            else if (x > acc || x != x) acc = x;
        }
        elem_set(dst, j, t, acc);
    }
}

/* Elements of type t one slot holds. */
static size_t slot_elems(const shm_impl *s, tg_dtype t) { return s->slot_floats * sizeof(float) / tg_dtype_bytes(t); }

static comm_req *shm_all_reduce(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e) {
    shm_impl *s = c->impl;
    char what[64];
    if (shm_begin_op(c, COLL_ALL_REDUCE, (int)op * 8 + (int)t, n, what, sizeof what, e)) return NULL;
    const size_t es = tg_dtype_bytes(t), per = slot_elems(s, t), nc = chunks(n, per);
    int me = c->rank, p = c->size;
    char *b = buf;
    for (size_t i = 0; i < nc; i++) {
        size_t a = i * per, cc = n - a < per ? n - a : per;
        c->mem.to_host(c->mem.ctx, shm_slot(s, me), b + a * es, cc * es);
        if (shm_first_sync(c, what, i == 0, e)) return NULL;
        size_t lo = split(cc, me, p), hi = split(cc, me + 1, p);
        reduce_slice(s, p, (char *)s->result + lo * es, lo, hi - lo, op, t);
        if (shm_sync_all(c, what, e)) return NULL;
        c->mem.from_host(c->mem.ctx, b + a * es, s->result, cc * es);
    }
    return comm_req_get(c, COLL_ALL_REDUCE, comm_ring_bytes_of(COLL_ALL_REDUCE, p, n, es), what, e);
}

static comm_req *shm_reduce_scatter(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    shm_impl *s = c->impl;
    char what[64];
    if (shm_begin_op(c, COLL_REDUCE_SCATTER, (int)t, n, what, sizeof what, e)) return NULL;
    int me = c->rank, p = c->size;
    const size_t es = tg_dtype_bytes(t);
    size_t per = slot_elems(s, t) / (size_t)p; /* each member stages p blocks of `per` */
    if (per >= 16) per &= ~(size_t)15;
    size_t nc = chunks(n, per);
    const char *src = in;
    char *dst = out;
    for (size_t i = 0; i < nc; i++) {
        size_t a = i * per, cc = n - a < per ? n - a : per;
        for (int r = 0; r < p; r++)
            c->mem.to_host(c->mem.ctx, (char *)shm_slot(s, me) + (size_t)r * per * es, src + ((size_t)r * n + a) * es, cc * es);
        if (shm_first_sync(c, what, i == 0, e)) return NULL;
        /* Host buffers take the sum directly; device ones through the private scratch. */
        void *sum = c->mem.device ? s->scratch : dst + a * es;
        reduce_slice(s, p, sum, (size_t)me * per, cc, REDUCE_SUM, t);
        if (c->mem.device) c->mem.from_host(c->mem.ctx, dst + a * es, sum, cc * es);
        if (shm_sync_all(c, what, e)) return NULL;
    }
    return comm_req_get(c, COLL_REDUCE_SCATTER, comm_ring_bytes_of(COLL_REDUCE_SCATTER, p, n * (size_t)p, es), what, e);
}

static comm_req *shm_all_gather(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    shm_impl *s = c->impl;
    char what[64];
    if (shm_begin_op(c, COLL_ALL_GATHER, (int)t, n, what, sizeof what, e)) return NULL;
    int me = c->rank, p = c->size;
    const size_t es = tg_dtype_bytes(t), per = slot_elems(s, t), nc = chunks(n, per);
    const char *src = in;
    char *dst = out;
    for (size_t i = 0; i < nc; i++) {
        size_t a = i * per, cc = n - a < per ? n - a : per;
        c->mem.to_host(c->mem.ctx, shm_slot(s, me), src + a * es, cc * es);
        if (shm_first_sync(c, what, i == 0, e)) return NULL;
        for (int r = 0; r < p; r++) {
            char *d = dst + ((size_t)r * n + a) * es;
            if (d != src + a * es) c->mem.from_host(c->mem.ctx, d, shm_slot(s, r), cc * es); /* in == out + me*n: already there */
        }
        if (shm_sync_all(c, what, e)) return NULL;
    }
    return comm_req_get(c, COLL_ALL_GATHER, comm_ring_bytes_of(COLL_ALL_GATHER, p, n * (size_t)p, es), what, e);
}

static comm_req *shm_broadcast(comm *c, void *buf, size_t bytes, int root, tg_err *e) {
    shm_impl *s = c->impl;
    char what[64];
    if (shm_begin_op(c, COLL_BROADCAST, root, bytes, what, sizeof what, e)) return NULL;
    if (root < 0 || root >= c->size) {
        tg_fail(e, "group %s: %s: root %d is not a member index (group of %d)", c->name, what, root, c->size);
        shm_fail(c, e);
        return NULL;
    }
    size_t per = s->slot_floats * sizeof(float), nc = chunks(bytes, per);
    char *b = buf;
    for (size_t i = 0; i < nc; i++) {
        size_t a = i * per, cc = bytes - a < per ? bytes - a : per;
        if (c->rank == root) c->mem.to_host(c->mem.ctx, shm_slot(s, root), b + a, cc);
        if (shm_first_sync(c, what, i == 0, e)) return NULL;
        if (c->rank != root) c->mem.from_host(c->mem.ctx, b + a, shm_slot(s, root), cc);
        if (shm_sync_all(c, what, e)) return NULL;
    }
    return comm_req_get(c, COLL_BROADCAST, comm_broadcast_bytes(c->size, c->rank, root, bytes), what, e);
}

static int shm_barrier(comm *c, tg_err *e) {
    char what[64];
    if (shm_begin_op(c, BARRIER_KIND, 0, 0, what, sizeof what, e)) return -1;
    if (shm_first_sync(c, what, 1, e)) return -1;
    return shm_sync_all(c, what, e); /* the second keeps the op record valid until everyone checked it */
}

/* The work is done in the start; what remains is to report a failure since
 * (here, or a member that gave up). */
static int shm_wait(comm *c, comm_req *r, tg_err *e) { return shm_check_alive(c, r->what, e); }

static void shm_destroy(comm *c) {
    comm_req_free_all(c, NULL);
    shm_impl *s = c->impl;
    if (s) {
        if (s->base) munmap(s->base, s->map_bytes);
        free(s->granks);
        free(s->scratch);
        free(s);
    }
    free(c);
}

static const comm_vtable SHM_VT = {shm_all_reduce, shm_reduce_scatter, shm_all_gather, shm_broadcast, shm_wait, shm_barrier,
                                   shm_destroy, NULL /* settle: all done in the start */, NULL, NULL /* groups: nothing to fuse */,
                                   NULL, NULL /* graphs: the collectives run on the host */};

/* ---- creation ------------------------------------------------------------ */

/* The group handshake (parallel/group.c) with the shm communicator's own
 * argument checks; slot_floats receives the slot's size in floats. */
static int shm_handshake(bootstrap *bs, const group_spec *g, size_t slot_bytes, size_t *slot_floats, tg_err *e) {
    tg_err mine = {{0}};
    *slot_floats = slot_bytes / sizeof(float);
    if (*slot_floats >= 16) *slot_floats &= ~(size_t)15;
    int bad = group_check_args(bs, g, &mine) != 0;
    if (!bad && strchr(g->name, '/')) /* it becomes part of the segment's name */
        bad = tg_fail(&mine, "communicator name \"%s\" must be 1-%d characters without '/'", g->name, GROUP_NAME_MAX);
    else if (!bad && *slot_floats < (size_t)g->size)
        bad = tg_fail(&mine, "group %s: slot of %zu bytes is too small for %d ranks", g->name, slot_bytes, g->size);
    return group_handshake(bs, g, bad, &mine, NULL, 0, e);
}

static comm *new_shm_comm(const group_spec *g, size_t slot_floats) {
    comm *c = tg_calloc(1, sizeof *c, "communicator");
    shm_impl *s = tg_calloc(1, sizeof *s, "shm communicator");
    c->vt = &SHM_VT;
    c->impl = s;
    snprintf(c->name, sizeof c->name, "%s", g->name);
    c->rank = g->index;
    c->size = g->size;
    c->mem = COMM_HOST_MEMORY;
    s->slot_floats = slot_floats;
    s->scratch = tg_malloc(slot_floats * sizeof(float), "comm_shm scratch");
    s->timeout_s = g->timeout_s;
    s->granks = tg_malloc((size_t)g->size * sizeof(int), "group ranks");
    memcpy(s->granks, g->ranks, (size_t)g->size * sizeof(int));
    return c;
}

/* Every member sees every other member's process (a check the PID
 * namespaces of containers can defeat). */
static int check_members_visible(comm *c, int me, tg_err *mine) {
    shm_impl *s = c->impl;
    for (int k = 0; k < c->size; k++)
        if (atomic_load_explicit(&s->mem[k].pid, memory_order_acquire) <= 0 || shm_member_dead(&s->mem[k]))
            return tg_fail(mine, "group %s: rank %d cannot see the process of rank %d (pid %d); are the ranks in different "
                           "PID namespaces (containers)?", c->name, me, s->granks[k], (int)atomic_load(&s->mem[k].pid));
    return 0;
}

/* The first member creates the segment, the others attach, all check each
 * other; each stage ends in a group_agree. A group of one rank shares
 * nothing but takes part in the exchanges (they span the world). */
static int share_segment(bootstrap *bs, comm *c, const char *shm_name, tg_err *e) {
    shm_impl *s = c->impl;
    int me = bootstrap_rank(bs), solo = c->size == 1, first = c->rank == 0, created = 0, bad = 0;
    tg_err mine = {{0}};
    if (!solo && first) {
        bad = shm_create_segment(s, c->size, shm_name, &mine) != 0;
        if (!bad) shm_wire_up(s, c->size, c->rank, me);
        created = !bad;
    }
    int rc = group_agree(bs, bad, &mine, c->name, e), create_reported = rc == -2;
    if (!rc) {
        bad = !solo && !first && shm_attach_segment(s, c->size, shm_name, &mine);
        if (!bad && !solo && !first) shm_wire_up(s, c->size, c->rank, me);
        rc = group_agree(bs, bad, &mine, c->name, e);
    }
    /* Everyone has attached, or the creation failed: the name goes now.
     * Every member unlinks (all but one get ENOENT), so that the name goes
     * even if the creator died meanwhile; but a name the creator could not
     * create (it said so) is not ours. */
    if (!solo && (created || (!first && !create_reported))) shm_unlink(shm_name);
    if (!rc) rc = group_agree(bs, !solo && check_members_visible(c, me, &mine) != 0, &mine, c->name, e);
    return rc;
}

comm *comm_shm_create_slot(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index,
                           double timeout_s, size_t slot_bytes, tg_err *e) {
    group_spec g = {name, group_ranks, group_size, my_index, timeout_s, 1, NULL};
    size_t slot_floats;
    if (shm_handshake(bs, &g, slot_bytes, &slot_floats, e)) return NULL;
    comm *c = new_shm_comm(&g, slot_floats);
    char shm_name[128];
    snprintf(shm_name, sizeof shm_name, SHM_PREFIX "%s_%s_%d", bootstrap_session(bs), name, group_ranks[0]);
    int rc = share_segment(bs, c, shm_name, e);
    if (rc || group_size > 1) {
        if (rc) shm_destroy(c);
        return rc ? NULL : c;
    }
    shm_destroy(c); /* one rank: comm_null is exact */
    comm *n = comm_null_create(name, 0, 1);
    if (!n) tg_fail(e, "creating communicator %s: out of memory", name);
    return n;
}

comm *comm_shm_create(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index, double timeout_s,
                      tg_err *e) {
    return comm_shm_create_slot(bs, name, group_ranks, group_size, my_index, timeout_s, COMM_SHM_SLOT_BYTES, e);
}

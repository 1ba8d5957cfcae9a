/* comm_null: one rank standing in for a group. Every collective completes
 * in its start (it moves this rank's data only); the request only carries
 * the ring bytes a real group would send, which comm_wait counts. With a
 * link (comm_link: flat, or an nccl-tests table) it also adds up the time
 * the collectives would take. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

/* ---- the link model ------------------------------------------------------- */

comm_link comm_link_flat(double bus_bytes_per_s, double latency_s) {
    comm_link l;
    memset(&l, 0, sizeof l);
    l.bus_bytes_per_s = bus_bytes_per_s;
    l.latency_s = latency_s;
    return l;
}

/* busbw at msg_bytes from a set's rows (n >= 1, increasing bytes). */
static double table_busbw(const comm_link_set *set, double msg_bytes) {
    const comm_link_row *rows = set->rows;
    if (msg_bytes <= rows[0].bytes) return rows[0].bus_bytes_per_s * msg_bytes / rows[0].bytes; /* constant time */
    for (int i = 1; i < set->n; i++)
        if (msg_bytes <= rows[i].bytes) {
            const double f = log(msg_bytes / rows[i - 1].bytes) / log(rows[i].bytes / rows[i - 1].bytes);
            return rows[i - 1].bus_bytes_per_s + f * (rows[i].bus_bytes_per_s - rows[i - 1].bus_bytes_per_s);
        }
    return rows[set->n - 1].bus_bytes_per_s;
}

/* One kind's set for a group of `ranks`: its exact size, else its any-size
 * rows, else the nearest size (the smaller on a tie); NULL if it has none. */
static const comm_link_set *set_for(const comm_link *l, int kind, int ranks) {
    const comm_link_set *sets = l->sets[kind], *any = NULL, *near = NULL;
    for (int i = 0; i < l->n_sets[kind]; i++) {
        const comm_link_set *s = &sets[i];
        if (s->ranks == ranks) return s;
        if (s->ranks == 0) any = s;
        else if (!near || abs(s->ranks - ranks) < abs(near->ranks - ranks) ||
                 (abs(s->ranks - ranks) == abs(near->ranks - ranks) && s->ranks < near->ranks))
            near = s;
    }
    return any ? any : near;
}

const comm_link_set *comm_link_rows_for(const comm_link *l, coll_kind k, int ranks) {
    const comm_link_set *s = set_for(l, (int)k, ranks);
    return s ? s : set_for(l, COLL_ALL_REDUCE, ranks);
}

double comm_overlap_hidden_s(const double *ready_s, const double *seconds, int n, double end_s) {
    double link_free = 0, total = 0;
    for (int i = 0; i < n; i++) {
        link_free = (link_free > ready_s[i] ? link_free : ready_s[i]) + seconds[i];
        total += seconds[i];
    }
    return total - (link_free > end_s ? link_free - end_s : 0);
}

double comm_prefetch_hidden_s(const double *need_s, const double *seconds, int n) {
    double link_free = 0, stalled = 0;
    for (int i = 0; i < n; i++) {
        link_free += seconds[i];
        const double reached = need_s[i] + stalled;
        if (link_free > reached) stalled += link_free - reached;
    }
    return link_free - stalled;
}

double comm_beside_hidden_s(const comm_beside *b, int n, double seconds_per_flop) {
    double hidden = 0;
    for (int i = 0; i < n; i++) hidden += fmin(b[i].seconds, b[i].flops * seconds_per_flop);
    return hidden;
}

double comm_link_seconds(const comm_link *l, coll_kind k, int ranks, double msg_bytes, double ring_bytes) {
    const comm_link_set *set = comm_link_rows_for(l, k, ranks);
    if (!set) /* the flat model (its latency even for a rank that sends nothing) */
        return l->bus_bytes_per_s > 0 ? l->latency_s + ring_bytes / l->bus_bytes_per_s : 0;
    if (ring_bytes <= 0 || msg_bytes <= 0) return 0;
    return ring_bytes / table_busbw(set, msg_bytes);
}

static int kind_of(const char *name) {
    for (int k = 0; k < COLL_KINDS; k++)
        if (strcmp(name, comm_kind_name((coll_kind)k)) == 0) return k;
    return -1;
}

/* The set of kind k for `ranks` (0: any), made if new. */
static comm_link_set *set_of(comm_link *l, int k, int ranks, const char *where, tg_err *e) {
    for (int i = 0; i < l->n_sets[k]; i++)
        if (l->sets[k][i].ranks == ranks) return &l->sets[k][i];
    if (l->n_sets[k] == COMM_LINK_DEGREES) {
        tg_fail(e, "%s: more than %d group sizes of %s rows", where, COMM_LINK_DEGREES, comm_kind_name((coll_kind)k));
        return NULL;
    }
    comm_link_set *s = &l->sets[k][l->n_sets[k]++];
    s->ranks = ranks;
    s->n = 0;
    return s;
}

/* Adds one row, keeping its set's rows sorted by size. */
static int add_row(comm_link *l, int k, int ranks, double bytes, double bw, const char *where, tg_err *e) {
    char at[32] = "";
    if (ranks) snprintf(at, sizeof at, " at %d ranks", ranks);
    comm_link_set *s = set_of(l, k, ranks, where, e);
    if (!s) return -1;
    int i = s->n;
    if (i == COMM_LINK_ROWS) return tg_fail(e, "%s: more than %d %s rows%s", where, COMM_LINK_ROWS, comm_kind_name((coll_kind)k), at);
    for (int j = 0; j < i; j++)
        if (s->rows[j].bytes == bytes)
            return tg_fail(e, "%s: a second %s row for %.0f bytes%s", where, comm_kind_name((coll_kind)k), bytes, at);
    for (; i > 0 && s->rows[i - 1].bytes > bytes; i--) s->rows[i] = s->rows[i - 1];
    s->rows[i] = (comm_link_row){bytes, bw};
    s->n++;
    return 0;
}

/* One line: blank, a comment, or "collective bytes busbw_GBps [ranks]". */
static int parse_row(comm_link *l, char *line, const char *where, tg_err *e) {
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char name[32], extra[2];
    double bytes, gbps, ranks = 0;
    int end = 0;
    const int got = sscanf(line, "%31s %lf %lf%n", name, &bytes, &gbps, &end);
    if (got <= 0) return 0;
    /* the rest: nothing, or the ranks and nothing after them */
    const int more = got == 3 ? sscanf(line + end, "%lf %1s", &ranks, extra) : 0;
    if (got != 3 || (more != EOF && more != 1))
        return tg_fail(e, "%s: expected \"collective bytes busbw_GBps [ranks]\" (e.g. \"all_reduce 1048576 120.5\" or "
                          "\"all_reduce 1048576 120.5 8\")", where);
    const int k = kind_of(name);
    if (k < 0) return tg_fail(e, "%s: unknown collective '%s' (all_reduce, reduce_scatter, all_gather, broadcast)", where, name);
    if (!(bytes >= 1 && bytes <= 1e15 && bytes == floor(bytes)))
        return tg_fail(e, "%s: bytes must be a whole number from 1 to 1e15, got %g", where, bytes);
    if (!(gbps > 0 && gbps <= 1e6)) return tg_fail(e, "%s: busbw_GBps must be above 0 and at most 1e6, got %g", where, gbps);
    if (more == 1 && !(ranks >= 2 && ranks <= 1e6 && ranks == floor(ranks)))
        return tg_fail(e, "%s: ranks must be a whole number from 2 to 1e6 (the group size), got %g", where, ranks);
    return add_row(l, k, (int)ranks, bytes, gbps * 1e9, where, e);
}

int comm_link_load(comm_link *l, const char *path, tg_err *e) {
    FILE *f = fopen(path, "r");
    if (!f) return tg_fail(e, "%s: cannot open the link table: %s", path, strerror(errno));
    char line[512], where[1100];
    int n = 0, rc = 0;
    memset(l->n_sets, 0, sizeof l->n_sets);
    while (rc == 0 && fgets(line, sizeof line, f)) {
        n++;
        snprintf(where, sizeof where, "%s:%d", path, n);
        if (!strchr(line, '\n') && !feof(f)) rc = tg_fail(e, "%s: line longer than %d characters", where, (int)sizeof line - 2);
        else rc = parse_row(l, line, where, e);
    }
    if (rc == 0 && ferror(f)) rc = tg_fail(e, "%s: read error", path);
    fclose(f);
    if (rc == 0 && l->n_sets[COLL_ALL_REDUCE] == 0)
        rc = tg_fail(e, "%s: no all_reduce row (the collectives without rows use all_reduce's)", path);
    return rc;
}

/* ---- the communicator ----------------------------------------------------- */

/* A request for a collective sending `bytes` of a message of msg_bytes
 * (nccl-tests' size), with its modeled time added now. */
static comm_req *started(comm *c, coll_kind k, uint64_t bytes, double msg_bytes, tg_err *e) {
    const double seconds = c->size > 1 ? comm_link_seconds(&c->link, k, c->size, msg_bytes, (double)bytes) : 0;
    c->modeled_seconds += seconds;
    comm_req *r = comm_req_get(c, k, bytes, comm_kind_name(k), e);
    if (r) r->modeled_s = seconds;
    return r;
}

static comm_req *null_all_reduce(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e) {
    (void)buf; (void)op;
    return started(c, COLL_ALL_REDUCE, comm_ring_bytes_of(COLL_ALL_REDUCE, c->size, n, tg_dtype_bytes(t)),
                   (double)n * tg_dtype_bytes(t), e);
}

/* This rank's block stands for the sum (the buffers' blocks never overlap
 * partially: out is in itself or another block). */
static comm_req *null_reduce_scatter(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    const size_t bytes = n * tg_dtype_bytes(t);
    c->mem.copy(c->mem.ctx, out, (const char *)in + (size_t)c->rank * bytes, bytes);
    return started(c, COLL_REDUCE_SCATTER,
                   comm_ring_bytes_of(COLL_REDUCE_SCATTER, c->size, n * (size_t)c->size, tg_dtype_bytes(t)),
                   (double)bytes * c->size, e);
}

/* Every block gets this rank's data. */
static comm_req *null_all_gather(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    const size_t bytes = n * tg_dtype_bytes(t);
    for (int r = c->size - 1; r >= 0; r--) c->mem.copy(c->mem.ctx, (char *)out + (size_t)r * bytes, in, bytes);
    return started(c, COLL_ALL_GATHER, comm_ring_bytes_of(COLL_ALL_GATHER, c->size, n * (size_t)c->size, tg_dtype_bytes(t)),
                   (double)bytes * c->size, e);
}

static comm_req *null_broadcast(comm *c, void *buf, size_t bytes, int root, tg_err *e) {
    (void)buf;
    return started(c, COLL_BROADCAST, comm_broadcast_bytes(c->size, c->rank, root, bytes), (double)bytes, e);
}

/* Nothing can break: the work is done. */
static int null_wait(comm *c, comm_req *r, tg_err *e) { (void)c; (void)r; (void)e; return 0; }

static int null_barrier(comm *c, tg_err *e) { (void)c; (void)e; return 0; }

static void null_destroy(comm *c) {
    comm_req_free_all(c, NULL);
    free(c);
}

static const comm_vtable NULL_VT = {null_all_reduce, null_reduce_scatter, null_all_gather, null_broadcast, null_wait,
                                    null_barrier, null_destroy, NULL /* settle: all done in the start */,
                                    NULL, NULL /* groups: nothing to fuse */,
                                    NULL, NULL /* graphs: only at size 1, where nothing happens (comm_capturable) */};

int comm_is_null(const comm *c) { return c->vt == &NULL_VT; }

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

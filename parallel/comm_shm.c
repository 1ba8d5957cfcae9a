/* Shared-memory communicator: the ranks of one group, all on one node, share
 * one POSIX shm segment. Each member owns a staging slot in it; a collective
 * goes through the slots in chunks of at most one slot.
 *
 * Synchronisation. Every member has a counter `arrived` (its own cache line)
 * of the barriers it has reached. A barrier is: store-release my counter = g,
 * then wait until every other counter is >= g (load-acquire). Whatever a
 * member wrote before arriving (its slot, its share of the result) is
 * therefore visible to everyone who has passed the barrier. Counters only
 * grow, so a member may race ahead to g+1 without confusing a slower one.
 * Every collective is a sequence of such barriers, at least two, and obeys:
 *   - slots are written only before an operation's first barrier of a chunk,
 *     and read only between that barrier and the next one;
 *   - the shared result area (all_reduce) is written only after a chunk's
 *     first barrier and read only after its second.
 * So the writes of chunk i+1 never meet the reads of chunk i, and no
 * operation needs a trailing barrier beyond its last chunk's second one.
 *
 * Determinism. all_reduce: each member reduces a fixed slice of the chunk
 * (split on 16-float boundaries) over the slots in rank order 0..p-1 into
 * the result area; everybody then copies the whole result. reduce_scatter:
 * each member sums its own block over the slots in the same order. Each
 * element is thus always ((x0 + x1) + x2) + ..., whatever the chunking, the
 * split, the run or the reader: bitwise-equal results everywhere, and
 * reduce_scatter equals the matching part of all_reduce.
 *
 * Waiting. A waiter spins briefly, then sleeps on a futex in the segment
 * (every arrival wakes the sleepers), at most 100 ms at a time, so that
 * oversubscribed cores (4 ranks on 2 cores, or ranks beside other jobs)
 * hand the CPU to the member that still has to arrive. (Yielding instead
 * lost whole time slices to unrelated busy processes; plain 50-200 us sleeps
 * were ten times slower at 4 ranks on 2 cores.) Between sleeps a waiter
 * checks the deadline (timeout_s), whether the members it waits for are
 * still alive (pid stored in the segment: kill(pid, 0) plus /proc state and
 * start time against zombies and reused pids, every 100 ms), and the
 * segment's abort word, through which the first member to fail tells the
 * others why. Each operation also publishes what it is (kind, size, sequence
 * number) before its first barrier; members compare after it, so ranks that
 * call different collectives fail at once instead of corrupting data.
 *
 * Segments. The member with index 0 creates /train_gpt_<session>_<name>_<rank>
 * (session: random, agreed through the bootstrap), the others attach after a
 * bootstrap exchange, and once all have attached it is unlinked: from then on
 * it lives only as long as the mappings, whatever way the processes end.
 * Every member unlinks the name (the creator dying in between changes
 * nothing), also when creation fails half-way; only if every member of the
 * group dies within the few milliseconds between creation and the end of
 * the attach exchange can a name outlive the job. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "parallel/bootstrap.h"
#include "parallel/comm.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "comm_shm needs lock-free atomics to share them between processes");

#define SHM_MAGIC 0x54475348u /* "TGSH" */
#define SHM_VERSION 1
#define SHM_PREFIX "/train_gpt_"
#define PAGE 4096
#define SPIN_ITERS 200
#define LIVENESS_PERIOD_S 0.1
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

/* ---- small helpers ------------------------------------------------------ */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static float *slot(shm_impl *s, int r) { return s->slots + (size_t)r * s->slot_stride; }

/* State and start time of a process from /proc/<pid>/stat; -1 if unreadable. */
static int proc_stat(pid_t pid, char *state, uint64_t *start) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p || p[1] != ' ') return -1;
    p += 2;
    *state = *p;
    /* fields after the name: state is field 3, start time field 22 */
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p) return -1;
        p++;
    }
    *start = strtoull(p, NULL, 10);
    return 0;
}

static int member_dead(const member_line *m) {
    pid_t pid = atomic_load_explicit(&m->pid, memory_order_acquire);
    if (pid <= 0) return 0;
    if (kill(pid, 0) == -1 && errno == ESRCH) return 1;
    char state;
    uint64_t start;
    if (proc_stat(pid, &state, &start) == 0) {
        if (state == 'Z' || state == 'X') return 1;        /* exited, not yet reaped */
        if (m->start_time && start != m->start_time) return 1; /* the pid now belongs to another process */
    }
    return 0;
}

static const char *op_name(int kind, int arg) {
    switch (kind) {
    case COLL_ALL_REDUCE: return arg / 8 == REDUCE_MAX ? "all_reduce(max)" : "all_reduce(sum)"; /* arg: op * 8 + dtype */
    case COLL_REDUCE_SCATTER: return "reduce_scatter";
    case COLL_ALL_GATHER: return "all_gather";
    case COLL_BROADCAST: return "broadcast";
    case BARRIER_KIND: return "barrier";
    default: return "?";
    }
}

/* "2, 5" from the members flagged in `which`, as global ranks. */
static void rank_list(char *out, size_t cap, const shm_impl *s, const int *which, int p) {
    size_t len = 0;
    out[0] = '\0';
    for (int k = 0, shown = 0; k < p && len < cap; k++)
        if (which[k]) len += (size_t)snprintf(out + len, cap - len, "%s%d", shown++ ? ", " : "", s->granks[k]);
}

/* Sleeping and waking, between processes: waiters block on the shared word
 * wake_seq (a futex on Linux), arrivers bump it and wake them. Lost wakeups
 * are ruled out Dekker-style: a waiter raises `sleepers`, fences, then
 * re-checks the counters; an arriver stores its counter, fences, then reads
 * `sleepers`. Either the waiter sees the arrival or the arriver sees the
 * waiter and wakes it. Sleeps are capped (liveness checks), so even a
 * missed wakeup would only cost time. */
static void wake_sleepers(shm_impl *s) {
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&s->hdr->sleepers, memory_order_relaxed) == 0) return;
    atomic_fetch_add_explicit(&s->hdr->wake_seq, 1, memory_order_seq_cst);
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)&s->hdr->wake_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#endif
}

/* Blocks until wake_seq differs from v or max_s passes (or a signal). */
static void sleep_on(shm_impl *s, uint32_t v, double max_s) {
    if (max_s > LIVENESS_PERIOD_S) max_s = LIVENESS_PERIOD_S;
    if (max_s < 1e-6) max_s = 1e-6;
#ifdef __linux__
    struct timespec ts = {0, (long)(max_s * 1e9)};
    syscall(SYS_futex, (uint32_t *)&s->hdr->wake_seq, FUTEX_WAIT, v, &ts, NULL, 0);
#else
    (void)v;
    struct timespec ts = {0, max_s < 100e-6 ? (long)(max_s * 1e9) : 100000L};
    nanosleep(&ts, NULL);
#endif
}

/* ---- failure ------------------------------------------------------------ */

/* Marks the communicator broken and, if no member has done so yet, tells
 * the others why through the segment. Returns -1. */
static int fail(comm *c, tg_err *e) {
    shm_impl *s = c->impl;
    s->broken = 1;
    int expected = 0;
    if (atomic_compare_exchange_strong_explicit(&s->hdr->abort_state, &expected, 1, memory_order_acq_rel,
                                                memory_order_acquire)) {
        s->hdr->abort_rank = s->granks[c->rank];
        snprintf(s->hdr->abort_msg, sizeof s->hdr->abort_msg, "%.699s", e->msg);
        atomic_store_explicit(&s->hdr->abort_state, 2, memory_order_release);
        wake_sleepers(s);
    }
    return -1;
}

/* A wait for barrier g ended badly: a member died, the deadline passed, or
 * another member gave up. Returns -1 (0 if, after all, everyone arrived). */
static int fail_wait(comm *c, const char *what, uint64_t g, int timed_out, tg_err *e) {
    shm_impl *s = c->impl;
    int p = c->size, n_missing = 0, first_dead = -1;
    int *missing = tg_calloc((size_t)p, sizeof(int), "comm_shm wait report");
    int *dead = tg_calloc((size_t)p, sizeof(int), "comm_shm wait report");
    for (int k = 0; k < p; k++) {
        missing[k] = k != c->rank && atomic_load_explicit(&s->mem[k].arrived, memory_order_acquire) < g;
        dead[k] = missing[k] && member_dead(&s->mem[k]);
        n_missing += missing[k];
        if (dead[k] && first_dead < 0) first_dead = k;
    }
    char absent[256], gone[256];
    rank_list(absent, sizeof absent, s, missing, p);
    rank_list(gone, sizeof gone, s, dead, p);
    free(missing);
    free(dead);
    int aborted = atomic_load_explicit(&s->hdr->abort_state, memory_order_acquire) == 2;
    if (n_missing == 0 && !aborted) return 0; /* they all arrived just now */
    if (first_dead >= 0)
        tg_fail(e, "group %s: %s: rank%s %s died (pid %d); did not arrive: rank%s %s", c->name, what, strchr(gone, ',') ? "s" : "",
                gone, (int)atomic_load(&s->mem[first_dead].pid), n_missing > 1 ? "s" : "", absent);
    else if (timed_out || !aborted)
        tg_fail(e, "group %s: %s: timed out after %g s (parallel.timeout_s); did not arrive: rank%s %s", c->name, what,
                s->timeout_s, n_missing > 1 ? "s" : "", absent);
    else {
        tg_fail(e, "group %s: %s: rank %d gave up: %.600s", c->name, what, s->hdr->abort_rank, s->hdr->abort_msg);
        s->broken = 1;
        return -1;
    }
    return fail(c, e);
}

/* ---- the barrier everything is built on -------------------------------- */

static int all_arrived(const shm_impl *s, int me, int p, uint64_t g, int *from) {
    for (int k = *from; k < p; k++) {
        if (k == me) continue;
        if (atomic_load_explicit(&s->mem[k].arrived, memory_order_acquire) < g) {
            *from = k;
            return 0;
        }
    }
    return 1;
}

static int sync_all(comm *c, const char *what, tg_err *e) {
    shm_impl *s = c->impl;
    int me = c->rank, p = c->size, from = 0;
    uint64_t g = ++s->gen;
    atomic_store_explicit(&s->mem[me].arrived, g, memory_order_release);
    wake_sleepers(s);
    for (int i = 0; i < SPIN_ITERS; i++) {
        if (all_arrived(s, me, p, g, &from)) return 0;
        cpu_relax();
    }
    double t0 = now_s(), deadline = t0 + s->timeout_s, next_check = t0 + LIVENESS_PERIOD_S;
    for (;;) {
        atomic_fetch_add_explicit(&s->hdr->sleepers, 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
        uint32_t v = atomic_load_explicit(&s->hdr->wake_seq, memory_order_seq_cst);
        int done = all_arrived(s, me, p, g, &from);
        int aborted = atomic_load_explicit(&s->hdr->abort_state, memory_order_acquire) == 2;
        double t = now_s();
        if (!done && !aborted && t < deadline && t < next_check) sleep_on(s, v, (next_check < deadline ? next_check : deadline) - t);
        atomic_fetch_sub_explicit(&s->hdr->sleepers, 1, memory_order_relaxed);
        if (done || all_arrived(s, me, p, g, &from)) return 0;
        if (aborted || atomic_load_explicit(&s->hdr->abort_state, memory_order_acquire) == 2) return fail_wait(c, what, g, 0, e);
        t = now_s();
        if (t >= next_check) {
            next_check = t + LIVENESS_PERIOD_S;
            for (int k = from; k < p; k++)
                if (k != me && atomic_load_explicit(&s->mem[k].arrived, memory_order_acquire) < g && member_dead(&s->mem[k]))
                    return fail_wait(c, what, g, 0, e);
        }
        if (t >= deadline) return fail_wait(c, what, g, 1, e);
    }
}

/* Starts an operation: refuses on a broken communicator, publishes what it
 * is (seen by the others after the first barrier). */
static int begin_op(comm *c, int kind, int arg, size_t n, char *what, size_t cap, tg_err *e) {
    shm_impl *s = c->impl;
    s->ops++;
    snprintf(what, cap, "%s #%llu", op_name(kind, arg), (unsigned long long)s->ops);
    if (s->broken) return tg_fail(e, "group %s: %s: the communicator is broken by an earlier failure", c->name, what);
    member_line *m = &s->mem[c->rank];
    m->op_seq = s->ops;
    m->op_kind = kind;
    m->op_arg = arg;
    m->op_n = n;
    return 0;
}

/* After the first barrier of an operation: did every member call the same one? */
static int check_op(comm *c, const char *what, tg_err *e) {
    shm_impl *s = c->impl;
    const member_line *m = &s->mem[c->rank];
    for (int k = 0; k < c->size; k++) {
        const member_line *o = &s->mem[k];
        if (o->op_seq != m->op_seq || o->op_kind != m->op_kind || o->op_arg != m->op_arg || o->op_n != m->op_n) {
            tg_fail(e, "group %s: %s: the ranks called different collectives: rank %d %s #%llu of %llu, rank %d %s #%llu of %llu",
                    c->name, what, s->granks[c->rank], op_name(m->op_kind, m->op_arg), (unsigned long long)m->op_seq,
                    (unsigned long long)m->op_n, s->granks[k], op_name(o->op_kind, o->op_arg), (unsigned long long)o->op_seq,
                    (unsigned long long)o->op_n);
            return fail(c, e);
        }
    }
    return 0;
}

static int first_sync(comm *c, const char *what, int first, tg_err *e) {
    if (sync_all(c, what, e)) return -1;
    return first ? check_op(c, what, e) : 0;
}

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
        memcpy(d, (const char *)slot(s, 0) + off * es, len * es);
        for (int k = 1; k < p; k++) {
            const float *x = (const float *)((const char *)slot(s, k) + off * es);
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
        float acc = elem_at((const char *)slot(s, 0) + off * es, j, t);
        for (int k = 1; k < p; k++) {
            float x = elem_at((const char *)slot(s, k) + off * es, j, t);
            if (op == REDUCE_SUM) acc += x;
            else if (x > acc || x != x) acc = x;
        }
        elem_set(dst, j, t, acc);
    }
}

/* Elements of type t one slot holds. */
static size_t slot_elems(const shm_impl *s, tg_dtype t) { return s->slot_floats * sizeof(float) / tg_dtype_bytes(t); }

static int shm_all_reduce(comm *c, void *buf, size_t n, tg_dtype t, reduce_op op, tg_err *e) {
    shm_impl *s = c->impl;
    char what[64];
    if (begin_op(c, COLL_ALL_REDUCE, (int)op * 8 + (int)t, n, what, sizeof what, e)) return -1;
    const size_t es = tg_dtype_bytes(t), per = slot_elems(s, t), nc = chunks(n, per);
    int me = c->rank, p = c->size;
    char *b = buf;
    for (size_t i = 0; i < nc; i++) {
        size_t a = i * per, cc = n - a < per ? n - a : per;
        c->mem.to_host(c->mem.ctx, slot(s, me), b + a * es, cc * es);
        if (first_sync(c, what, i == 0, e)) return -1;
        size_t lo = split(cc, me, p), hi = split(cc, me + 1, p);
        reduce_slice(s, p, (char *)s->result + lo * es, lo, hi - lo, op, t);
        if (sync_all(c, what, e)) return -1;
        c->mem.from_host(c->mem.ctx, b + a * es, s->result, cc * es);
    }
    c->bytes_sent[COLL_ALL_REDUCE] += comm_ring_bytes_of(COLL_ALL_REDUCE, p, n, es);
    return 0;
}

static int shm_reduce_scatter(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    shm_impl *s = c->impl;
    char what[64];
    if (begin_op(c, COLL_REDUCE_SCATTER, (int)t, n, what, sizeof what, e)) return -1;
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
            c->mem.to_host(c->mem.ctx, (char *)slot(s, me) + (size_t)r * per * es, src + ((size_t)r * n + a) * es, cc * es);
        if (first_sync(c, what, i == 0, e)) return -1;
        /* Host buffers take the sum directly; device ones through the private scratch. */
        void *sum = c->mem.device ? s->scratch : dst + a * es;
        reduce_slice(s, p, sum, (size_t)me * per, cc, REDUCE_SUM, t);
        if (c->mem.device) c->mem.from_host(c->mem.ctx, dst + a * es, sum, cc * es);
        if (sync_all(c, what, e)) return -1;
    }
    c->bytes_sent[COLL_REDUCE_SCATTER] += comm_ring_bytes_of(COLL_REDUCE_SCATTER, p, n * (size_t)p, es);
    return 0;
}

static int shm_all_gather(comm *c, void *out, const void *in, size_t n, tg_dtype t, tg_err *e) {
    shm_impl *s = c->impl;
    char what[64];
    if (begin_op(c, COLL_ALL_GATHER, (int)t, n, what, sizeof what, e)) return -1;
    int me = c->rank, p = c->size;
    const size_t es = tg_dtype_bytes(t), per = slot_elems(s, t), nc = chunks(n, per);
    const char *src = in;
    char *dst = out;
    for (size_t i = 0; i < nc; i++) {
        size_t a = i * per, cc = n - a < per ? n - a : per;
        c->mem.to_host(c->mem.ctx, slot(s, me), src + a * es, cc * es);
        if (first_sync(c, what, i == 0, e)) return -1;
        for (int r = 0; r < p; r++) {
            char *d = dst + ((size_t)r * n + a) * es;
            if (d != src + a * es) c->mem.from_host(c->mem.ctx, d, slot(s, r), cc * es); /* in == out + me*n: already there */
        }
        if (sync_all(c, what, e)) return -1;
    }
    c->bytes_sent[COLL_ALL_GATHER] += comm_ring_bytes_of(COLL_ALL_GATHER, p, n * (size_t)p, es);
    return 0;
}

static int shm_broadcast(comm *c, void *buf, size_t bytes, int root, tg_err *e) {
    shm_impl *s = c->impl;
    char what[64];
    if (begin_op(c, COLL_BROADCAST, root, bytes, what, sizeof what, e)) return -1;
    if (root < 0 || root >= c->size) {
        tg_fail(e, "group %s: %s: root %d is not a member index (group of %d)", c->name, what, root, c->size);
        return fail(c, e);
    }
    size_t per = s->slot_floats * sizeof(float), nc = chunks(bytes, per);
    char *b = buf;
    for (size_t i = 0; i < nc; i++) {
        size_t a = i * per, cc = bytes - a < per ? bytes - a : per;
        if (c->rank == root) c->mem.to_host(c->mem.ctx, slot(s, root), b + a, cc);
        if (first_sync(c, what, i == 0, e)) return -1;
        if (c->rank != root) c->mem.from_host(c->mem.ctx, b + a, slot(s, root), cc);
        if (sync_all(c, what, e)) return -1;
    }
    c->bytes_sent[COLL_BROADCAST] += comm_broadcast_bytes(c->size, c->rank, root, bytes);
    return 0;
}

static int shm_barrier(comm *c, tg_err *e) {
    char what[64];
    if (begin_op(c, BARRIER_KIND, 0, 0, what, sizeof what, e)) return -1;
    if (first_sync(c, what, 1, e)) return -1;
    return sync_all(c, what, e); /* the second keeps the op record valid until everyone checked it */
}

static void shm_destroy(comm *c) {
    shm_impl *s = c->impl;
    if (s) {
        if (s->base) munmap(s->base, s->map_bytes);
        free(s->granks);
        free(s->scratch);
        free(s);
    }
    free(c);
}

static const comm_vtable SHM_VT = {shm_all_reduce, shm_reduce_scatter, shm_all_gather, shm_broadcast, shm_barrier, shm_destroy};

/* ---- creation ----------------------------------------------------------- */

#define NAME_MAX_LEN 31
#define MSG_LEN 300

typedef struct {
    char name[NAME_MAX_LEN + 1];
    int32_t size, index, leader, pad;
    uint64_t group_hash;
} member_rec;

typedef struct {
    int32_t failed;
    char msg[MSG_LEN];
} status_rec;

/* One bootstrap exchange of every rank's status: fails everywhere (with the
 * first failing rank's message) if any rank failed: -2 when a rank reported
 * a failure, -1 when the exchange itself failed. */
static int agree(bootstrap *bs, int failed, const tg_err *mine, const char *name, tg_err *e) {
    int world = bootstrap_world(bs), me = bootstrap_rank(bs);
    status_rec st = {0};
    st.failed = failed;
    if (failed) snprintf(st.msg, sizeof st.msg, "%.299s", mine->msg);
    status_rec *all = tg_malloc((size_t)world * sizeof *all, "comm_shm status table");
    int rc = 0;
    if (bootstrap_allgather(bs, &st, sizeof st, all, e)) {
        rc = tg_wrap(e, "creating communicator %s", name);
    } else {
        for (int r = 0; r < world; r++) {
            if (!all[r].failed) continue;
            all[r].msg[MSG_LEN - 1] = '\0';
            if (r == me)
                tg_fail(e, "%s", all[r].msg);
            else
                tg_fail(e, "creating communicator %s: rank %d failed: %s", name, r, all[r].msg);
            rc = -2;
            break;
        }
    }
    free(all);
    return rc;
}

static uint64_t hash_ranks(const int *r, int n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 4; b++) h = (h ^ (uint64_t)((unsigned)r[i] >> (8 * b) & 255u)) * 1099511628211ull;
    return h;
}

/* Checks the group this rank passed against what every member passed. */
static int check_group(bootstrap *bs, const char *name, const int *g, int size, int my_index, const member_rec *all, tg_err *e) {
    int world = bootstrap_world(bs), me = bootstrap_rank(bs);
    for (int r = 0; r < world; r++)
        if (strncmp(all[r].name, name, sizeof all[r].name) != 0)
            return tg_fail(e, "rank %d creates communicator \"%s\" while rank %d creates \"%s\": every rank must create the "
                           "same communicators in the same order", me, name, r, all[r].name);
    uint64_t h = hash_ranks(g, size);
    for (int i = 0; i < size; i++) {
        int r = g[i];
        if (r < 0 || r >= world) return tg_fail(e, "group %s of rank %d lists rank %d, outside the world of %d", name, me, r, world);
        for (int j = 0; j < i; j++)
            if (g[j] == r) return tg_fail(e, "group %s of rank %d lists rank %d twice", name, me, r);
        if (all[r].size != size || all[r].index != i || all[r].group_hash != h)
            return tg_fail(e, "group %s: rank %d and rank %d disagree on its members (rank %d says index %d of %d)", name, me, r, r,
                           all[r].index, all[r].size);
        if (!bootstrap_same_node(bs, me, r))
            return tg_fail(e, "group %s: ranks %d and %d are on different nodes; the shm communicator needs every group on one "
                           "node (tensor-parallel groups must fit in a node)", name, me, r);
    }
    (void)my_index;
    return 0;
}

static void segment_layout(int p, size_t slot_floats, size_t *members_off, size_t *slots_off, size_t *stride, size_t *result_off,
                           size_t *total) {
    *members_off = align_up(sizeof(shm_header), 64);
    *slots_off = align_up(*members_off + (size_t)p * sizeof(member_line), PAGE);
    *stride = align_up(slot_floats * sizeof(float), PAGE) / sizeof(float);
    *result_off = *slots_off + (size_t)p * *stride * sizeof(float);
    *total = *result_off + align_up(slot_floats * sizeof(float), PAGE);
}

static int map_segment(shm_impl *s, int fd, size_t bytes, const char *shm_name, tg_err *e) {
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return tg_fail(e, "mmap of shared memory %s (%zu bytes): %s", shm_name, bytes, strerror(errno));
    s->base = m;
    s->map_bytes = bytes;
    return 0;
}

static int create_segment(shm_impl *s, int p, const char *shm_name, tg_err *e) {
    size_t moff, soff, stride, roff, total;
    segment_layout(p, s->slot_floats, &moff, &soff, &stride, &roff, &total);
    int fd = shm_open(shm_name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return tg_fail(e, "shm_open(%s) to create the segment: %s", shm_name, strerror(errno));
    int rc = 0;
    if (ftruncate(fd, (off_t)total) != 0)
        rc = tg_fail(e, "ftruncate of shared memory %s to %zu bytes: %s", shm_name, total, strerror(errno));
    int fa = rc ? 0 : posix_fallocate(fd, 0, (off_t)total); /* reserve now: no SIGBUS later if /dev/shm fills up */
    if (fa)
        rc = tg_fail(e, "reserving %zu MiB of shared memory for %s: %s (see df -h /dev/shm)", total >> 20, shm_name, strerror(fa));
    if (!rc) rc = map_segment(s, fd, total, shm_name, e);
    close(fd);
    if (rc) {
        shm_unlink(shm_name); /* the name is ours: no member will unlink a segment that failed */
        return -1;
    }
    shm_header *h = (shm_header *)s->base;
    h->magic = SHM_MAGIC;
    h->version = SHM_VERSION;
    h->size = (uint32_t)p;
    h->slot_floats = s->slot_floats;
    h->map_bytes = total;
    return 0;
}

static int attach_segment(shm_impl *s, int p, const char *shm_name, tg_err *e) {
    size_t moff, soff, stride, roff, total;
    segment_layout(p, s->slot_floats, &moff, &soff, &stride, &roff, &total);
    int fd = shm_open(shm_name, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return tg_fail(e, "shm_open(%s) to attach: %s", shm_name, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != total)
        rc = tg_fail(e, "shared memory %s has %lld bytes, expected %zu", shm_name, (long long)st.st_size, total);
    if (!rc) rc = map_segment(s, fd, total, shm_name, e);
    close(fd);
    if (rc) return -1;
    const shm_header *h = (const shm_header *)s->base;
    if (h->magic != SHM_MAGIC || h->version != SHM_VERSION || h->size != (uint32_t)p || h->slot_floats != s->slot_floats)
        return tg_fail(e, "shared memory %s is not this group's segment (size %u, slot %llu floats)", shm_name, h->size,
                       (unsigned long long)h->slot_floats);
    return 0;
}

/* Points the impl at the parts of the mapped segment and registers this member. */
static void wire_up(shm_impl *s, int p, int my_index, int my_rank) {
    size_t moff, soff, stride, roff, total;
    segment_layout(p, s->slot_floats, &moff, &soff, &stride, &roff, &total);
    s->hdr = (shm_header *)s->base;
    s->mem = (member_line *)(s->base + moff);
    s->slots = (float *)(s->base + soff);
    s->slot_stride = stride;
    s->result = (float *)(s->base + roff);
    member_line *m = &s->mem[my_index];
    char state;
    uint64_t start = 0;
    if (proc_stat(getpid(), &state, &start) != 0) start = 0;
    m->global_rank = my_rank;
    m->start_time = start;
    atomic_store_explicit(&m->pid, (int32_t)getpid(), memory_order_release);
}

comm *comm_shm_create_slot(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index,
                           double timeout_s, size_t slot_bytes, tg_err *e) {
    int me = bootstrap_rank(bs);
    tg_err mine = {{0}};
    int bad = 0;
    /* 1. what every rank creates; local argument checks travel with it */
    member_rec rec = {0};
    snprintf(rec.name, sizeof rec.name, "%s", name ? name : "");
    rec.size = group_size;
    rec.index = my_index;
    rec.leader = group_size > 0 && group_ranks ? group_ranks[0] : -1;
    size_t slot_floats = slot_bytes / sizeof(float);
    if (slot_floats >= 16) slot_floats &= ~(size_t)15;
    if (!name || !name[0] || strlen(name) > NAME_MAX_LEN || strchr(name, '/'))
        bad = tg_fail(&mine, "communicator name \"%s\" must be 1-%d characters without '/'", name ? name : "", NAME_MAX_LEN);
    else if (group_size < 1 || !group_ranks || my_index < 0 || my_index >= group_size || group_ranks[my_index] != me)
        bad = tg_fail(&mine, "group %s: rank %d is not member %d of the group it passed (size %d)", name, me, my_index, group_size);
    else if (!(timeout_s > 0))
        bad = tg_fail(&mine, "group %s: parallel.timeout_s must be positive (got %g)", name, timeout_s);
    else if (slot_floats < (size_t)group_size)
        bad = tg_fail(&mine, "group %s: slot of %zu bytes is too small for %d ranks", name, slot_bytes, group_size);
    if (!bad) rec.group_hash = hash_ranks(group_ranks, group_size);
    int world = bootstrap_world(bs);
    member_rec *all = tg_malloc((size_t)world * sizeof *all, "comm_shm member table");
    if (bootstrap_allgather(bs, &rec, sizeof rec, all, e)) {
        free(all);
        tg_wrap(e, "creating communicator %s", name ? name : "?");
        return NULL;
    }
    for (int r = 0; r < world; r++) all[r].name[NAME_MAX_LEN] = '\0';
    if (!bad) bad = check_group(bs, name, group_ranks, group_size, my_index, all, &mine);
    free(all);
    if (agree(bs, bad, &mine, name ? name : "?", e)) return NULL;

    /* Size 1: nothing to share; take part in the remaining exchanges. */
    int solo = group_size == 1;
    comm *c = tg_calloc(1, sizeof *c, "communicator");
    shm_impl *s = tg_calloc(1, sizeof *s, "shm communicator");
    c->vt = &SHM_VT;
    c->impl = s;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->rank = my_index;
    c->size = group_size;
    c->mem = COMM_HOST_MEMORY;
    s->slot_floats = slot_floats;
    s->scratch = tg_malloc(slot_floats * sizeof(float), "comm_shm scratch");
    s->timeout_s = timeout_s;
    s->granks = tg_malloc((size_t)group_size * sizeof(int), "group ranks");
    memcpy(s->granks, group_ranks, (size_t)group_size * sizeof(int));
    char shm_name[128];
    snprintf(shm_name, sizeof shm_name, SHM_PREFIX "%s_%s_%d", bootstrap_session(bs), name, group_ranks[0]);

    /* 2. the first member creates; 3. the others attach; 4. all check each other */
    int created = 0;
    bad = 0;
    if (!solo && my_index == 0) {
        bad = create_segment(s, group_size, shm_name, &mine) != 0;
        if (!bad) wire_up(s, group_size, my_index, me);
        created = !bad;
    }
    int rc = agree(bs, bad, &mine, name, e), create_reported = rc == -2;
    if (!rc) {
        bad = !solo && my_index != 0 && attach_segment(s, group_size, shm_name, &mine);
        if (!bad && !solo && my_index != 0) wire_up(s, group_size, my_index, me);
        rc = agree(bs, bad, &mine, name, e);
    }
    /* Everyone has attached, or the creation failed: the name goes now.
     * Every member unlinks (all but one get ENOENT), so that the name goes
     * even if the creator died meanwhile; but a name the creator could not
     * create (it said so) is not ours. */
    if (!solo && (created || (my_index != 0 && !create_reported))) shm_unlink(shm_name);
    if (!rc) {
        bad = 0;
        for (int k = 0; !solo && k < group_size && !bad; k++) {
            if (atomic_load_explicit(&s->mem[k].pid, memory_order_acquire) <= 0 || member_dead(&s->mem[k]))
                bad = tg_fail(&mine, "group %s: rank %d cannot see the process of rank %d (pid %d); are the ranks in different "
                              "PID namespaces (containers)?", name, me, group_ranks[k], (int)atomic_load(&s->mem[k].pid));
        }
        rc = agree(bs, bad, &mine, name, e);
    }
    if (rc) {
        shm_destroy(c);
        return NULL;
    }
    if (solo) {
        comm *n = comm_null_create(name, 0, 1);
        shm_destroy(c);
        if (!n) tg_fail(e, "creating communicator %s: out of memory", name);
        return n;
    }
    return c;
}

comm *comm_shm_create(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index, double timeout_s,
                      tg_err *e) {
    return comm_shm_create_slot(bs, name, group_ranks, group_size, my_index, timeout_s, COMM_SHM_SLOT_BYTES, e);
}

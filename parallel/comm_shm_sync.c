/* comm_shm: barriers, waits and failure detection.
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
 * call different collectives fail at once instead of corrupting data. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "parallel/comm_shm_impl.h"

#define SPIN_ITERS 200
#define LIVENESS_PERIOD_S 0.1

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
int shm_fail(comm *c, tg_err *e) {
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
        dead[k] = missing[k] && shm_member_dead(&s->mem[k]);
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
    return shm_fail(c, e);
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

int shm_sync_all(comm *c, const char *what, tg_err *e) {
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
                if (k != me && atomic_load_explicit(&s->mem[k].arrived, memory_order_acquire) < g && shm_member_dead(&s->mem[k]))
                    return fail_wait(c, what, g, 0, e);
        }
        if (t >= deadline) return fail_wait(c, what, g, 1, e);
    }
}

/* Starts an operation: refuses on a broken communicator, publishes what it
 * is (seen by the others after the first barrier). */
int shm_begin_op(comm *c, int kind, int arg, size_t n, char *what, size_t cap, tg_err *e) {
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

int shm_check_alive(comm *c, const char *what, tg_err *e) {
    shm_impl *s = c->impl;
    if (s->broken) return tg_fail(e, "group %s: %s: the communicator is broken by an earlier failure", c->name, what);
    if (atomic_load_explicit(&s->hdr->abort_state, memory_order_acquire) != 2) return 0;
    s->broken = 1;
    return tg_fail(e, "group %s: %s: rank %d gave up: %.600s", c->name, what, s->hdr->abort_rank, s->hdr->abort_msg);
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
            return shm_fail(c, e);
        }
    }
    return 0;
}

int shm_first_sync(comm *c, const char *what, int first, tg_err *e) {
    if (shm_sync_all(c, what, e)) return -1;
    return first ? check_op(c, what, e) : 0;
}

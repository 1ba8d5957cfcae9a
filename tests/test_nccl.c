/* Tests of the NCCL communicator (parallel/comm_nccl.c). Needs GPUs: one per
 * rank on each node.
 *
 *   test_nccl [TP] [--timeout S]
 *       World 1 (no launcher variables; both groups have one rank, so the
 *       communicators are comm_nulls moving device buffers), or one rank of
 *       a job started by scripts/launch.sh, for example
 *         scripts/launch.sh -n 2 -- build/test_nccl 2   (the TP group holds both GPUs)
 *         scripts/launch.sh -n 2 -- build/test_nccl 1   (the DP group does)
 *       Each rank uses GPU LOCAL_RANK. Builds the TP and DP communicators
 *       with comm_nccl_create, and "solo": each rank alone in an NCCL
 *       communicator (comm_nccl_create_at_size_1), which runs the NCCL path
 *       (nonblocking init, streams, events, the host wait) on a single GPU.
 *       On each it checks, in fp32 and bf16 at sizes from 1 to
 *       4M elements (and 0), against values computed here from random
 *       non-zero inputs: all_reduce (sum, max), reduce_scatter (out of
 *       place, out == in + rank*n, out == in), all_gather (out of place,
 *       in == out + rank*n, in == out), broadcast (odd byte counts, two
 *       roots), barrier; that every member of a group holds the same bits
 *       after an all_reduce; bytes_sent against the ring formula; that
 *       seconds stays >= 0; and that host buffers are staged through the
 *       device (the trainer reduces a few host values). Sums of two members must
 *       be bitwise the float32 sum rounded once; of more, within a bound.
 *       Inputs go through the compute stream without waiting, and outputs
 *       are poisoned (NaN) first, so a collective that does not order itself
 *       after the compute stream reads or leaves NaNs.
 *       Collectives started several at a time before any wait (comm_*_start,
 *       comm_wait), with deferred waits (comm_defer_waits, then
 *       comm_settle), and inside a group (comm_group_begin: one NCCL launch),
 *       also with deferred waits, against the blocking calls: bitwise equal
 *       (grouped sums over more than two members: within a bound), equal
 *       bytes. An all_reduce and an all_gather captured in a CUDA graph
 *       (comm_capture_begin) and launched twice on fresh inputs: bitwise
 *       the blocking calls', with their bytes. The seconds the communicator
 *       counts are its collectives' device time (CUDA events): a deferred
 *       pair and a launch of a graph add more than 0 (and at least
 *       EMU_NCCL_DELAY_MS each under the emulation told so), no more than
 *       the wall time. On a fresh communicator "grp" (each rank alone, NCCL): 4101
 *       all_gathers in one group (several NCCL groups: comm_nccl_group.c
 *       caps them at 2048), each into its own slot; a wait inside a group
 *       refused, naming the group, and the request completed after the end;
 *       a host buffer inside a group refused, breaking the communicator.
 *       Rank 0 prints "ok NAME" or "not ok NAME - rank R: reason" per check
 *       (every rank's verdict, collected through the bootstrap); every rank
 *       exits 1 if any check failed. A node with fewer GPUs than ranks
 *       prints "skip" and exits 0.
 *   test_nccl TP --hang R [--timeout S] [--defer]
 *       After one good all_reduce, rank R stays away from the next one (it
 *       sleeps, then exits 0); every other rank must fail within S + 5 s
 *       with a message naming the group and "timed out" (two collectives are
 *       in flight: the second's wait must fail too, naming the group), then
 *       find the communicator broken. With --defer the waits are deferred
 *       (they return at once) and comm_settle must fail that way instead.
 *       Each survivor prints its own ok / not ok line.
 *
 * Build (on a machine with CUDA and NCCL):
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -I. -I/usr/local/cuda/include -o build/test_nccl tests/test_nccl.c \
 *       parallel/comm.c parallel/comm_nccl*.c parallel/comm_null.c parallel/group.c parallel/bootstrap.c \
 *       parallel/topology.c util/err.c \
 *       -L/usr/local/cuda/lib64 -lnccl -lcudart -lpthread -lrt -lm
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "parallel/bootstrap.h"
#include "parallel/comm.h"
#include "parallel/topology.h"
#include "tests/comm_modes.h"

#define PROG "test_nccl"


#define MAX_N ((size_t)(1u << 22) + 5) /* largest block: 4M + 5 elements */

static void cuda_die(cudaError_t err, const char *what, int line) {
    fprintf(stderr, PROG ": error: line %d: %s: %s\n", line, what, cudaGetErrorString(err));
    exit(1);
}
#define CK(call)                                                    \
    do {                                                            \
        cudaError_t err_ = (call);                                  \
        if (err_ != cudaSuccess) cuda_die(err_, #call, __LINE__);   \
    } while (0)

/* ---- device memory, as the CUDA backend would hand it to a communicator -- */

static void mem_to_host(void *ctx, void *host_dst, const void *buf_src, size_t bytes) {
    CK(cudaMemcpyAsync(host_dst, buf_src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)ctx));
    CK(cudaStreamSynchronize((cudaStream_t)ctx));
}
static void mem_from_host(void *ctx, void *buf_dst, const void *host_src, size_t bytes) {
    CK(cudaMemcpyAsync(buf_dst, host_src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)ctx));
    CK(cudaStreamSynchronize((cudaStream_t)ctx));
}
static void mem_copy(void *ctx, void *buf_dst, const void *buf_src, size_t bytes) {
    if (buf_dst != buf_src) CK(cudaMemcpyAsync(buf_dst, buf_src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)ctx));
}

typedef struct {
    cudaStream_t stream; /* the compute stream */
    void *staging;       /* device: where inputs land before the compute stream copies them */
    comm_memory mem;
} gpu;

/* Puts `bytes` from the host into device buffer dev, all on the compute
 * stream (host -> staging, poison dev, staging -> dev), and does NOT wait:
 * the collective that reads dev must order itself after the compute
 * stream. (The host buffer may be reused at once: a copy from pageable
 * memory returns once the data is staged.) */
static void put(gpu *g, void *dev, const void *host, size_t bytes) {
    if (bytes == 0) return;
    CK(cudaMemcpyAsync(g->staging, host, bytes, cudaMemcpyHostToDevice, g->stream));
    CK(cudaMemsetAsync(dev, 0xFF, bytes, g->stream));
    CK(cudaMemcpyAsync(dev, g->staging, bytes, cudaMemcpyDeviceToDevice, g->stream));
}

/* Fills dev with 0xFF bytes (NaN in fp32 and bf16) on the compute stream. */
static void poison(gpu *g, void *dev, size_t bytes) {
    if (bytes) CK(cudaMemsetAsync(dev, 0xFF, bytes, g->stream));
}

/* Device to host through the compute stream (so after the collective). */
static void get(gpu *g, void *host, const void *dev, size_t bytes) {
    if (bytes) CK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, g->stream));
    CK(cudaStreamSynchronize(g->stream));
}

/* ---- verdicts -------------------------------------------------------------- */

typedef struct {
    bootstrap *bs;
    int rank, world, failed;
} job;

typedef struct {
    int32_t pass;
    char why[300];
} verdict;

/* Collects every rank's verdict on one check; rank 0 prints the line. */
static void report(job *j, const char *name, int pass, const char *why) {
    verdict v, *all = tg_malloc((size_t)j->world * sizeof *all, "verdicts");
    memset(&v, 0, sizeof v);
    v.pass = pass;
    if (!pass) snprintf(v.why, sizeof v.why, "%s", why);
    tg_err e;
    if (bootstrap_allgather(j->bs, &v, sizeof v, all, &e)) tg_die(PROG, &e);
    int bad = -1;
    for (int r = 0; r < j->world && bad < 0; r++)
        if (!all[r].pass) bad = r;
    if (j->rank == 0) {
        if (bad < 0)
            printf("ok %s\n", name);
        else
            printf("not ok %s - rank %d: %.290s\n", name, bad, all[bad].why);
        fflush(stdout);
    }
    if (bad >= 0) j->failed = 1;
    free(all);
}

/* ---- inputs and expected results ------------------------------------------- */

/* Never zero; magnitudes from about 2^-32 to 2^7, so rounding shows. */
static float val(uint32_t seed, int k, size_t i) {
    uint64_t h = (uint64_t)seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)k << 40) ^ (uint64_t)i;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    int32_t q = 2 * (int32_t)((h >> 11) & 0xFFFFFF) + 1 - (1 << 24); /* odd, so never 0; |q| < 2^24: exact in float */
    return (float)q / 16777216.0f * (float)(1u << (h & 15)) / 256.0f;
}

/* What member k contributes at element i, exactly representable in t. */
static float input(tg_dtype t, uint32_t seed, int k, size_t i) {
    float x = val(seed, k, i);
    return t == TG_BF16 ? tg_bf16_to_f32(tg_f32_to_bf16(x)) : x;
}

static float get_el(tg_dtype t, const void *a, size_t i) {
    return t == TG_BF16 ? tg_bf16_to_f32(((const uint16_t *)a)[i]) : ((const float *)a)[i];
}
static void set_el(tg_dtype t, void *a, size_t i, float x) {
    if (t == TG_BF16)
        ((uint16_t *)a)[i] = tg_f32_to_bf16(x);
    else
        ((float *)a)[i] = x;
}
static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Whether `got` is right for element i of a reduction over p members;
 * *want receives the float32 fold in rank order, rounded once to t. MAX is
 * exact; a SUM of two members is one correctly rounded addition, hence
 * bitwise that; a SUM of more (NCCL's order, bf16 partial sums rounded)
 * must be within p units of t's precision of the sum of magnitudes. */
static int reduce_ok(tg_dtype t, reduce_op op, uint32_t seed, int p, size_t i, float got, float *want) {
    float r = input(t, seed, 0, i);
    double exact = r, mag = fabs((double)r);
    for (int k = 1; k < p; k++) {
        float x = input(t, seed, k, i);
        if (op == REDUCE_MAX) {
            if (x > r) r = x;
        } else {
            r += x;
            exact += x;
            mag += fabs((double)x);
        }
    }
    *want = t == TG_BF16 ? tg_bf16_to_f32(tg_f32_to_bf16(r)) : r;
    if (op == REDUCE_MAX || p <= 2) return same_bits(got, *want);
    double tol = (double)p * (t == TG_BF16 ? 0x1p-8 : 0x1p-23) * mag;
    return fabs((double)got - exact) <= tol;
}

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* ---- one communicator at one size ----------------------------------------- */

typedef struct {
    comm *c;
    const char *name;
    const int *members; /* global ranks of the group */
    int nccl;           /* an NCCL communicator (else a comm_null) */
    uint64_t expect[COLL_KINDS];
} tracked;

typedef struct {
    gpu *g;
    job *j;
    void *dA, *dB;  /* device, room for a group's size * MAX_N floats and a few bytes */
    void *hA, *hB;  /* host, the same */
} buffers;

/* Runs every collective on t->c with blocks of n elements of type ty;
 * returns 0 when all results match, else fills why. Every rank of the
 * world calls it the same number of times (it exchanges result hashes). */
static int exercise(tracked *t, buffers *b, size_t n, tg_dtype ty, uint32_t seed, char *why, size_t cap) {
    comm *c = t->c;
    gpu *g = b->g;
    int p = c->size, me = c->rank, bad = 0;
    size_t es = tg_dtype_bytes(ty), blk = n * es, pm1 = (size_t)(p - 1);
    const char *tn = tg_dtype_name(ty);
    char *dA = b->dA, *dB = b->dB;
    uint64_t h = 1469598103934665603ull;
    tg_err e;
    /* A wrong value is noted (the first one) and the collectives go on, so
     * that every member keeps calling the same ones; a failed call ends the
     * run on this communicator (it is broken; its peers time out). */
#define WRONG(...) do { if (!bad) snprintf(why, cap, __VA_ARGS__); bad = 1; } while (0)
#define CALL(x) do { if (x) { if (!bad) snprintf(why, cap, "%.280s", e.msg); bad = 1; goto out; } } while (0)

    /* all_reduce, sum and max */
    for (int op = REDUCE_SUM; op <= REDUCE_MAX; op++) {
        uint32_t s = seed + (uint32_t)op;
        for (size_t i = 0; i < n; i++) set_el(ty, b->hA, i, input(ty, s, me, i));
        put(g, dA, b->hA, blk);
        CALL(comm_all_reduce_t(c, dA, n, ty, (reduce_op)op, &e));
        t->expect[COLL_ALL_REDUCE] += 2 * pm1 * (n / (size_t)p) * es;
        get(g, b->hA, dA, blk);
        h = hash_bytes(b->hA, blk, h);
        for (size_t i = 0; i < n; i++) {
            float want, got = get_el(ty, b->hA, i);
            if (!reduce_ok(ty, (reduce_op)op, s, p, i, got, &want)) {
                WRONG("all_reduce(%s) %s n=%zu: element %zu is %.9g, expected %.9g", op ? "max" : "sum", tn, n, i, got, want);
                break;
            }
        }
    }
    /* reduce_scatter: out of place, out == in + rank*n, out == in */
    for (int mode = 0; mode < 3; mode++) {
        static const char *const names[3] = {"", " (out == in + rank*n)", " (out == in)"};
        uint32_t s = seed + 7;
        for (size_t i = 0; i < n * (size_t)p; i++) set_el(ty, b->hA, i, input(ty, s, me, i));
        char *out = mode == 0 ? dB : mode == 1 ? dA + (size_t)me * blk : dA;
        if (mode == 0) poison(g, dB, blk);
        put(g, dA, b->hA, blk * (size_t)p);
        CALL(comm_reduce_scatter_t(c, out, dA, n, ty, &e));
        t->expect[COLL_REDUCE_SCATTER] += pm1 * n * es;
        get(g, b->hB, out, blk);
        for (size_t j = 0; j < n; j++) {
            float want, got = get_el(ty, b->hB, j);
            if (!reduce_ok(ty, REDUCE_SUM, s, p, (size_t)me * n + j, got, &want)) {
                WRONG("reduce_scatter%s %s n=%zu: element %zu is %.9g, expected %.9g", names[mode], tn, n, j, got, want);
                break;
            }
        }
    }
    /* all_gather: out of place, in == out + rank*n, in == out */
    for (int mode = 0; mode < 3; mode++) {
        static const char *const names[3] = {"", " (in == out + rank*n)", " (in == out)"};
        uint32_t s = seed + 9;
        for (size_t i = 0; i < n; i++) set_el(ty, b->hA, i, input(ty, s, me, i));
        char *in = mode == 0 ? dA : mode == 1 ? dB + (size_t)me * blk : dB;
        poison(g, dB, blk * (size_t)p);
        put(g, in, b->hA, blk);
        CALL(comm_all_gather_t(c, dB, in, n, ty, &e));
        t->expect[COLL_ALL_GATHER] += pm1 * n * es;
        get(g, b->hB, dB, blk * (size_t)p);
        for (size_t k = 0; k < n * (size_t)p; k++) {
            int r = (int)(k / n);
            size_t i = k % n;
            float want = input(ty, s, r, i), got = get_el(ty, b->hB, k);
            if (!same_bits(got, want)) {
                WRONG("all_gather%s %s n=%zu: block %d element %zu is %.9g, expected %.9g", names[mode], tn, n, r, i, got, want);
                break;
            }
        }
    }
    /* broadcast of an odd number of bytes from the last and the first member */
    for (int root = p - 1;; root = 0) {
        size_t bytes = blk + (n ? 3 : 0);
        unsigned char *u = b->hA;
        for (size_t i = 0; i < bytes; i++) u[i] = (unsigned char)(me == root ? (i * 131 + 7 + (size_t)root) : 0xEE);
        put(g, dA, u, bytes);
        CALL(comm_broadcast(c, dA, bytes, root, &e));
        if (me == root && p > 1) t->expect[COLL_BROADCAST] += bytes;
        get(g, u, dA, bytes);
        for (size_t i = 0; i < bytes; i++)
            if (u[i] != (unsigned char)(i * 131 + 7 + (size_t)root)) {
                WRONG("broadcast of %zu bytes from %d: byte %zu wrong", bytes, root, i);
                break;
            }
        if (root == 0) break;
    }
    CALL(c->vt->barrier(c, &e));
out:;
    /* every member of the group holds the same bits after the all_reduces */
    uint64_t *hs = tg_malloc((size_t)b->j->world * sizeof *hs, "hashes");
    if (bootstrap_allgather(b->j->bs, &h, sizeof h, hs, &e)) tg_die(PROG, &e);
    for (int k = 0; k < p && !bad; k++)
        if (hs[t->members[k]] != h) {
            snprintf(why, cap, "all_reduce %s n=%zu: global ranks %d and %d hold different results", tn, n, b->j->rank, t->members[k]);
            bad = 1;
        }
    free(hs);
    return bad;
#undef WRONG
#undef CALL
}

/* Host buffers are staged through the device: an all_reduce (sum) of
 * rank+1 on every member gives size*(size+1)/2, and an all_gather of one
 * host value per member gives every member's. */
static int host_buffers_work(comm *c, char *why, size_t cap) {
    tg_err e = {{0}};
    float v[3] = {(float)(c->rank + 1), 0.5f, -2.0f};
    if (comm_all_reduce_t(c, v, 3, TG_F32, REDUCE_SUM, &e)) {
        snprintf(why, cap, "all_reduce of a host buffer failed: %.250s", e.msg);
        return 1;
    }
    const float p = (float)c->size;
    if (v[0] != p * (p + 1) / 2 || v[1] != 0.5f * p || v[2] != -2.0f * p) {
        snprintf(why, cap, "all_reduce of a host buffer gave %g %g %g", v[0], v[1], v[2]);
        return 1;
    }
    float mine = 10.0f + (float)c->rank, all[64];
    if (c->size > 64) return 0;
    if (comm_all_gather_t(c, all, &mine, 1, TG_F32, &e)) {
        snprintf(why, cap, "all_gather of host buffers failed: %.250s", e.msg);
        return 1;
    }
    for (int r = 0; r < c->size; r++)
        if (all[r] != 10.0f + (float)r) {
            snprintf(why, cap, "all_gather of host buffers: block %d is %g", r, all[r]);
            return 1;
        }
    return 0;
}

/* ---- several collectives in flight --------------------------------------------- */

/* Whether grouped result `got` may stand for the blocking call's `want`:
 * the same bits, except for sums over more than two members, which NCCL
 * may add in another order in a group (it may tune a group's launch as a
 * whole): there within p units of float32's precision of their size. */
static int grouped_same(const float *got, const float *want, size_t count, int p, int is_sum) {
    if (!is_sum || p <= 2) return memcmp(got, want, count * sizeof(float)) == 0;
    for (size_t i = 0; i < count; i++)
        if (!(fabsf(got[i] - want[i]) <= (float)p * 0x1p-23f * 128.0f * (float)p)) return 0; /* |inputs| <= 2^7 */
    return 1;
}

/* all_reduce, reduce_scatter and all_gather of n floats per block on device
 * buffers, started before any wait (waited for in reverse order), with
 * deferred waits (comm_defer_waits: the waits return at once, then
 * comm_settle), inside a group (comm_group_begin: one NCCL launch, waited
 * for after its end) and inside a group with deferred waits, against the
 * blocking calls: equal results (bitwise but for grouped_same's sums), equal
 * bytes per kind. The outputs of the non-blocking modes are read as the
 * compute stream sees them right after the waits, before comm_settle, so a
 * deferred wait that does not order the compute stream after the collective
 * reads poison (NaN) or its inputs. */
#define NB_MODES 5 /* blocking, started before any wait, deferred waits, grouped, grouped and deferred */
static int nonblocking_work(gpu *g, comm *c, size_t n, char *why, size_t cap) {
    static const char *const mode_names[NB_MODES] = {"blocking", "non-blocking", "deferred", "grouped", "grouped deferred"};
    int p = c->size, me = c->rank, bad = 0;
    size_t big = n * (size_t)p;
    const size_t count[5] = {n, big, n, n, big}; /* all_reduce buf, reduce_scatter in/out, all_gather in/out */
    float *h = tg_malloc((big + 1) * sizeof(float), "host buffer"), *res[NB_MODES][3], *d[NB_MODES][5], *seen[3] = {NULL};
    uint64_t sent[NB_MODES][COLL_KINDS];
    tg_err e = {{0}};
    for (int m = 0; m < NB_MODES; m++) {
        for (int k = 0; k < 5; k++) {
            CK(cudaMalloc((void **)&d[m][k], count[k] * sizeof(float) + 4));
            for (size_t i = 0; i < count[k]; i++) h[i] = val(40 + (uint32_t)k, me, i);
            put(g, d[m][k], h, count[k] * sizeof(float));
        }
        uint64_t before[COLL_KINDS];
        memcpy(before, c->bytes_sent, sizeof before);
        if (m == 0) {
            bad |= comm_all_reduce_t(c, d[m][0], n, TG_F32, REDUCE_SUM, &e) || comm_reduce_scatter_t(c, d[m][2], d[m][1], n, TG_F32, &e) ||
                   comm_all_gather_t(c, d[m][4], d[m][3], n, TG_F32, &e);
        } else {
            comm_req *r[3] = {NULL, NULL, NULL};
            const int grouped = m >= 3;
            comm_defer_waits(c, m == 2 || m == 4);
            bad = grouped && comm_group_begin(c, &e) != 0;
            r[0] = bad ? NULL : comm_all_reduce_start(c, d[m][0], n, TG_F32, REDUCE_SUM, &e);
            r[1] = r[0] ? comm_reduce_scatter_start(c, d[m][2], d[m][1], n, TG_F32, &e) : NULL;
            r[2] = r[1] ? comm_all_gather_start(c, d[m][4], d[m][3], n, TG_F32, &e) : NULL;
            if (!r[2]) bad = 1; /* the communicator is broken: the others' waits would fail */
            tg_err later;
            if (grouped && c->in_group && comm_group_end(c, bad ? &later : &e)) bad = 1;
            for (int k = 2; k >= 0 && !bad; k--) bad |= comm_wait(r[k], &e) != 0;
            /* what the compute stream sees of the outputs after the waits and
             * before any settling, as the trainer's next kernels read them */
            for (int k = 0; k < 3 && !bad; k++) {
                const size_t bytes = count[2 * k] * sizeof(float);
                CK(cudaMalloc((void **)&seen[k], bytes + 4));
                if (bytes) CK(cudaMemcpyAsync(seen[k], d[m][2 * k], bytes, cudaMemcpyDeviceToDevice, g->stream));
            }
            comm_defer_waits(c, 0);
            if (!bad) bad = comm_settle(c, &e) != 0;
        }
        if (bad) {
            snprintf(why, cap, "%s n=%zu: %.250s", mode_names[m], n, e.msg);
            break;
        }
        for (int k = 0; k < COLL_KINDS; k++) sent[m][k] = c->bytes_sent[k] - before[k];
        for (int k = 0; k < 3; k++) { /* outputs: buffers 0, 2, 4 */
            res[m][k] = tg_malloc(count[2 * k] * sizeof(float) + 4, "result");
            get(g, res[m][k], m == 0 ? d[m][2 * k] : seen[k], count[2 * k] * sizeof(float));
            if (m != 0) CK(cudaFree(seen[k]));
            seen[k] = NULL;
        }
        for (int k = 0; k < 5; k++) CK(cudaFree(d[m][k]));
    }
    const size_t out_count[3] = {n, n, big};
    for (int m = 1; m < NB_MODES && !bad; m++)
        for (int k = 0; k < 3 && !bad; k++)
            if (m >= 3 ? !grouped_same(res[m][k], res[0][k], out_count[k], p, k < 2)
                       : memcmp(res[0][k], res[m][k], out_count[k] * sizeof(float)) != 0) {
                snprintf(why, cap, "n=%zu: collective %d of 3 (%s) differs from the blocking call", n, k, mode_names[m]);
                bad = 1;
            }
    if (!bad) bad = comm_modes_sent_differ(NB_MODES, sent, mode_names, n, why, cap);
    if (!bad)
        for (int m = 0; m < NB_MODES; m++)
            for (int k = 0; k < 3; k++) free(res[m][k]);
    free(h);
    return bad;
}

/* ---- CUDA graphs ---------------------------------------------------------------- */

/* An all_reduce and an all_gather of n floats per member captured into a
 * CUDA graph under deferred waits (comm_capture_begin: the comm stream forks
 * off the captured compute stream and joins back at the waits; comm_settle
 * and comm_barrier are refused inside the capture), then launched twice on
 * fresh inputs: after each launch (comm_replayed, comm_settle) the outputs
 * are bitwise the blocking calls' on the same inputs, and the launch counts
 * their bytes. */
static int graph_work(gpu *g, comm *c, size_t n, char *why, size_t cap) {
    const int p = c->size, me = c->rank;
    const size_t one = n * sizeof(float), all = one * (size_t)p;
    float *h = tg_malloc(all + 4, "host buffer"), *got = tg_malloc(all + 4, "host buffer"), *want = tg_malloc(all + 4, "host buffer");
    float *ar, *ag_in, *ag_out, *ref_ar, *ref_ag;
    CK(cudaMalloc((void **)&ar, one + 4));
    CK(cudaMalloc((void **)&ag_in, one + 4));
    CK(cudaMalloc((void **)&ag_out, all + 4));
    CK(cudaMalloc((void **)&ref_ar, one + 4));
    CK(cudaMalloc((void **)&ref_ag, all + 4));
    tg_err e = {{0}}, in_capture = {{0}};
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeGlobal));
    comm_capture_begin(c);
    comm_defer_waits(c, 1);
    comm_req *r0 = comm_all_reduce_start(c, ar, n, TG_F32, REDUCE_SUM, &e);
    comm_req *r1 = r0 ? comm_all_gather_start(c, ag_out, ag_in, n, TG_F32, &e) : NULL;
    int bad = !r1;
    tg_err later;
    if (r1 && comm_wait(r1, &e)) bad = 1;
    if (r0 && comm_wait(r0, bad ? &later : &e)) bad = 1;
    const int settle_refused = comm_settle(c, &in_capture) != 0 && strstr(in_capture.msg, "inside a CUDA graph capture") &&
                               comm_barrier(c, &in_capture) != 0 && strstr(in_capture.msg, "inside a CUDA graph capture");
    comm_defer_waits(c, 0);
    const cudaError_t end = cudaStreamEndCapture(g->stream, &graph);
    comm_capture_end(c);
    if (bad || end != cudaSuccess || !settle_refused) {
        snprintf(why, cap, "n=%zu: capture: %.150s; end %s; settle and barrier inside it %s", n, bad ? e.msg : "ok",
                 cudaGetErrorString(end), settle_refused ? "refused" : "not both refused");
        bad = 1;
    }
    if (!bad) CK(cudaGraphInstantiate(&exec, graph, 0));
    for (int launch = 0; launch < 2 && !bad; launch++) {
        const uint32_t seed = 60 + 2 * (uint32_t)launch;
        for (size_t i = 0; i < n; i++) h[i] = val(seed, me, i);
        put(g, ar, h, one);
        put(g, ref_ar, h, one);
        for (size_t i = 0; i < n; i++) h[i] = val(seed + 1, me, i);
        put(g, ag_in, h, one);
        poison(g, ag_out, all);
        uint64_t before[COLL_KINDS], graph_sent[COLL_KINDS];
        memcpy(before, c->bytes_sent, sizeof before);
        CK(cudaGraphLaunch(exec, g->stream));
        comm_replayed(c);
        bad = comm_settle(c, &e) != 0;
        for (int k = 0; k < COLL_KINDS; k++) graph_sent[k] = c->bytes_sent[k] - before[k];
        memcpy(before, c->bytes_sent, sizeof before);
        if (!bad) bad = comm_all_reduce_t(c, ref_ar, n, TG_F32, REDUCE_SUM, &e) || comm_all_gather_t(c, ref_ag, ag_in, n, TG_F32, &e);
        if (bad) {
            snprintf(why, cap, "n=%zu launch %d: %.250s", n, launch + 1, e.msg);
            break;
        }
        for (int k = 0; k < COLL_KINDS && !bad; k++)
            if (graph_sent[k] != c->bytes_sent[k] - before[k]) {
                snprintf(why, cap, "n=%zu launch %d: %s: the launch counted %llu bytes, the blocking call %llu", n, launch + 1,
                         comm_kind_name((coll_kind)k), (unsigned long long)graph_sent[k],
                         (unsigned long long)(c->bytes_sent[k] - before[k]));
                bad = 1;
            }
        const float *outs[2][2] = {{ar, ref_ar}, {ag_out, ref_ag}};
        const size_t sizes[2] = {one, all};
        for (int k = 0; k < 2 && !bad; k++) {
            get(g, got, outs[k][0], sizes[k]);
            get(g, want, outs[k][1], sizes[k]);
            if (memcmp(got, want, sizes[k]) != 0) {
                snprintf(why, cap, "n=%zu launch %d: the %s differs from the blocking call's", n, launch + 1,
                         k ? "all_gather" : "all_reduce");
                bad = 1;
            }
        }
    }
    if (exec) CK(cudaGraphExecDestroy(exec));
    if (graph) CK(cudaGraphDestroy(graph));
    float *bufs[] = {ar, ag_in, ag_out, ref_ar, ref_ag};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) CK(cudaFree(bufs[i]));
    free(h);
    free(got);
    free(want);
    return bad;
}

/* ---- device time ------------------------------------------------------------- */

/* The least each collective of several members takes where the emulation
 * is told to make it last (EMU_NCCL_DELAY_MS, tests/emu/emu_nccl_ranks.cpp),
 * else 0. */
static double coll_min_s(const comm *c) {
    const char *v = getenv("EMU_NCCL_DELAY_MS");
    return c->size > 1 && v ? 1e-3 * atof(v) : 0.0;
}

/* What the NCCL communicator counts in c->seconds is its collectives' time
 * on the device (CUDA events on its stream, comm_nccl_time.c), not the
 * host's inside the calls: an all_reduce and an all_gather under deferred
 * waits, whose starts and waits only enqueue (on the lazy device the
 * collectives run inside comm_settle, which host timing does not count),
 * then the same two as a CUDA graph, whose launch calls no collective at
 * all. Each adds more than 0 seconds (at least each collective's
 * EMU_NCCL_DELAY_MS), and no more than the wall time around it. */
static int device_time_work(gpu *g, comm *c, size_t n, char *why, size_t cap) {
    const size_t one = n * sizeof(float), all = one * (size_t)c->size;
    float *ar, *ag;
    CK(cudaMalloc((void **)&ar, one + 4));
    CK(cudaMalloc((void **)&ag, all + 4));
    CK(cudaMemsetAsync(ar, 0, one, g->stream));
    CK(cudaMemsetAsync(ag, 0, all, g->stream));
    tg_err e = {{0}};
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    int bad = 0;
    for (int way = 0; way < 2 && !bad; way++) { /* 0: op by op, deferred; 1: a CUDA graph */
        const double s0 = c->seconds, t0 = comm_clock();
        if (way == 1) {
            CK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeGlobal));
            comm_capture_begin(c);
        }
        comm_defer_waits(c, 1);
        comm_req *r0 = comm_all_reduce_start(c, ar, n, TG_F32, REDUCE_SUM, &e);
        comm_req *r1 = r0 ? comm_all_gather_start(c, ag, ar, n, TG_F32, &e) : NULL;
        tg_err later;
        bad = !r1 || comm_wait(r1, &e) != 0;
        if (r0 && comm_wait(r0, bad ? &later : &e)) bad = 1;
        comm_defer_waits(c, 0);
        if (way == 1) {
            const cudaError_t end = cudaStreamEndCapture(g->stream, &graph);
            comm_capture_end(c);
            if (!bad && end != cudaSuccess) snprintf(e.msg, sizeof e.msg, "capture: %s", cudaGetErrorString(end));
            bad |= end != cudaSuccess;
            if (!bad) CK(cudaGraphInstantiate(&exec, graph, 0));
        }
        const double s1 = c->seconds, t1 = comm_clock(); /* the capture's collectives have not run */
        if (!bad && way == 1) {
            CK(cudaGraphLaunch(exec, g->stream));
            comm_replayed(c);
        }
        if (!bad) bad = comm_settle(c, &e) != 0;
        const double got = c->seconds - (way == 1 ? s1 : s0), wall = comm_clock() - (way == 1 ? t1 : t0);
        const double least = 2 * coll_min_s(c) * 0.9;
        const char *how = way ? "a launch of the graph" : "deferred";
        if (bad)
            snprintf(why, cap, "n=%zu %s: %.250s", n, how, e.msg);
        else if (way == 1 && s1 != s0)
            snprintf(why, cap, "n=%zu: the capture added %g s (its collectives had not run)", n, s1 - s0);
        else if (!(got > 0 && got >= least && got <= wall + 1e-4))
            snprintf(why, cap, "n=%zu %s: seconds grew by %.6f, want more than 0 and %.6f, at most the wall time %.6f", n, how, got,
                     least, wall);
        else
            continue;
        bad = 1;
    }
    if (exec) CK(cudaGraphExecDestroy(exec));
    if (graph) CK(cudaGraphDestroy(graph));
    CK(cudaFree(ar));
    CK(cudaFree(ag));
    return bad;
}

/* ---- groups ------------------------------------------------------------------- */

/* GROUP_MANY all_gathers of one float per member from a buffer of inputs
 * into their own slots of an output, all in one group: more than twice the
 * ops comm_nccl puts in one NCCL group (2048, comm_nccl_group.c), so it
 * launches three. c is fresh: every request's events are new, so a `done`
 * never recorded is an emulator error. Each slot must hold its input. */
#define GROUP_MANY (2 * 2048 + 5)
static int group_many(gpu *g, comm *c, char *why, size_t cap) {
    const size_t p = (size_t)c->size, me = (size_t)c->rank;
    float *in, *out, *h = tg_malloc(GROUP_MANY * p * sizeof(float), "host buffer");
    CK(cudaMalloc((void **)&in, GROUP_MANY * sizeof(float)));
    CK(cudaMalloc((void **)&out, GROUP_MANY * p * sizeof(float)));
    for (size_t i = 0; i < GROUP_MANY; i++) h[i] = val(60, (int)me, i);
    put(g, in, h, GROUP_MANY * sizeof(float));
    poison(g, out, GROUP_MANY * p * sizeof(float));
    comm_req **r = tg_calloc(GROUP_MANY, sizeof *r, "requests");
    tg_err e = {{0}};
    int n = 0, bad = comm_group_begin(c, &e) != 0;
    for (; !bad && n < GROUP_MANY; n++)
        bad = !(r[n] = comm_all_gather_start(c, out + (size_t)n * p, in + n, 1, TG_F32, &e));
    tg_err later;
    if (c->in_group && comm_group_end(c, bad ? &later : &e)) bad = 1;
    for (int k = 0; k < n; k++)
        if (r[k] && comm_wait(r[k], bad ? &later : &e)) bad = 1;
    if (bad) snprintf(why, cap, "%.280s", e.msg);
    get(g, h, out, GROUP_MANY * p * sizeof(float));
    for (size_t k = 0; k < GROUP_MANY * p && !bad; k++) {
        const float want = val(60, (int)(k % p), k / p);
        if (!same_bits(h[k], want))
            snprintf(why, cap, "all_gather %zu of %d in one group: block %zu is %.9g, expected %.9g", k / p, GROUP_MANY, k % p,
                     h[k], want), bad = 1;
    }
    CK(cudaFree(in));
    CK(cudaFree(out));
    free(h);
    free(r);
    return bad;
}

/* Inside a group a wait is refused with a message naming the group (the
 * request stays in flight and completes after the end, with its bytes
 * counted once); then a host buffer, which a start must complete, is
 * refused and breaks the communicator (c is not used again). */
static int group_refusals(gpu *g, comm *c, char *why, size_t cap) {
    enum { N = 64 };
    float *d, h[N];
    CK(cudaMalloc((void **)&d, N * sizeof(float)));
    for (int i = 0; i < N; i++) h[i] = val(61, c->rank, (size_t)i);
    put(g, d, h, sizeof h);
    const uint64_t sent0 = c->bytes_sent[COLL_ALL_REDUCE];
    tg_err e = {{0}}, w = {{0}}, x = {{0}};
    comm_req *r = comm_group_begin(c, &e) ? NULL : comm_all_reduce_start(c, d, N, TG_F32, REDUCE_SUM, &e);
    const int refused = r && comm_wait(r, &w) != 0 && strstr(w.msg, "inside a group") && strstr(w.msg, c->name);
    const int done = r && comm_group_end(c, &e) == 0 && comm_wait(r, &e) == 0;
    const uint64_t want = c->size > 1 ? 2 * (uint64_t)(c->size - 1) * (N / (size_t)c->size) * sizeof(float) : 0;
    const int counted = c->bytes_sent[COLL_ALL_REDUCE] - sent0 == want;
    float host = 1.0f;
    const int host_refused = comm_group_begin(c, &x) == 0 && !comm_all_reduce_start(c, &host, 1, TG_F32, REDUCE_SUM, &x) &&
                             strstr(x.msg, "host buffer") && strstr(x.msg, "inside a group");
    tg_err y = {{0}};
    const int end_fails = comm_group_end(c, &y) != 0 && strstr(y.msg, "broken");
    CK(cudaFree(d));
    if (refused && done && counted && host_refused && end_fails) return 0;
    snprintf(why, cap, "wait refused %d (\"%.60s\"), done %d (%.60s), bytes counted %d, host buffer refused %d (\"%.60s\"), "
             "end fails %d", refused, w.msg, done, e.msg, counted, host_refused, x.msg, end_fails);
    return 1;
}

/* ---- the hang test ------------------------------------------------------------ */

/* With `defer`, the waits are deferred (they return at once) and the
 * hang must surface at comm_settle instead, the same way. */
static int run_hang(job *j, gpu *g, comm *c, int hang, double timeout, void *dev, int defer) {
    tg_err e = {{0}};
    if (c->size < 2) {
        printf("not ok hang - rank %d: no group of more than one rank to test\n", j->rank);
        return 1;
    }
    float host[1024];
    for (int i = 0; i < 1024; i++) host[i] = val(3, c->rank, (size_t)i);
    put(g, dev, host, sizeof host);
    if (comm_all_reduce_t(c, dev, 1024, TG_F32, REDUCE_SUM, &e)) {
        printf("not ok hang - rank %d: the first all_reduce failed: %.250s\n", j->rank, e.msg);
        return 1;
    }
    if (j->rank == hang) {
        struct timespec ts = {(time_t)(2 * timeout + 3), 0};
        nanosleep(&ts, NULL);
        fflush(stdout);
        _exit(0);
    }
    double t0 = comm_clock();
    comm_defer_waits(c, defer);
    comm_req *first = comm_all_reduce_start(c, dev, 512, TG_F32, REDUCE_SUM, &e);
    comm_req *second = first ? comm_all_reduce_start(c, (float *)dev + 512, 512, TG_F32, REDUCE_SUM, &e) : NULL;
    int rc = second ? comm_wait(first, &e) : -1;
    if (defer && rc == 0) {
        rc = comm_wait(second, &e) != 0 ? -2 : comm_settle(c, &e); /* -2: a deferred wait waited */
        second = NULL;
    }
    comm_defer_waits(c, 0);
    double dt = comm_clock() - t0;
    int pass = rc == -1 && strstr(e.msg, "timed out") && strstr(e.msg, c->name) && dt < timeout + 5;
    if (pass && second) { /* the collective in flight behind it fails too, naming the group */
        tg_err e2 = {{0}};
        pass = comm_wait(second, &e2) != 0 && strstr(e2.msg, c->name) && strstr(e2.msg, "broken");
        if (!pass) snprintf(e.msg, sizeof e.msg, "the second wait: %.400s", e2.msg[0] ? e2.msg : "(succeeded)");
    }
    if (pass) {
        tg_err e2 = {{0}};
        pass = comm_all_reduce_t(c, dev, 1024, TG_F32, REDUCE_SUM, &e2) != 0 && strstr(e2.msg, "broken");
    }
    if (pass)
        printf("ok hang_detected%s - rank %d after %.1f s: %.300s\n", defer ? "_deferred" : "", j->rank, dt, e.msg);
    else
        printf("not ok hang_detected%s - rank %d: rc %d after %.1f s: %.300s\n", defer ? "_deferred" : "", j->rank, rc, dt,
               rc ? e.msg : "(succeeded)");
    fflush(stdout);
    return !pass;
}

/* ---- main ------------------------------------------------------------------- */

int main(int argc, char **argv) {
    int tp = 1, hang = -1, defer = 0;
    double timeout = 30;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout = atof(argv[++i]);
        else if (!strcmp(argv[i], "--hang") && i + 1 < argc) hang = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--defer")) defer = 1;
        else if (i == 1 && argv[i][0] != '-') tp = atoi(argv[i]);
        else {
            fprintf(stderr, "usage: " PROG " [TP] [--timeout S] [--hang R]\n");
            return 2;
        }
    }
    tg_err e = {{0}};
    topology topo;
    if (topology_from_env(&topo, tp, &e)) tg_die(PROG, &e);
    int ndev = 0;
    cudaError_t derr = cudaGetDeviceCount(&ndev);
    if (derr != cudaSuccess || ndev < 1) {
        printf("not ok devices - rank %d: no CUDA device (%s)\n", topo.rank, derr != cudaSuccess ? cudaGetErrorString(derr) : "count 0");
        return 1;
    }
    if (ndev < topo.local_world) {
        if (topo.rank == 0) printf("skip: %d ranks on this node but %d GPU%s\n", topo.local_world, ndev, ndev > 1 ? "s" : "");
        topology_free(&topo);
        return 0;
    }
    CK(cudaSetDevice(topo.local_rank));

    job j = {0};
    j.rank = topo.rank;
    j.world = topo.world;
    j.bs = bootstrap_create(&topo, timeout, &e);
    if (!j.bs) tg_die(PROG, &e);

    gpu g;
    memset(&g, 0, sizeof g);
    CK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    int p_max = topo.tp > topo.dp ? topo.tp : topo.dp;
    size_t bytes = MAX_N * (size_t)p_max * sizeof(float) + 64;
    CK(cudaMalloc(&g.staging, bytes));
    g.mem = (comm_memory){g.stream, mem_to_host, mem_from_host, mem_copy, 1, g.stream, NULL};

    comm *tpc = comm_nccl_create(j.bs, "tp", topo.tp_ranks, topo.tp, topo.tp_rank, &g.mem, timeout, &e);
    if (!tpc) tg_die(PROG, &e);
    comm *dpc = comm_nccl_create(j.bs, "dp", topo.dp_ranks, topo.dp, topo.dp_rank, &g.mem, timeout, &e);
    if (!dpc) tg_die(PROG, &e);
    /* every rank alone in an NCCL communicator: the NCCL path on one GPU */
    comm *soloc = comm_nccl_create_at_size_1(j.bs, "solo", &topo.rank, 1, 0, &g.mem, timeout, &e);
    if (!soloc) tg_die(PROG, &e);

    buffers b = {&g, &j, NULL, NULL, NULL, NULL};
    CK(cudaMalloc(&b.dA, bytes));
    CK(cudaMalloc(&b.dB, bytes));
    b.hA = tg_malloc(bytes, "host buffer");
    b.hB = tg_malloc(bytes, "host buffer");

    if (hang >= 0) {
        int rc = run_hang(&j, &g, tpc->size > 1 ? tpc : dpc, hang, timeout, b.dA, defer);
        comm_destroy(tpc);
        comm_destroy(dpc);
        comm_destroy(soloc);
        bootstrap_destroy(j.bs);
        return rc;
    }

    report(&j, "create", tpc->size == topo.tp && tpc->rank == topo.tp_rank && dpc->size == topo.dp && dpc->rank == topo.dp_rank &&
                             soloc->size == 1 && soloc->rank == 0, "wrong group size or rank");

    enum { NCOMM = 3 };
    tracked t[NCOMM] = {{tpc, "tp", topo.tp_ranks, topo.tp > 1, {0}},
                        {dpc, "dp", topo.dp_ranks, topo.dp > 1, {0}},
                        {soloc, "solo", &topo.rank, 1, {0}}};
    /* sizes: empty, smaller than the group, odd, around NCCL's protocol
     * switches, several MiB */
    const size_t sizes[] = {0, 1, 3, 7, 64, 65, 1000, 4099, 65537, 262147, MAX_N};
    const tg_dtype types[] = {TG_F32, TG_BF16};
    char why[300] = "";
    for (int gi = 0; gi < NCOMM; gi++)
        for (int ti = 0; ti < 2; ti++) {
            int bad = 0;
            for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
                /* keep exchanging hashes after a failure: every rank makes the same calls */
                char w[300];
                if (exercise(&t[gi], &b, sizes[s], types[ti], (uint32_t)(s * 1000 + (size_t)gi * 100 + (size_t)ti), w, sizeof w) &&
                    !bad) {
                    bad = 1;
                    snprintf(why, sizeof why, "%s", w);
                }
            }
            char name[64];
            snprintf(name, sizeof name, "%s_%s_collectives", t[gi].name, tg_dtype_name(types[ti]));
            report(&j, name, !bad, why);
        }
    /* bytes_sent: the ring formula, written out again here; seconds >= 0 */
    for (int gi = 0; gi < NCOMM; gi++) {
        int bad = 0;
        for (int k = 0; k < COLL_KINDS && !bad; k++)
            if (t[gi].c->bytes_sent[k] != t[gi].expect[k]) {
                snprintf(why, sizeof why, "%s %s: %llu bytes counted, formula says %llu", t[gi].name, comm_kind_name((coll_kind)k),
                         (unsigned long long)t[gi].c->bytes_sent[k], (unsigned long long)t[gi].expect[k]);
                bad = 1;
            }
        if (!bad && !(t[gi].c->seconds >= 0)) {
            snprintf(why, sizeof why, "%s: seconds is %g", t[gi].name, t[gi].c->seconds);
            bad = 1;
        }
        char name[64];
        snprintf(name, sizeof name, "%s_bytes_sent", t[gi].name);
        report(&j, name, !bad, why);
    }
    /* several collectives in flight */
    for (int gi = 0; gi < NCOMM; gi++) {
        const size_t nb_sizes[] = {0, 1, 4099, 65537};
        int bad = 0;
        for (size_t s = 0; s < sizeof nb_sizes / sizeof *nb_sizes && !bad; s++)
            bad = nonblocking_work(&g, t[gi].c, nb_sizes[s], why, sizeof why);
        char name[64];
        snprintf(name, sizeof name, "%s_nonblocking", t[gi].name);
        report(&j, name, !bad, why);
    }
    /* the collectives inside a CUDA graph */
    for (int gi = 0; gi < NCOMM; gi++) {
        if (!t[gi].nccl) continue;
        const size_t g_sizes[] = {1, 4099};
        int bad = 0;
        for (size_t s = 0; s < sizeof g_sizes / sizeof *g_sizes && !bad; s++) bad = graph_work(&g, t[gi].c, g_sizes[s], why, sizeof why);
        char name[64];
        snprintf(name, sizeof name, "%s_graph", t[gi].name);
        report(&j, name, !bad, why);
    }
    /* the collectives' seconds are their device time */
    for (int gi = 0; gi < NCOMM; gi++) {
        if (!t[gi].nccl) continue;
        char name[64];
        snprintf(name, sizeof name, "%s_seconds_are_device_time", t[gi].name);
        report(&j, name, !device_time_work(&g, t[gi].c, 4099, why, sizeof why), why);
    }
    /* host buffers are staged through the device */
    for (int gi = 0; gi < NCOMM; gi++) {
        if (!t[gi].nccl) continue; /* the same on every rank: the layout is global */
        char name[64];
        snprintf(name, sizeof name, "%s_host_buffers", t[gi].name);
        int bad = host_buffers_work(t[gi].c, why, sizeof why);
        report(&j, name, !bad, why);
    }

    /* groups, on a fresh NCCL communicator of each rank alone */
    {
        comm *grp = comm_nccl_create_at_size_1(j.bs, "grp", &topo.rank, 1, 0, &g.mem, timeout, &e);
        if (!grp) tg_die(PROG, &e);
        report(&j, "group_many", !group_many(&g, grp, why, sizeof why), why);
        report(&j, "group_refusals", !group_refusals(&g, grp, why, sizeof why), why);
        comm_destroy(grp);
    }

    comm_destroy(tpc);
    comm_destroy(dpc);
    comm_destroy(soloc);
    CK(cudaFree(b.dA));
    CK(cudaFree(b.dB));
    CK(cudaFree(g.staging));
    CK(cudaStreamDestroy(g.stream));
    free(b.hA);
    free(b.hB);
    if (bootstrap_barrier(j.bs, &e)) tg_die(PROG, &e);
    bootstrap_destroy(j.bs);
    topology_free(&topo);
    return j.failed;
}

/* Tests of the topology, the TCP bootstrap and the shm communicator, run by
 * tests/t_comm.sh.
 *
 *   test_comm topo
 *       In one process: topology_from_env over good and bad launcher
 *       variables. Prints "ok NAME" / "not ok NAME - reason" lines.
 *   test_comm run TAG TP [--timeout S] [--die R] [--hang R] [--quit R] [--mismatch]
 *       One rank of a job (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the
 *       environment): builds the TP and DP communicators (default slot and a
 *       tiny one, so that buffers go through many chunks) and checks every
 *       collective against values computed here in the same fixed rank order,
 *       bitwise. Rank 0 prints one line per check, "ok TAG_check" or
 *       "not ok TAG_check - rank R: reason", after collecting every rank's
 *       verdict through the bootstrap.
 *       Fault modes (the survivors print the error and exit 3):
 *         --die R   rank R kills itself (SIGKILL, from a second thread) while
 *                   the ranks run a long series of all_reduces;
 *         --hang R  rank R sleeps instead of joining an all_reduce;
 *         --quit R  rank R exits right after the bootstrap is up (with
 *                   --quit-stage 1: after creating the TP communicator,
 *                   while the others create the DP one);
 *         --mismatch  rank 1 calls all_gather while the others all_reduce.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "parallel/bootstrap.h"
#include "parallel/comm.h"
#include "parallel/topology.h"
#include "tests/tap.h"
#include "tests/comm_modes.h"

/* ---- topology from the environment ------------------------------------- */

static const char *const ENV_VARS[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NNODES", "SLURM_JOB_ID",
    "SLURM_LAUNCH_NODE_IPADDR", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURMD_NODENAME", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE"};

static int topo_failed = 0;

/* Sets exactly the variables of `assign` ("A=1 B=2"), all others unset. */
static void set_env(const char *assign) {
    for (size_t i = 0; i < sizeof ENV_VARS / sizeof *ENV_VARS; i++) unsetenv(ENV_VARS[i]);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", assign);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        *eq = '\0';
        setenv(tok, eq + 1, 1);
    }
}

/* Expects an error whose message contains `needle`. */
static void topo_bad(const char *name, const char *env, int tp, const char *needle) {
    set_env(env);
    topology t;
    tg_err e = {{0}};
    char why[1200];
    if (topology_from_env(&t, tp, &e) == 0) {
        snprintf(why, sizeof why, "accepted %s (tp %d)", env, tp);
        topology_free(&t);
        tap_check(&topo_failed, name, 0, why);
        return;
    }
    snprintf(why, sizeof why, "message \"%s\" does not name %s", e.msg, needle);
    tap_check(&topo_failed, name, strstr(e.msg, needle) != NULL, why);
}

static int same_ints(const int *a, const int *b, int n) { return memcmp(a, b, (size_t)n * sizeof(int)) == 0; }

static int run_topo(void) {
    topology t;
    tg_err e = {{0}};
    char why[1200];

    set_env("");
    int rc = topology_from_env(&t, 1, &e);
    snprintf(why, sizeof why, "%s", rc ? e.msg : "wrong values");
    tap_check(&topo_failed, "topo_single", !rc && t.world == 1 && t.rank == 0 && t.tp == 1 && t.dp == 1 && !strcmp(t.source, "single"), why);
    if (!rc) topology_free(&t);

    set_env("RANK=1 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=23456");
    rc = topology_from_env(&t, 2, &e);
    snprintf(why, sizeof why, "%s", rc ? e.msg : "wrong coordinates or groups");
    tap_check(&topo_failed, "topo_env_tp2", !rc && t.tp_rank == 1 && t.dp_rank == 0 && t.dp == 2 && same_ints(t.tp_ranks, (int[]){0, 1}, 2) &&
                                    same_ints(t.dp_ranks, (int[]){1, 3}, 2) && t.master_port == 23456 &&
                                    !strcmp(t.master_addr, "127.0.0.1"), why);
    if (!rc) topology_free(&t);

    set_env("RANK=6 WORLD_SIZE=8 LOCAL_RANK=2 LOCAL_WORLD_SIZE=4 MASTER_ADDR=node0");
    rc = topology_from_env(&t, 4, &e);
    snprintf(why, sizeof why, "%s", rc ? e.msg : "wrong coordinates or groups");
    tap_check(&topo_failed, "topo_env_tp4_2nodes", !rc && t.tp_rank == 2 && t.dp_rank == 1 && same_ints(t.tp_ranks, (int[]){4, 5, 6, 7}, 4) &&
                                           same_ints(t.dp_ranks, (int[]){2, 6}, 2) && t.master_port == 29500 &&
                                           !strcmp(t.master_addr, "node0"), why);
    if (!rc) topology_free(&t);

    /* Rank 0's node is the step's first, not the launch (login) node of an interactive srun. */
    set_env("SLURM_PROCID=3 SLURM_NTASKS=4 SLURM_LOCALID=1 SLURM_TASKS_PER_NODE=2(x2) SLURM_LAUNCH_NODE_IPADDR=10.1.2.3 "
            "SLURM_JOB_ID=123456 SLURM_STEP_NODELIST=gpu[07-08] SLURM_JOB_NODELIST=gpu[01-08] SLURMD_NODENAME=gpu08");
    rc = topology_from_env(&t, 2, &e);
    snprintf(why, sizeof why, "%s", rc ? e.msg : "wrong values");
    tap_check(&topo_failed, "topo_slurm", !rc && t.rank == 3 && t.world == 4 && t.local_rank == 1 && t.local_world == 2 &&
                                  !strcmp(t.master_addr, "gpu07") && t.master_port == 28544 /* 20000 + 123456 % 12768 */ &&
                                  !strcmp(t.source, "slurm"), why);
    if (!rc) topology_free(&t);

    set_env("SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_NNODES=2 SLURM_JOB_NODELIST=a1-ib,b2 SLURMD_NODENAME=a1-ib");
    rc = topology_from_env(&t, 1, &e);
    snprintf(why, sizeof why, "%s", rc ? e.msg : t.master_addr);
    tap_check(&topo_failed, "topo_slurm_job_nodelist", !rc && t.local_world == 2 && !strcmp(t.master_addr, "a1-ib"), why);
    if (!rc) topology_free(&t);

    set_env("SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_NNODES=1 SLURM_LAUNCH_NODE_IPADDR=10.1.2.3 SLURM_STEP_NODELIST=gpu07");
    rc = topology_from_env(&t, 1, &e);
    snprintf(why, sizeof why, "%s", rc ? e.msg : t.master_addr);
    tap_check(&topo_failed, "topo_slurm_one_node_loopback", !rc && !strcmp(t.master_addr, "127.0.0.1"), why);
    if (!rc) topology_free(&t);

    static const char *const hostlists[][2] = {
        {"node[01-04,07]", "node01"}, {"node[07,01-04]", "node07"}, {"gpu3,gpu[1-2]", "gpu3"}, {"r[2-3]n[010-012]-ib", "r2n010-ib"},
        {"login.example.org", "login.example.org"}, {"n[5]", "n5"}, {"node[01-04", NULL}, {"node[a-b]", NULL}, {"[]", NULL},
        {",n1", NULL}, {"n]1", NULL}, {"n 1", NULL}, {"n[1[2]]", NULL}};
    int hl_ok = 1;
    char hl_why[300] = "";
    for (size_t i = 0; i < sizeof hostlists / sizeof *hostlists && hl_ok; i++) {
        char host[64];
        int r = topology_slurm_first_host(hostlists[i][0], host, sizeof host, &e);
        const char *want = hostlists[i][1];
        hl_ok = want ? r == 0 && !strcmp(host, want) : r != 0 && strstr(e.msg, hostlists[i][0]) != NULL;
        if (!hl_ok)
            snprintf(hl_why, sizeof hl_why, "\"%s\" gave %.200s, want %s", hostlists[i][0], r ? e.msg : host, want ? want : "an error");
    }
    tap_check(&topo_failed, "topo_slurm_first_host", hl_ok, hl_why);

    set_env("SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_NTASKS_PER_NODE=2 SLURM_JOB_ID=7 MASTER_ADDR=h MASTER_PORT=4000");
    rc = topology_from_env(&t, 1, &e);
    snprintf(why, sizeof why, "%s", rc ? e.msg : "wrong values");
    tap_check(&topo_failed, "topo_slurm_master_env", !rc && t.rank == 1 && !strcmp(t.master_addr, "h") && t.master_port == 4000, why);
    if (!rc) topology_free(&t);

    set_env("OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_LOCAL_RANK=2 OMPI_COMM_WORLD_LOCAL_SIZE=3 "
            "MASTER_ADDR=localhost MASTER_PORT=1234");
    rc = topology_from_env(&t, 3, &e);
    snprintf(why, sizeof why, "%s", rc ? e.msg : "wrong values");
    tap_check(&topo_failed, "topo_openmpi", !rc && t.rank == 2 && t.world == 3 && t.tp_rank == 2 && t.dp == 1 && t.master_port == 1234 &&
                                    !strcmp(t.source, "openmpi"), why);
    if (!rc) topology_free(&t);

    topo_bad("topo_bad_rank_text", "RANK=abc WORLD_SIZE=2", 1, "RANK=\"abc\"");
    topo_bad("topo_bad_rank_negative", "RANK=-1 WORLD_SIZE=2", 1, "RANK");
    topo_bad("topo_bad_rank_ge_world", "RANK=4 WORLD_SIZE=4", 1, "RANK=4 is not below WORLD_SIZE=4");
    topo_bad("topo_bad_world_zero", "RANK=0 WORLD_SIZE=0", 1, "WORLD_SIZE");
    topo_bad("topo_bad_world_missing", "RANK=0", 1, "WORLD_SIZE is not set");
    topo_bad("topo_bad_tp_divides", "RANK=0 WORLD_SIZE=6", 4, "WORLD_SIZE=6 is not divisible by parallel.tp (4)");
    topo_bad("topo_bad_local_rank", "RANK=0 WORLD_SIZE=4 LOCAL_RANK=3 LOCAL_WORLD_SIZE=2", 1, "LOCAL_RANK=3");
    topo_bad("topo_bad_port_range", "RANK=0 WORLD_SIZE=2 MASTER_PORT=70000", 1, "MASTER_PORT=70000");
    topo_bad("topo_bad_port_text", "RANK=0 WORLD_SIZE=2 MASTER_PORT=http", 1, "MASTER_PORT");
    topo_bad("topo_bad_no_master_multinode", "RANK=0 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2", 1, "MASTER_ADDR");
    topo_bad("topo_bad_slurm_ntasks", "SLURM_PROCID=0 SLURM_NTASKS=x4", 1, "SLURM_NTASKS");
    topo_bad("topo_bad_slurm_procid", "SLURM_PROCID=5 SLURM_NTASKS=4", 1, "SLURM_PROCID=5");
    topo_bad("topo_bad_slurm_no_nodelist", "SLURM_PROCID=2 SLURM_NTASKS=4 SLURM_NNODES=2 SLURM_LAUNCH_NODE_IPADDR=10.1.2.3", 1,
             "set MASTER_ADDR");
    topo_bad("topo_bad_slurm_nodelist", "SLURM_PROCID=2 SLURM_NTASKS=4 SLURM_NNODES=2 SLURM_STEP_NODELIST=gpu[07-", 1,
             "SLURM_STEP_NODELIST: \"gpu[07-\" is not a Slurm host list");
    topo_bad("topo_bad_slurm_rank0_elsewhere",
             "SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_NNODES=2 SLURM_STEP_NODELIST=gpu[07-08] SLURMD_NODENAME=gpu08", 1,
             "rank 0 runs on node gpu08");
    topo_bad("topo_bad_ompi_tp", "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=3", 2, "OMPI_COMM_WORLD_SIZE=3");
    topo_bad("topo_bad_tp_without_launcher", "", 2, "parallel.tp is 2");
    set_env("");
    return topo_failed;
}

/* ---- one rank of a multi-process job ----------------------------------- */

typedef struct {
    bootstrap *bs;
    const char *tag;
    int rank, world, failed;
    comm *comms[4]; /* destroyed on the way out of die_survivor (leak checkers) */
} job;

typedef struct {
    int32_t pass;
    char why[200];
} verdict;

/* Collects every rank's verdict on one check; rank 0 prints the line. */
static void report(job *j, const char *name, int pass, const char *why) {
    verdict v = {pass, ""}, *all = tg_malloc((size_t)j->world * sizeof *all, "verdicts");
    if (!pass) snprintf(v.why, sizeof v.why, "%s", why);
    tg_err e;
    if (bootstrap_allgather(j->bs, &v, sizeof v, all, &e)) tg_die("test_comm", &e);
    int bad = -1;
    for (int r = 0; r < j->world && bad < 0; r++)
        if (!all[r].pass) bad = r;
    if (j->rank == 0) {
        if (bad < 0)
            printf("ok %s_%s\n", j->tag, name);
        else
            printf("not ok %s_%s - rank %d: %.190s\n", j->tag, name, bad, all[bad].why);
        fflush(stdout);
    }
    if (bad >= 0) j->failed = 1;
    free(all);
}

/* Inputs with magnitudes from 2^-8 to 2^7, so that the order of a sum shows. */
static float val(uint32_t seed, int k, size_t i) {
    uint64_t h = (uint64_t)seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)k << 40) ^ (uint64_t)i;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    float m = (float)((h >> 11) & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f;
    return m * (float)(1u << (h & 15)) / 256.0f;
}

static float fold(float r, float x, reduce_op op) {
    if (op == REDUCE_SUM) return r + x;
    return (x > r || x != x) ? x : r;
}

/* The reduction over members 0..p-1, in that order, of element i. */
static float expect_reduce(uint32_t seed, int p, size_t i, reduce_op op) {
    float r = val(seed, 0, i);
    for (int k = 1; k < p; k++) r = fold(r, val(seed, k, i), op);
    return r;
}

static uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

typedef struct {
    comm *c;
    uint64_t expect[COLL_KINDS];
} tracked;

/* Runs every collective on one communicator at size n; returns 0 when all
 * results match, else fills why. */
static int exercise(tracked *t, size_t n, uint32_t seed, char *why, size_t cap) {
    comm *c = t->c;
    int p = c->size, me = c->rank;
    uint64_t pm1 = (uint64_t)(p - 1);
    tg_err e;
    size_t big = n * (size_t)p;
    float *a = tg_malloc((big + 1) * sizeof(float), "test buffer");
    float *b = tg_malloc((big + 1) * sizeof(float), "test buffer");
    int bad = 0;
#define FAIL(...) do { snprintf(why, cap, __VA_ARGS__); bad = 1; goto out; } while (0)
#define CALL(x) do { if (x) FAIL("%.290s", e.msg); } while (0)

    for (int op = REDUCE_SUM; op <= REDUCE_MAX; op++) {
        for (size_t i = 0; i < n; i++) a[i] = val(seed + (uint32_t)op, me, i);
        CALL(comm_all_reduce_t(c, a, n, TG_F32, (reduce_op)op, &e));
        t->expect[COLL_ALL_REDUCE] += p > 1 ? 2 * pm1 * (n / (size_t)p) * 4 : 0;
        for (size_t i = 0; i < n; i++) {
            float x = expect_reduce(seed + (uint32_t)op, p, i, (reduce_op)op);
            if (memcmp(&x, &a[i], sizeof x))
                FAIL("all_reduce(%s) n=%zu: element %zu is %.9g, expected %.9g", op ? "max" : "sum", n, i, a[i], x);
        }
    }
    /* NaN wins a max, wherever it sits */
    if (n > 0) {
        for (size_t i = 0; i < n; i++) a[i] = (float)me;
        if (me == p - 1) a[n - 1] = 0.0f / 0.0f;
        CALL(comm_all_reduce_t(c, a, n, TG_F32, REDUCE_MAX, &e));
        t->expect[COLL_ALL_REDUCE] += p > 1 ? 2 * pm1 * (n / (size_t)p) * 4 : 0;
        if (a[n - 1] == a[n - 1] || (n > 1 && a[0] != (float)(p - 1))) FAIL("all_reduce(max) with a NaN: got %g and %g", a[0], a[n - 1]);
    }
    /* reduce_scatter, out of place and in place (out == in + rank*n) */
    for (int inplace = 0; inplace < 2; inplace++) {
        for (size_t i = 0; i < big; i++) a[i] = val(seed + 7, me, i);
        float *out = inplace ? a + (size_t)me * n : b;
        CALL(comm_reduce_scatter_t(c, out, a, n, TG_F32, &e));
        t->expect[COLL_REDUCE_SCATTER] += p > 1 ? pm1 * n * 4 : 0;
        for (size_t j = 0; j < n; j++) {
            float x = expect_reduce(seed + 7, p, (size_t)me * n + j, REDUCE_SUM);
            if (memcmp(&x, &out[j], sizeof x))
                FAIL("reduce_scatter%s n=%zu: element %zu is %.9g, expected %.9g", inplace ? " (in place)" : "", n, j, out[j], x);
        }
    }
    /* all_gather, out of place and in place (in == out + rank*n) */
    for (int inplace = 0; inplace < 2; inplace++) {
        float *in = inplace ? b + (size_t)me * n : a;
        for (size_t i = 0; i < n; i++) in[i] = val(seed + 9, me, i);
        CALL(comm_all_gather_t(c, b, in, n, TG_F32, &e));
        t->expect[COLL_ALL_GATHER] += p > 1 ? pm1 * n * 4 : 0;
        for (int r = 0; r < p; r++)
            for (size_t i = 0; i < n; i++) {
                float x = val(seed + 9, r, i);
                if (memcmp(&x, &b[(size_t)r * n + i], sizeof x))
                    FAIL("all_gather%s n=%zu: block %d element %zu is %.9g, expected %.9g", inplace ? " (in place)" : "", n, r, i,
                         b[(size_t)r * n + i], x);
            }
    }
    /* bf16: values rounded to bf16, summed in float32 in rank order and
     * rounded once; gathers bitwise; 2 bytes per element counted */
    {
        uint16_t *h = (uint16_t *)a, *o = (uint16_t *)b;
        for (size_t i = 0; i < n; i++) h[i] = tg_f32_to_bf16(val(seed + 11, me, i));
        CALL(comm_all_reduce_t(c, h, n, TG_BF16, REDUCE_SUM, &e));
        t->expect[COLL_ALL_REDUCE] += p > 1 ? 2 * pm1 * (n / (size_t)p) * 2 : 0;
        for (size_t i = 0; i < n; i++) {
            float acc = tg_bf16_to_f32(tg_f32_to_bf16(val(seed + 11, 0, i)));
            for (int k = 1; k < p; k++) acc += tg_bf16_to_f32(tg_f32_to_bf16(val(seed + 11, k, i)));
            if (h[i] != tg_f32_to_bf16(acc)) FAIL("all_reduce(sum, bf16) n=%zu: element %zu is %.6g, expected %.6g", n, i,
                                                  tg_bf16_to_f32(h[i]), tg_bf16_to_f32(tg_f32_to_bf16(acc)));
        }
        for (size_t i = 0; i < big; i++) h[i] = tg_f32_to_bf16(val(seed + 13, me, i));
        CALL(comm_reduce_scatter_t(c, o, h, n, TG_BF16, &e));
        t->expect[COLL_REDUCE_SCATTER] += p > 1 ? pm1 * n * 2 : 0;
        for (size_t j = 0; j < n; j++) {
            size_t i = (size_t)me * n + j;
            float acc = tg_bf16_to_f32(tg_f32_to_bf16(val(seed + 13, 0, i)));
            for (int k = 1; k < p; k++) acc += tg_bf16_to_f32(tg_f32_to_bf16(val(seed + 13, k, i)));
            if (o[j] != tg_f32_to_bf16(acc)) FAIL("reduce_scatter(bf16) n=%zu: element %zu wrong", n, j);
        }
        for (size_t i = 0; i < n; i++) h[i] = tg_f32_to_bf16(val(seed + 15, me, i));
        CALL(comm_all_gather_t(c, o, h, n, TG_BF16, &e));
        t->expect[COLL_ALL_GATHER] += p > 1 ? pm1 * n * 2 : 0;
        for (int r = 0; r < p; r++)
            for (size_t i = 0; i < n; i++)
                if (o[(size_t)r * n + i] != tg_f32_to_bf16(val(seed + 15, r, i)))
                    FAIL("all_gather(bf16) n=%zu: block %d element %zu wrong", n, r, i);
    }
    /* broadcast of an odd number of bytes from the last and the first member */
    for (int root = p - 1;; root = 0) {
        size_t bytes = n * sizeof(float) + (n ? 3 : 0);
        unsigned char *u = (unsigned char *)a;
        for (size_t i = 0; i < bytes; i++) u[i] = (unsigned char)(me == root ? (i * 131 + 7 + (size_t)root) : 0xEE);
        CALL(comm_broadcast(c, u, bytes, root, &e));
        if (me == root && p > 1) t->expect[COLL_BROADCAST] += bytes;
        for (size_t i = 0; i < bytes; i++)
            if (u[i] != (unsigned char)(i * 131 + 7 + (size_t)root)) FAIL("broadcast of %zu bytes from %d: byte %zu wrong", bytes, root, i);
        if (root == 0) break;
    }
    CALL(comm_barrier(c, &e));
out:
    free(a);
    free(b);
    return bad;
#undef FAIL
#undef CALL
}

/* Several collectives started before any wait (waited for in reverse
 * order), also inside a group (comm_group_begin, waited for after its end),
 * against the same collectives through the blocking calls: bitwise equal
 * results and equal bytes counted, per kind. */
#define NB_OPS 5
#define NB_MODES 3 /* blocking, non-blocking, grouped */
static int nonblocking(comm *c, size_t n, uint32_t seed, char *why, size_t cap) {
    static const char *const mode_names[NB_MODES] = {"blocking", "non-blocking", "grouped"};
    int p = c->size, me = c->rank, bad = 0;
    size_t big = n * (size_t)p, bytes = n * sizeof(float) + 3;
    tg_err e;
    float *in[NB_MODES] = {NULL}, *out[NB_MODES][NB_OPS] = {{NULL}};
    uint64_t sent[NB_MODES][COLL_KINDS];
    for (int m = 0; m < NB_MODES; m++) {
        in[m] = tg_malloc(big * sizeof(float), "nb input");
        for (int k = 0; k < NB_OPS; k++) out[m][k] = tg_calloc(big + 1, sizeof(float), "nb buffer");
        for (size_t i = 0; i < n; i++) out[m][0][i] = val(seed, me, i), out[m][1][i] = val(seed + 1, me, i);
        for (size_t i = 0; i < big; i++) in[m][i] = val(seed + 2, me, i);
        uint16_t *g = (uint16_t *)out[m][3]; /* bf16: p*n out, then the n of input */
        for (size_t i = 0; i < n; i++) g[big + i] = tg_f32_to_bf16(val(seed + 3, me, i));
        unsigned char *u = (unsigned char *)out[m][4];
        for (size_t i = 0; i < bytes; i++) u[i] = (unsigned char)(me == p - 1 ? i * 7 + seed : 0xEE);
        uint64_t before[COLL_KINDS];
        memcpy(before, c->bytes_sent, sizeof before);
        if (m == 0) {
            bad = comm_all_reduce_t(c, out[m][0], n, TG_F32, REDUCE_SUM, &e) ||
                  comm_all_reduce_t(c, out[m][1], n, TG_F32, REDUCE_MAX, &e) ||
                  comm_reduce_scatter_t(c, out[m][2], in[m], n, TG_F32, &e) ||
                  comm_all_gather_t(c, g, g + big, n, TG_BF16, &e) || comm_broadcast(c, u, bytes, p - 1, &e);
        }
        comm_req *r[NB_OPS] = {0};
        if (m >= 1) {
            const int grouped = m == 2 && comm_group_begin(c, &e) == 0;
            int k = 0;
            if ((m == 1 || grouped) && (r[k] = comm_all_reduce_start(c, out[m][0], n, TG_F32, REDUCE_SUM, &e))) k++;
            if (k == 1 && (r[k] = comm_all_reduce_start(c, out[m][1], n, TG_F32, REDUCE_MAX, &e))) k++;
            if (k == 2 && (r[k] = comm_reduce_scatter_start(c, out[m][2], in[m], n, TG_F32, &e))) k++;
            if (k == 3 && (r[k] = comm_all_gather_start(c, g, g + big, n, TG_BF16, &e))) k++;
            if (k == 4 && (r[k] = comm_broadcast_start(c, u, bytes, p - 1, &e))) k++;
            bad = k < NB_OPS;
            tg_err later;
            if (grouped && comm_group_end(c, bad ? &later : &e)) bad = 1;
        }
        for (int k = NB_OPS - 1; k >= 0 && m >= 1 && !bad; k--) bad = comm_wait(r[k], &e) != 0;
        if (bad) {
            snprintf(why, cap, "%s n=%zu: %.250s", mode_names[m], n, e.msg);
            break;
        }
        for (int k = 0; k < COLL_KINDS; k++) sent[m][k] = c->bytes_sent[k] - before[k];
    }
    const size_t out_bytes[NB_OPS] = {n * 4, n * 4, n * 4, big * 2, bytes};
    for (int m = 1; m < NB_MODES && !bad; m++)
        for (int k = 0; k < NB_OPS && !bad; k++)
            if (memcmp(out[0][k], out[m][k], out_bytes[k])) {
                snprintf(why, cap, "n=%zu: collective %d of %d (%s) differs from the blocking call", n, k, NB_OPS, mode_names[m]);
                bad = 1;
            }
    if (!bad) bad = comm_modes_sent_differ(NB_MODES, sent, mode_names, n, why, cap);
    for (int m = 0; m < NB_MODES; m++) {
        free(in[m]);
        for (int k = 0; k < NB_OPS; k++) free(out[m][k]);
    }
    return bad;
}

/* The rules of groups (comm.h): a wait, a settle or a barrier inside one
 * is refused, naming the group, and the request stays in flight (waited for
 * after the end, with the right result and its bytes counted once); groups
 * do not nest; an end needs a begin; an empty group is fine. */
static int group_rules(comm *c, char *why, size_t cap) {
    enum { N = 8 };
    float a[N];
    for (size_t i = 0; i < N; i++) a[i] = val(91, c->rank, i);
    const uint64_t sent0 = c->bytes_sent[COLL_ALL_REDUCE], groups0 = c->groups;
    tg_err e = {{0}}, w = {{0}}, b = {{0}}, s = {{0}}, n = {{0}}, x = {{0}};
    comm_req *r = NULL;
    if (comm_group_begin(c, &e) || !(r = comm_all_reduce_start(c, a, N, TG_F32, REDUCE_SUM, &e))) {
        snprintf(why, cap, "begin or start failed: %.200s", e.msg);
        return 1;
    }
    const int refused = comm_wait(r, &w) != 0 && comm_barrier(c, &b) != 0 && comm_settle(c, &s) != 0 && comm_group_begin(c, &n) != 0;
    const int ended = comm_group_end(c, &e) == 0 && comm_wait(r, &e) == 0;
    const int unpaired = comm_group_end(c, &x) != 0 && strstr(x.msg, "without comm_group_begin");
    const int empty = comm_group_begin(c, &e) == 0 && comm_group_end(c, &e) == 0;
    int right = 1;
    for (size_t i = 0; i < N; i++) right &= memcmp(&a[i], &(float){expect_reduce(91, c->size, i, REDUCE_SUM)}, sizeof(float)) == 0;
    const uint64_t want = c->size > 1 ? 2 * (uint64_t)(c->size - 1) * (N / (size_t)c->size) * sizeof(float) : 0;
    if (!refused || !strstr(w.msg, "comm_wait") || !strstr(w.msg, "inside a group") || !strstr(w.msg, c->name) ||
        !strstr(b.msg, "inside a group") || !strstr(s.msg, "inside a group") || !strstr(n.msg, "do not nest"))
        snprintf(why, cap, "refusals: %d; wait: \"%.60s\"; barrier: \"%.40s\"; settle: \"%.40s\"; nested: \"%.40s\"", refused,
                 w.msg, b.msg, s.msg, n.msg);
    else if (!ended || !unpaired || !empty)
        snprintf(why, cap, "end %d, unpaired end refused %d, empty group %d: %.150s", ended, unpaired, empty, ended ? x.msg : e.msg);
    else if (!right || c->bytes_sent[COLL_ALL_REDUCE] - sent0 != want || c->groups - groups0 != 2)
        snprintf(why, cap, "result %s, %llu bytes counted (want %llu), %llu groups (want 2)", right ? "right" : "wrong",
                 (unsigned long long)(c->bytes_sent[COLL_ALL_REDUCE] - sent0), (unsigned long long)want,
                 (unsigned long long)(c->groups - groups0));
    else
        return 0;
    return 1;
}

/* Member 0 breaks c (a broadcast from a root outside the group) while two
 * collectives are in flight; then every member's waits must fail, naming
 * the group. */
static int wait_broken(job *j, comm *c, char *why, size_t cap) {
    float a[16], b[16 * 4];
    for (int i = 0; i < 16; i++) a[i] = (float)i;
    tg_err e = {{0}};
    comm_req *r1 = comm_all_reduce_start(c, a, 16, TG_F32, REDUCE_SUM, &e);
    comm_req *r2 = r1 ? comm_all_gather_start(c, b, a, 16, TG_F32, &e) : NULL;
    if (!r1 || !r2) {
        snprintf(why, cap, "a start failed: %.250s", e.msg);
        return 1;
    }
    int bad = 0;
    if (c->rank == 0 && (comm_broadcast(c, a, 4, c->size, &e) == 0 || !strstr(e.msg, "root"))) {
        snprintf(why, cap, "a broadcast from root %d did not fail: %.200s", c->size, e.msg);
        bad = 1;
    }
    if (bootstrap_barrier(j->bs, &e)) tg_die("test_comm", &e);
    comm_req *reqs[2] = {r2, r1};
    for (int k = 0; k < 2; k++) {
        tg_err w = {{0}};
        int rc = comm_wait(reqs[k], &w);
        if (!bad && (rc == 0 || !strstr(w.msg, "group brk"))) {
            snprintf(why, cap, "wait %d on the broken communicator: rc %d, message \"%.200s\"", k, rc, w.msg);
            bad = 1;
        }
    }
    return bad;
}

static void *killer(void *arg) {
    (void)arg;
    struct timespec ts = {0, 150 * 1000000L};
    nanosleep(&ts, NULL);
    kill(getpid(), SIGKILL);
    return NULL;
}

static void die_survivor(job *j, const tg_err *e) {
    fprintf(stderr, "test_comm: rank %d: error: %s\n", j->rank, e->msg);
    for (int i = 0; i < 4; i++) comm_destroy(j->comms[i]);
    exit(3);
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "topo")) return run_topo();
    if (argc < 4 || strcmp(argv[1], "run")) {
        fprintf(stderr, "usage: test_comm topo | test_comm run TAG TP [--timeout S] [--die R] [--hang R] [--quit R] [--mismatch]\n");
        return 2;
    }
    job j = {0};
    j.tag = argv[2];
    int tp = atoi(argv[3]), die = -1, hang = -1, quit = -1, quit_stage = 0, mismatch = 0;
    double timeout = 30;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout = atof(argv[++i]);
        else if (!strcmp(argv[i], "--die") && i + 1 < argc) die = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hang") && i + 1 < argc) hang = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quit") && i + 1 < argc) quit = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quit-stage") && i + 1 < argc) quit_stage = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mismatch")) mismatch = 1;
        else {
            fprintf(stderr, "test_comm: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    tg_err e = {{0}};
    topology topo;
    if (topology_from_env(&topo, tp, &e)) die_survivor(&j, &e);
    j.rank = topo.rank;
    j.world = topo.world;
    j.bs = bootstrap_create(&topo, timeout, &e);
    if (!j.bs) die_survivor(&j, &e);
    if (quit == j.rank && quit_stage == 0) _exit(0);

    /* the session id is the same everywhere */
    char *sessions = tg_malloc((size_t)j.world * 17, "sessions");
    if (bootstrap_allgather(j.bs, bootstrap_session(j.bs), 17, sessions, &e)) die_survivor(&j, &e);
    int same = 1;
    for (int r = 0; r < j.world; r++) same &= !strcmp(sessions + r * 17, bootstrap_session(j.bs));
    free(sessions);
    if (quit >= 0 && quit_stage == 0) {
        fprintf(stderr, "test_comm: rank %d: rank %d quit but the allgather succeeded\n", j.rank, quit);
        return 0;
    }
    if (quit < 0) report(&j, "session", same && strlen(bootstrap_session(j.bs)) == 16, "session ids differ");

    comm *tpc = comm_shm_create(j.bs, "tp", topo.tp_ranks, topo.tp, topo.tp_rank, timeout, &e);
    if (!tpc) die_survivor(&j, &e);
    j.comms[0] = tpc;
    if (quit == j.rank) _exit(0); /* stage 1: the TP segment is mapped, never destroyed */
    comm *dpc = comm_shm_create(j.bs, "dp", topo.dp_ranks, topo.dp, topo.dp_rank, timeout, &e);
    if (!dpc) die_survivor(&j, &e);
    j.comms[1] = dpc;
    comm *tps = comm_shm_create_slot(j.bs, "tp_small", topo.tp_ranks, topo.tp, topo.tp_rank, timeout, 256, &e);
    if (!tps) die_survivor(&j, &e);
    j.comms[2] = tps;
    comm *dps = comm_shm_create_slot(j.bs, "dp_small", topo.dp_ranks, topo.dp, topo.dp_rank, timeout, 256, &e);
    if (!dps) die_survivor(&j, &e);
    j.comms[3] = dps;
    if (quit >= 0) {
        fprintf(stderr, "test_comm: rank %d: rank %d quit but the communicators were created\n", j.rank, quit);
        return 0;
    }
    report(&j, "create", tpc->size == topo.tp && tpc->rank == topo.tp_rank && dpc->size == topo.dp && dpc->rank == topo.dp_rank,
           "wrong group size or rank");

    if (mismatch) {
        float x[8] = {0}, y[64];
        int rc = j.rank == 1 ? comm_all_gather_t(tpc, y, x, 8, TG_F32, &e) : comm_all_reduce_t(tpc, x, 8, TG_F32, REDUCE_SUM, &e);
        if (rc) die_survivor(&j, &e);
        return 0;
    }
    if (die >= 0 || hang >= 0) {
        /* A long series of all_reduces through a tiny slot (many chunks, many barriers). */
        size_t n = 20000;
        float *buf = tg_calloc(n, sizeof(float), "buffer");
        if (j.rank == die) {
            pthread_t th;
            pthread_create(&th, NULL, killer, NULL);
        }
        for (int it = 0; it < 100000; it++) {
            if (j.rank == hang && it == 3) pause();
            if (comm_all_reduce_t(tps, buf, n, TG_F32, REDUCE_SUM, &e)) die_survivor(&j, &e);
        }
        fprintf(stderr, "test_comm: rank %d: the fault never showed\n", j.rank);
        return 0;
    }

    tracked t[4] = {{tpc, {0}}, {dpc, {0}}, {tps, {0}}, {dps, {0}}};
    const char *names[4] = {"tp", "dp", "tp_small", "dp_small"};
    /* sizes: empty, smaller than the group, not multiples of p nor of the
     * small slot (64 floats), several small slots */
    const size_t sizes[] = {0, 1, 3, 7, 64, 65, 1000, 4099};
    char why[300] = "";
    for (int g = 0; g < 4; g++) {
        int bad = 0;
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes && !bad; s++)
            bad = exercise(&t[g], sizes[s], (uint32_t)(s * 1000 + (size_t)g), why, sizeof why);
        char name[64];
        snprintf(name, sizeof name, "%s_collectives", names[g]);
        report(&j, name, !bad, why);
    }
    /* TP and DP interleaved, both at once */
    {
        int bad = 0;
        for (int it = 0; it < 20 && !bad; it++) bad = exercise(&t[it % 2], 33 + (size_t)it, 77u + (uint32_t)it, why, sizeof why);
        report(&j, "tp_dp_interleaved", !bad, why);
    }
    /* larger than the default slot (4 MiB = 1M floats): 1.5M floats */
    {
        size_t n = 1500001;
        comm *c = tpc->size > 1 ? tpc : dpc;
        float *a = tg_malloc(n * sizeof(float), "big buffer");
        for (size_t i = 0; i < n; i++) a[i] = val(5, c->rank, i);
        int bad = 0;
        if (comm_all_reduce_t(c, a, n, TG_F32, REDUCE_SUM, &e)) {
            snprintf(why, sizeof why, "%.290s", e.msg);
            bad = 1;
        }
        t[c == tpc ? 0 : 1].expect[COLL_ALL_REDUCE] += c->size > 1 ? 2 * (uint64_t)(c->size - 1) * (n / (size_t)c->size) * 4 : 0;
        for (size_t i = 0; i < n && !bad; i++) {
            float x = expect_reduce(5, c->size, i, REDUCE_SUM);
            if (memcmp(&x, &a[i], sizeof x)) {
                snprintf(why, sizeof why, "element %zu is %.9g, expected %.9g", i, a[i], x);
                bad = 1;
            }
        }
        /* every rank of the world holds the same bits for its group */
        uint64_t h = hash_bytes(a, n * sizeof(float)), *hs = tg_malloc((size_t)j.world * sizeof *hs, "hashes");
        if (bootstrap_allgather(j.bs, &h, sizeof h, hs, &e)) die_survivor(&j, &e);
        const int *members = c == tpc ? topo.tp_ranks : topo.dp_ranks;
        for (int k = 0; k < c->size && !bad; k++)
            if (hs[members[k]] != h) {
                snprintf(why, sizeof why, "ranks %d and %d hold different results", j.rank, members[k]);
                bad = 1;
            }
        free(hs);
        free(a);
        report(&j, "all_reduce_larger_than_slot", !bad, why);
    }
    /* bytes_sent: the ring formula, written out again here */
    for (int g = 0; g < 4; g++) {
        int bad = 0;
        for (int k = 0; k < COLL_KINDS && !bad; k++)
            if (t[g].c->bytes_sent[k] != t[g].expect[k]) {
                snprintf(why, sizeof why, "%s %s: %llu bytes counted, formula says %llu", names[g], comm_kind_name((coll_kind)k),
                         (unsigned long long)t[g].c->bytes_sent[k], (unsigned long long)t[g].expect[k]);
                bad = 1;
            }
        char name[64];
        snprintf(name, sizeof name, "%s_bytes_sent", names[g]);
        report(&j, name, !bad, why);
    }
    /* non-blocking: several collectives in flight, against the blocking calls */
    for (int g = 0; g < 4; g++) {
        int bad = 0;
        const size_t nb_sizes[] = {0, 1, 7, 65, 1000};
        for (size_t s = 0; s < sizeof nb_sizes / sizeof *nb_sizes && !bad; s++)
            bad = nonblocking(t[g].c, nb_sizes[s], 300u + (uint32_t)(s * 10 + (size_t)g), why, sizeof why);
        char name[64];
        snprintf(name, sizeof name, "%s_nonblocking", names[g]);
        report(&j, name, !bad, why);
    }
    /* groups: what is refused inside one, nesting, pairing */
    for (int g = 0; g < 2; g++) {
        char name[64];
        snprintf(name, sizeof name, "%s_group_rules", names[g]);
        report(&j, name, !group_rules(t[g].c, why, sizeof why), why);
    }
    for (int g = 0; g < 4; g++) comm_destroy(t[g].c);
    memset(j.comms, 0, sizeof j.comms); /* destroyed: die_survivor must not again */
    /* a wait on a broken communicator (a group of more than one rank) */
    if (j.world > 1) {
        int use_tp = topo.tp > 1;
        comm *brk = comm_shm_create(j.bs, "brk", use_tp ? topo.tp_ranks : topo.dp_ranks, use_tp ? topo.tp : topo.dp,
                                    use_tp ? topo.tp_rank : topo.dp_rank, timeout, &e);
        if (!brk) die_survivor(&j, &e);
        report(&j, "wait_on_broken", !wait_broken(&j, brk, why, sizeof why), why);
        comm_destroy(brk);
    }
    if (bootstrap_barrier(j.bs, &e)) die_survivor(&j, &e);
    bootstrap_destroy(j.bs);
    topology_free(&topo);
    return j.failed;
}

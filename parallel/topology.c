#include "parallel/topology.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MASTER_PORT 29500

/* A non-negative decimal integer, nothing else (no sign, no spaces). */
static int parse_uint(const char *var, const char *s, int *out, tg_err *e) {
    if (!s[0]) return tg_fail(e, "environment variable %s is empty (expected a non-negative integer)", var);
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9') return tg_fail(e, "environment variable %s=\"%s\" is not a non-negative integer", var, s);
    errno = 0;
    long v = strtol(s, NULL, 10);
    if (errno || v > INT_MAX) return tg_fail(e, "environment variable %s=\"%s\" is out of range", var, s);
    *out = (int)v;
    return 0;
}

/* Reads variable `var` into *out; *found says whether it was set. */
static int env_int(const char *var, int *out, int *found, tg_err *e) {
    const char *s = getenv(var);
    *found = s != NULL;
    return s ? parse_uint(var, s, out, e) : 0;
}

static int env_int_required(const char *var, const char *because, int *out, tg_err *e) {
    int found;
    if (env_int(var, out, &found, e)) return -1;
    if (!found) return tg_fail(e, "environment variable %s is not set (required since %s is set)", var, because);
    return 0;
}

static int check_positive(const char *var, int v, tg_err *e) {
    return v < 1 ? tg_fail(e, "environment variable %s=%d must be at least 1", var, v) : 0;
}

static void set_master(topology *t, const char *addr, int port) {
    const int v6 = strchr(addr, ':') != NULL;
    snprintf(t->master_addr, sizeof t->master_addr, "%s", addr);
    t->master_port = port;
    snprintf(t->master_at, sizeof t->master_at, "%s%s%s:%d", v6 ? "[" : "", addr, v6 ? "]" : "", port);
}

int topology_init(topology *t, int rank, int world, int local_rank, int local_world, int tp, tg_err *e) {
    memset(t, 0, sizeof *t);
    if (world < 1) return tg_fail(e, "world size %d must be at least 1", world);
    if (rank < 0 || rank >= world) return tg_fail(e, "rank %d is not below the world size %d", rank, world);
    if (local_world < 1 || local_world > world)
        return tg_fail(e, "local world size %d must be between 1 and the world size %d", local_world, world);
    if (local_rank < 0 || local_rank >= local_world)
        return tg_fail(e, "local rank %d is not below the local world size %d", local_rank, local_world);
    if (tp < 1) return tg_fail(e, "parallel.tp (%d) must be at least 1", tp);
    if (world % tp != 0)
        return tg_fail(e, "world size %d is not divisible by parallel.tp (%d): %d = %d x %d + %d", world, tp, world, tp,
                       world / tp, world % tp);
    t->rank = rank;
    t->world = world;
    t->local_rank = local_rank;
    t->local_world = local_world;
    t->tp = tp;
    t->dp = world / tp;
    t->tp_rank = rank % tp;
    t->dp_rank = rank / tp;
    t->tp_ranks = tg_malloc((size_t)t->tp * sizeof(int), "TP group ranks");
    t->dp_ranks = tg_malloc((size_t)t->dp * sizeof(int), "DP group ranks");
    for (int i = 0; i < t->tp; i++) t->tp_ranks[i] = t->dp_rank * tp + i;
    for (int i = 0; i < t->dp; i++) t->dp_ranks[i] = i * tp + t->tp_rank;
    set_master(t, "127.0.0.1", DEFAULT_MASTER_PORT);
    t->source = "explicit";
    return 0;
}

void topology_free(topology *t) {
    if (!t) return;
    free(t->tp_ranks);
    free(t->dp_ranks);
    t->tp_ranks = t->dp_ranks = NULL;
}

/* "4" or "4(x3)" (Slurm's compressed list with one entry): 4 tasks on every node. */
static int slurm_uniform_tasks(const char *s, int *out) {
    if (*s < '0' || *s > '9') return 0; /* strtol would take spaces and a sign */
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || v < 1 || v > INT_MAX) return 0;
    if (end[0] == '(' && end[1] == 'x') { /* "(xN)" and nothing after it */
        const char *n = end + 2;
        while (*n >= '0' && *n <= '9') n++;
        if (n == end + 2 || strcmp(n, ")") != 0) return 0;
    } else if (*end != '\0')
        return 0;
    *out = (int)v;
    return 1;
}

static int slurm_local_world(int world, int *out, tg_err *e) {
    int found;
    if (env_int("SLURM_NTASKS_PER_NODE", out, &found, e)) return -1;
    if (found) return check_positive("SLURM_NTASKS_PER_NODE", *out, e);
    const char *tpn = getenv("SLURM_TASKS_PER_NODE");
    if (tpn && slurm_uniform_tasks(tpn, out)) return 0;
    int nodes;
    if (env_int("SLURM_NNODES", &nodes, &found, e)) return -1;
    if (found && nodes >= 1 && world % nodes == 0) {
        *out = world / nodes;
        return 0;
    }
    if (!found && !tpn) { /* nothing says otherwise: one node */
        *out = world;
        return 0;
    }
    return tg_fail(e, "cannot tell the tasks per node from SLURM_TASKS_PER_NODE=\"%s\" (uneven); set SLURM_NTASKS_PER_NODE "
                   "(srun --ntasks-per-node)", tpn ? tpn : "");
}

/* MASTER_ADDR / MASTER_PORT, with fallbacks: `addr_fallback` / `port_fallback`
 * (or 0) come from the launcher, else a single-node default. */
static int read_master(topology *t, const char *addr_fallback, int port_fallback, tg_err *e) {
    const char *addr = getenv("MASTER_ADDR");
    if (addr && !addr[0]) return tg_fail(e, "environment variable MASTER_ADDR is empty");
    if (!addr) addr = addr_fallback;
    if (!addr) {
        if (t->world > 1 && t->local_world < t->world)
            return tg_fail(e, "environment variable MASTER_ADDR is not set (needed to find rank 0 in a %d-node job)",
                           t->world / t->local_world);
        addr = "127.0.0.1";
    }
    if (strlen(addr) >= sizeof t->master_addr) return tg_fail(e, "environment variable MASTER_ADDR is too long");
    int port, found;
    if (env_int("MASTER_PORT", &port, &found, e)) return -1;
    if (!found) port = port_fallback ? port_fallback : DEFAULT_MASTER_PORT;
    if (port < 1 || port > 65535) return tg_fail(e, "environment variable MASTER_PORT=%d is not a TCP port (1-65535)", port);
    set_master(t, addr, port);
    return 0;
}

static int from_generic(topology *t, int tp, tg_err *e) {
    int rank, world, lrank, lworld, found_r, found_w, found_lr, found_lw;
    if (env_int("RANK", &rank, &found_r, e) || env_int("WORLD_SIZE", &world, &found_w, e)) return -1;
    if (!found_w) return tg_fail(e, "environment variable WORLD_SIZE is not set (required since RANK is set)");
    if (!found_r) return tg_fail(e, "environment variable RANK is not set (required since WORLD_SIZE is set)");
    if (check_positive("WORLD_SIZE", world, e)) return -1;
    if (rank >= world) return tg_fail(e, "environment variable RANK=%d is not below WORLD_SIZE=%d", rank, world);
    if (env_int("LOCAL_RANK", &lrank, &found_lr, e) || env_int("LOCAL_WORLD_SIZE", &lworld, &found_lw, e)) return -1;
    if (!found_lw) lworld = world;
    if (!found_lr) lrank = found_lw ? rank % lworld : rank;
    if (check_positive("LOCAL_WORLD_SIZE", lworld, e)) return -1;
    if (lworld > world) return tg_fail(e, "environment variable LOCAL_WORLD_SIZE=%d exceeds WORLD_SIZE=%d", lworld, world);
    if (lrank >= lworld) return tg_fail(e, "environment variable LOCAL_RANK=%d is not below LOCAL_WORLD_SIZE=%d", lrank, lworld);
    if (world % tp != 0)
        return tg_fail(e, "environment variable WORLD_SIZE=%d is not divisible by parallel.tp (%d)", world, tp);
    if (topology_init(t, rank, world, lrank, lworld, tp, e)) return -1;
    t->source = "env";
    return read_master(t, NULL, 0, e);
}

/* Characters of a host name as Slurm lists it (RFC 1123 letters, digits,
 * '-', '.', and '_' that some sites use). */
static int host_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

/* Copies a bracket's first number ("07" of "[07-08,10]") to out[*len..] and
 * returns the position just after the closing bracket, or NULL when the
 * bracket is malformed. */
static const char *first_in_bracket(const char *p, char *out, size_t cap, size_t *len) {
    const char *start = ++p; /* past '[' */
    while (*p >= '0' && *p <= '9') p++;
    if (p == start || (*p != '-' && *p != ',' && *p != ']')) return NULL;
    size_t n = (size_t)(p - start);
    if (*len + n >= cap) return NULL;
    memcpy(out + *len, start, n);
    *len += n;
    for (; *p != ']'; p++)
        if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == ',')) return NULL;
    return p + 1;
}

int topology_slurm_first_host(const char *list, char *out, size_t cap, tg_err *e) {
    size_t len = 0;
    const char *p = list;
    while (*p && *p != ',') {
        if (*p == '[') {
            p = first_in_bracket(p, out, cap, &len);
            if (!p) break;
        } else if (host_char(*p) && len + 1 < cap) {
            out[len++] = *p++;
        } else
            break;
    }
    if (!p || (*p && *p != ',') || len == 0) {
        if (cap) out[0] = '\0';
        return tg_fail(e, "\"%s\" is not a Slurm host list such as node[01-04,07]", list);
    }
    out[len] = '\0';
    return 0;
}

/* Rank 0's host in a job of several nodes, when MASTER_ADDR is not set: the
 * first node of the step (Slurm puts task 0 there under its block and cyclic
 * distributions). Not SLURM_LAUNCH_NODE_IPADDR: under an interactive srun
 * that is the login node, where no rank runs. */
static int slurm_master_host(const topology *t, char *host, size_t cap, tg_err *e) {
    static const char *const lists[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
    const char *var = NULL, *list = NULL;
    for (size_t i = 0; i < sizeof lists / sizeof *lists && !list; i++) {
        const char *v = getenv(lists[i]);
        if (v && v[0]) {
            var = lists[i];
            list = v;
        }
    }
    if (!list)
        return tg_fail(e, "environment variable MASTER_ADDR is not set, nor SLURM_STEP_NODELIST to find rank 0's node in this "
                       "%d-node Slurm job: set MASTER_ADDR to rank 0's host", t->world / t->local_world);
    if (topology_slurm_first_host(list, host, cap, e)) return tg_wrap(e, "environment variable %s", var);
    const char *me = getenv("SLURMD_NODENAME");
    if (t->rank == 0 && me && me[0] && strcmp(me, host) != 0)
        return tg_fail(e, "rank 0 runs on node %s (SLURMD_NODENAME), not on %s, the first node of %s, where its peers look "
                       "for it: set MASTER_ADDR to rank 0's host, or use srun's block or cyclic distribution", me, host, var);
    return 0;
}

static int from_slurm(topology *t, int tp, tg_err *e) {
    int rank, world, lrank, lworld, found;
    const char *wvar = getenv("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
    if (env_int("SLURM_PROCID", &rank, &found, e) || env_int_required(wvar, "SLURM_PROCID", &world, e)) return -1;
    if (check_positive(wvar, world, e)) return -1;
    if (rank >= world) return tg_fail(e, "environment variable SLURM_PROCID=%d is not below %s=%d", rank, wvar, world);
    if (slurm_local_world(world, &lworld, e)) return -1;
    if (lworld > world) return tg_fail(e, "environment variable SLURM_NTASKS_PER_NODE=%d exceeds %s=%d", lworld, wvar, world);
    if (env_int("SLURM_LOCALID", &lrank, &found, e)) return -1;
    if (!found) lrank = rank % lworld;
    if (lrank >= lworld) return tg_fail(e, "environment variable SLURM_LOCALID=%d is not below the %d tasks per node", lrank, lworld);
    if (world % tp != 0) return tg_fail(e, "environment variable %s=%d is not divisible by parallel.tp (%d)", wvar, world, tp);
    if (topology_init(t, rank, world, lrank, lworld, tp, e)) return -1;
    t->source = "slurm";
    int job = 0, port = 0;
    if (env_int("SLURM_JOB_ID", &job, &found, e)) return -1;
    /* a port per job, below Linux's ephemeral range (32768-60999): an
     * outgoing connection's port, or one it left in TIME_WAIT, would keep
     * rank 0 from listening */
    if (found) port = 20000 + job % 12768;
    char host[TOPO_ADDR_MAX] = "";
    const int multi_node = t->local_world < t->world;
    if (multi_node && !getenv("MASTER_ADDR") && slurm_master_host(t, host, sizeof host, e)) return -1;
    return read_master(t, host[0] ? host : NULL, port, e);
}

static int from_openmpi(topology *t, int tp, tg_err *e) {
    int rank, world, lrank, lworld, found;
    const char *why = "OMPI_COMM_WORLD_RANK";
    if (env_int("OMPI_COMM_WORLD_RANK", &rank, &found, e) || env_int_required("OMPI_COMM_WORLD_SIZE", why, &world, e)) return -1;
    if (check_positive("OMPI_COMM_WORLD_SIZE", world, e)) return -1;
    if (rank >= world)
        return tg_fail(e, "environment variable OMPI_COMM_WORLD_RANK=%d is not below OMPI_COMM_WORLD_SIZE=%d", rank, world);
    if (env_int("OMPI_COMM_WORLD_LOCAL_SIZE", &lworld, &found, e)) return -1;
    if (!found) lworld = world;
    if (check_positive("OMPI_COMM_WORLD_LOCAL_SIZE", lworld, e)) return -1;
    if (lworld > world)
        return tg_fail(e, "environment variable OMPI_COMM_WORLD_LOCAL_SIZE=%d exceeds OMPI_COMM_WORLD_SIZE=%d", lworld, world);
    if (env_int("OMPI_COMM_WORLD_LOCAL_RANK", &lrank, &found, e)) return -1;
    if (!found) lrank = rank % lworld;
    if (lrank >= lworld)
        return tg_fail(e, "environment variable OMPI_COMM_WORLD_LOCAL_RANK=%d is not below OMPI_COMM_WORLD_LOCAL_SIZE=%d", lrank,
                       lworld);
    if (world % tp != 0)
        return tg_fail(e, "environment variable OMPI_COMM_WORLD_SIZE=%d is not divisible by parallel.tp (%d)", world, tp);
    if (topology_init(t, rank, world, lrank, lworld, tp, e)) return -1;
    t->source = "openmpi";
    return read_master(t, NULL, 0, e);
}

int topology_from_env(topology *t, int tp, tg_err *e) {
    memset(t, 0, sizeof *t);
    if (tp < 1) return tg_fail(e, "parallel.tp (%d) must be at least 1", tp);
    int rc;
    if (getenv("RANK") || getenv("WORLD_SIZE"))
        rc = from_generic(t, tp, e);
    else if (getenv("SLURM_PROCID"))
        rc = from_slurm(t, tp, e);
    else if (getenv("OMPI_COMM_WORLD_RANK"))
        rc = from_openmpi(t, tp, e);
    else {
        if (tp != 1)
            return tg_fail(e, "parallel.tp is %d but no launcher variables (RANK/WORLD_SIZE, SLURM_PROCID, OMPI_COMM_WORLD_RANK) "
                           "are set, so this is a single rank; start %d ranks with scripts/launch.sh", tp, tp);
        rc = topology_init(t, 0, 1, 0, 1, 1, e);
        t->source = "single";
    }
    if (rc) topology_free(t);
    return rc;
}

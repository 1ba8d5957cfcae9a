/* Where this rank sits: its global rank and world size (read from the
 * launcher's environment), its coordinates in the tensor-parallel x
 * data-parallel grid, the global ranks of its two groups, and the address of
 * the rendezvous server (rank 0).
 *
 * Layout, as Megatron: tp_rank = rank % tp, dp_rank = rank / tp. A TP group is
 * tp consecutive global ranks, so with ranks numbered node by node it stays
 * inside one node; a DP group is every tp-th rank. */
#ifndef PARALLEL_TOPOLOGY_H
#define PARALLEL_TOPOLOGY_H

#include "util/err.h"

#define TOPO_ADDR_MAX 256

typedef struct topology {
    int rank, world;             /* global */
    int local_rank, local_world; /* on this node */
    int tp, dp;                  /* degrees: world = tp * dp */
    int tp_rank, dp_rank;        /* coordinates; also the index in tp_ranks / dp_ranks */
    int *tp_ranks;               /* tp entries: global ranks of this rank's TP group, in order */
    int *dp_ranks;               /* dp entries: global ranks of this rank's DP group, in order */
    char master_addr[TOPO_ADDR_MAX];
    int master_port;
    char master_at[TOPO_ADDR_MAX + 16]; /* "HOST:PORT" for messages, an IPv6 address in brackets */
    const char *source; /* where the values came from: "env", "slurm", "openmpi" or "single" */
} topology;

/* Fills t for tensor-parallel degree tp from the first launcher convention
 * found in the environment:
 *   env:     RANK, WORLD_SIZE, [LOCAL_RANK, LOCAL_WORLD_SIZE], MASTER_ADDR, MASTER_PORT
 *            (torchrun / scripts/launch.sh);
 *   slurm:   SLURM_PROCID, SLURM_STEP_NUM_TASKS or SLURM_NTASKS, SLURM_LOCALID,
 *            SLURM_NTASKS_PER_NODE (else derived from SLURM_TASKS_PER_NODE or
 *            SLURM_NTASKS / SLURM_NNODES); master from MASTER_ADDR/MASTER_PORT,
 *            else, on several nodes, the first host of SLURM_STEP_NODELIST (then
 *            SLURM_JOB_NODELIST, SLURM_NODELIST), and 20000 + SLURM_JOB_ID % 12768.
 *            Rank 0 refuses to start when its SLURMD_NODENAME is another node.
 *            (Not SLURM_LAUNCH_NODE_IPADDR: under an interactive srun that is
 *            the login node.);
 *   openmpi: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,
 *            OMPI_COMM_WORLD_LOCAL_SIZE, MASTER_ADDR, MASTER_PORT;
 *   single:  none of them set: world 1, rank 0.
 * Without MASTER_ADDR a single-node job (local world = world) uses 127.0.0.1;
 * without MASTER_PORT the port is 29500 (as torchrun). Bad values (not a
 * number, rank >= world, world not divisible by tp) fail with a message
 * naming the variable. On success the caller owns t and frees it with
 * topology_free. */
int topology_from_env(topology *t, int tp, tg_err *e);

/* The first host of a Slurm host list, without scontrol: "node[07-08,10],gpu1"
 * gives "node07" (the first entry, each bracket replaced by its first
 * number, leading zeros kept). Fails on a list that is not of that form. */
int topology_slurm_first_host(const char *list, char *out, size_t cap, tg_err *e);

/* The same from explicit values (tests, tools). */
int topology_init(topology *t, int rank, int world, int local_rank, int local_world, int tp, tg_err *e);

void topology_free(topology *t);

#endif

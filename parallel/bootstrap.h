/* Rendezvous over TCP: rank 0 listens on MASTER_ADDR:MASTER_PORT (all
 * interfaces on MASTER_PORT when the job spans several nodes), every
 * other rank connects (retrying while rank 0 is not up yet) and announces its
 * rank; rank 0 keeps one socket per peer (a star). Small collectives over
 * this star (allgather, barrier) set up the real communicators: shm segment
 * names now, NCCL ids later.
 *
 * Every wait ends by the deadline given at creation (timeout_s, the config
 * key parallel.timeout_s); a peer that disconnects is reported by rank
 * number. When rank 0 fails a collective it tells the remaining peers why
 * before closing, so every rank prints the same cause. After a failure the
 * bootstrap is broken and every later call fails. */
#ifndef PARALLEL_BOOTSTRAP_H
#define PARALLEL_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "parallel/topology.h"
#include "util/err.h"

typedef struct bootstrap bootstrap;

/* Collective over the world: connects every rank, agrees a session id
 * (random, chosen by rank 0) and learns which ranks share a node. At world 1
 * there is no socket at all. */
bootstrap *bootstrap_create(const topology *t, double timeout_s, tg_err *e);

/* Every rank contributes `bytes` (the same count everywhere) from `mine`;
 * `all` (world * bytes) receives every contribution in rank order. */
int bootstrap_allgather(bootstrap *bs, const void *mine, size_t bytes, void *all, tg_err *e);
int bootstrap_barrier(bootstrap *bs, tg_err *e);
/* A barrier that waits up to timeout_s (the config key `key`, named when it
 * gives up) rather than parallel.timeout_s, for a wait whose length is
 * known to differ: the other ranks' while rank 0 writes a checkpoint. Rank 0
 * is the one they wait for, so they wait no grace beyond timeout_s for its
 * report of a missing rank. A peer that exits still ends it at once. */
int bootstrap_barrier_within(bootstrap *bs, double timeout_s, const char *key, tg_err *e);

int bootstrap_rank(const bootstrap *bs);
int bootstrap_world(const bootstrap *bs);
double bootstrap_timeout(const bootstrap *bs);
/* 16 hex digits, the same on every rank of this job, different for any
 * other job (used in shm segment names). */
const char *bootstrap_session(const bootstrap *bs);
/* Whether global ranks a and b run on the same machine (same host name and
 * boot id). */
int bootstrap_same_node(const bootstrap *bs, int a, int b);

void bootstrap_destroy(bootstrap *bs);

#endif

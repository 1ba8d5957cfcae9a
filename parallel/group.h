/* The group handshake every communicator runs at creation, over the TCP
 * bootstrap (collective over the whole world: every rank creates the same
 * communicators in the same order, each passing its own group).
 *
 * group_handshake: every rank sends one record (the communicator's name, its
 * group as it sees it, whether its own argument checks failed and, from the
 * first member of each group that asks for one, an opaque blob such as an
 * NCCL id); each rank checks its group against its members' records (ranks
 * whose own checks failed are not judged: they report their own reason);
 * then group_agree. group_agree: one exchange of every rank's status, so
 * that a failure anywhere fails everywhere with the same message (the
 * lowest failing rank's). */
#ifndef PARALLEL_GROUP_H
#define PARALLEL_GROUP_H

#include <stddef.h>

#include "parallel/bootstrap.h"
#include "util/err.h"

#define GROUP_NAME_MAX 31
#define GROUP_BLOB_MAX 128

typedef struct {
    const char *name;  /* "tp", "dp"; checked: 1-GROUP_NAME_MAX characters */
    const int *ranks;  /* global ranks in group order */
    int size, index;   /* this rank is ranks[index] */
    double timeout_s;
    int one_node;      /* every member must run on this rank's node (shm) */
    const char *blob_name; /* not NULL: the first member sends a blob of that name ("NCCL id") */
} group_spec;

/* The argument checks every communicator makes before the handshake: the
 * name, this rank's membership, the timeout. 0, or -1 with the reason. */
int group_check_args(bootstrap *bs, const group_spec *g, tg_err *e);

/* The handshake. `failed`/`mine`: this rank's own checks so far (mine also
 * receives a check failure found here). blob: in, what this rank sends when
 * it is the first member (blob_bytes <= GROUP_BLOB_MAX); out, what the first
 * member sent. Returns 0 when every rank of the world agrees, else as
 * group_agree (e holds the message). */
int group_handshake(bootstrap *bs, const group_spec *g, int failed, tg_err *mine, void *blob, size_t blob_bytes, tg_err *e);

/* 0 when no rank failed; -2 when one reported a failure, -1 when the
 * exchange itself failed. */
int group_agree(bootstrap *bs, int failed, const tg_err *mine, const char *name, tg_err *e);

#endif

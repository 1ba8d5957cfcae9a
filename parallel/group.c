/* The group handshake shared by comm_shm and comm_nccl (group.h). */
#include "parallel/group.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG_LEN 300

typedef struct {
    char name[GROUP_NAME_MAX + 1];
    int32_t size, index, has_blob;
    int32_t failed; /* this rank's own checks failed: it reports why, the others do not judge its record */
    uint64_t group_hash;
    unsigned char blob[GROUP_BLOB_MAX];
} member_rec;

typedef struct {
    int32_t failed;
    char msg[MSG_LEN];
} status_rec;

int group_agree(bootstrap *bs, int failed, const tg_err *mine, const char *name, tg_err *e) {
    int world = bootstrap_world(bs), me = bootstrap_rank(bs);
    status_rec st;
    memset(&st, 0, sizeof st);
    st.failed = failed;
    if (failed) snprintf(st.msg, sizeof st.msg, "%.299s", mine->msg);
    status_rec *all = tg_malloc((size_t)world * sizeof *all, "communicator status table");
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

int group_check_args(bootstrap *bs, const group_spec *g, tg_err *e) {
    int me = bootstrap_rank(bs);
    if (!g->name || !g->name[0] || strlen(g->name) > GROUP_NAME_MAX)
        return tg_fail(e, "communicator name \"%s\" must be 1-%d characters", g->name ? g->name : "", GROUP_NAME_MAX);
    if (g->size < 1 || !g->ranks || g->index < 0 || g->index >= g->size || g->ranks[g->index] != me)
        return tg_fail(e, "group %s: rank %d is not member %d of the group it passed (size %d)", g->name, me, g->index, g->size);
    if (!(g->timeout_s > 0)) return tg_fail(e, "group %s: parallel.timeout_s must be positive (got %g)", g->name, g->timeout_s);
    return 0;
}

/* Checks the group this rank passed against what every member passed (and
 * that its first member sent a blob when one is due). */
static int check_group(bootstrap *bs, const group_spec *g, const member_rec *all, tg_err *e) {
    int world = bootstrap_world(bs), me = bootstrap_rank(bs);
    const char *name = g->name;
    for (int r = 0; r < world; r++)
        if (!all[r].failed && strncmp(all[r].name, name, sizeof all[r].name) != 0)
            return tg_fail(e, "rank %d creates communicator \"%s\" while rank %d creates \"%s\": every rank must create the "
                           "same communicators in the same order", me, name, r, all[r].name);
    uint64_t h = hash_ranks(g->ranks, g->size);
    for (int i = 0; i < g->size; i++) {
        int r = g->ranks[i];
        if (r < 0 || r >= world) return tg_fail(e, "group %s of rank %d lists rank %d, outside the world of %d", name, me, r, world);
        for (int j = 0; j < i; j++)
            if (g->ranks[j] == r) return tg_fail(e, "group %s of rank %d lists rank %d twice", name, me, r);
        if (!all[r].failed && (all[r].size != g->size || all[r].index != i || all[r].group_hash != h))
            return tg_fail(e, "group %s: rank %d and rank %d disagree on its members (rank %d says index %d of %d)", name, me, r, r,
                           all[r].index, all[r].size);
        if (g->one_node && !bootstrap_same_node(bs, me, r))
            return tg_fail(e, "group %s: ranks %d and %d are on different nodes; the shm communicator serves the ranks of one "
                           "node, so a job across nodes needs NCCL (the CUDA build, parallel.comm auto or nccl)", name, me, r);
    }
    const member_rec *first = &all[g->ranks[0]];
    if (g->blob_name && !first->failed && !first->has_blob)
        return tg_fail(e, "group %s: its first member, rank %d, sent no %s", name, g->ranks[0], g->blob_name);
    return 0;
}

int group_handshake(bootstrap *bs, const group_spec *g, int failed, tg_err *mine, void *blob, size_t blob_bytes, tg_err *e) {
    const char *nm = g->name ? g->name : "?";
    int world = bootstrap_world(bs);
    member_rec rec;
    memset(&rec, 0, sizeof rec);
    snprintf(rec.name, sizeof rec.name, "%s", g->name ? g->name : "");
    rec.size = g->size;
    rec.index = g->index;
    rec.failed = failed != 0;
    if (!failed) rec.group_hash = hash_ranks(g->ranks, g->size);
    if (!failed && g->blob_name && g->index == 0 && blob_bytes <= GROUP_BLOB_MAX) {
        memcpy(rec.blob, blob, blob_bytes);
        rec.has_blob = 1;
    }
    member_rec *all = tg_malloc((size_t)world * sizeof *all, "communicator member table");
    if (bootstrap_allgather(bs, &rec, sizeof rec, all, e)) {
        free(all);
        return tg_wrap(e, "creating communicator %s", nm);
    }
    for (int r = 0; r < world; r++) all[r].name[GROUP_NAME_MAX] = '\0';
    if (!failed) failed = check_group(bs, g, all, mine) != 0;
    if (!failed && g->blob_name && blob_bytes <= GROUP_BLOB_MAX) memcpy(blob, all[g->ranks[0]].blob, blob_bytes);
    free(all);
    return group_agree(bs, failed, mine, nm, e);
}

/* comm_nccl: groups (comm.h, "Groups"): the collectives started between
 * comm_group_begin and comm_group_end go into one NCCL group call
 * (ncclGroupStart ... ncclGroupEnd), which NCCL launches as one fused kernel.
 *
 * Ordering. Inside an NCCL group a collective call only queues the work:
 * NCCL enqueues the group's kernel on the comm stream at ncclGroupEnd. So
 *   - each start still records its `ready` on the compute stream and makes
 *     the comm stream wait for it, as outside a group: these waits are
 *     enqueued at once, before the group's kernel, which thus runs after the
 *     compute work queued before every start of the group;
 *   - a request's `done` must be recorded after ncclGroupEnd: recorded in
 *     its start it would complete before the kernel ran. The starts hand
 *     their requests to the group (nccl_group_add), and the end records
 *     every one's `done`, then `tail`, once NCCL has enqueued the kernel (a
 *     nonblocking communicator may still be enqueueing when ncclGroupEnd
 *     returns ncclInProgress; NCCL's rule is to wait for its state to leave
 *     ncclInProgress before using the stream).
 * The emulation (tests/emu/emu_nccl.cpp) runs a group's collectives at its
 * end and reports an event recorded on a stream of the group before it.
 *
 * Size. NCCL 2.9 to 2.11 documented at most 2048 operations between
 * ncclGroupStart and ncclGroupEnd (past it, the call fails); later versions
 * document no limit. A group of more collectives is launched as several NCCL
 * groups of at most NCCL_GROUP_MAX_OPS, cut at the same collectives on
 * every member (they start the same collectives in the same order). GPT-2
 * 124M's largest group, ZeRO's all-gather of every region, has 148.
 *
 * Failure. A failing or timed-out ncclGroupEnd aborts the communicator, as
 * every NCCL failure does, naming the group's first and last collectives;
 * their waits then fail (broken communicator). An abort while an NCCL group
 * is open first closes it (nccl_group_drop): NCCL would otherwise hold the
 * abort until the group's end. */
#include <stdio.h>

#include "parallel/comm_nccl_impl.h"

#define NCCL_GROUP_MAX_OPS 2048

void nccl_group_drop(nccl_impl *s) {
    if (s->group_open) (void)ncclGroupEnd(); /* launches what it holds; the abort that follows ends it */
    s->group_open = 0;
    s->group_ops = 0;
    s->group_first = s->group_last = NULL;
}

int nccl_refuse_in_group(comm *c, const char *what, const char *why, tg_err *e) {
    if (!c->in_group) return 0;
    tg_fail(e, "group %s: %s inside a group (comm_group_begin): %s; the communicator is aborted", c->name, what, why);
    return nccl_give_up(c);
}

static int open_group(comm *c, tg_err *e) {
    nccl_impl *s = c->impl;
    const ncclResult_t res = ncclGroupStart();
    if (res != ncclSuccess) return nccl_fail_nccl(c, "a group of collectives", "ncclGroupStart", res, e);
    s->group_open = 1;
    return 0;
}

int nccl_group_begin(comm *c, tg_err *e) {
    const nccl_impl *s = c->impl;
    if (s->broken)
        return tg_fail(e, "group %s: comm_group_begin: the communicator is broken by an earlier failure", c->name);
    return open_group(c, e);
}

/* What the open group holds, for messages. */
static void describe(const nccl_impl *s, char *out, size_t cap) {
    if (!s->group_first)
        snprintf(out, cap, "an empty group of collectives");
    else if (s->group_first == s->group_last)
        snprintf(out, cap, "a group of 1 collective (%s)", s->group_first->what);
    else
        snprintf(out, cap, "a group of %d collectives (%s ... %s)", s->group_ops, s->group_first->what, s->group_last->what);
}

/* Ends the open NCCL group and, once NCCL has enqueued its kernel, records
 * each request's `done` and then `tail` on the comm stream. */
static int launch(comm *c, tg_err *e) {
    nccl_impl *s = c->impl;
    char what[256];
    describe(s, what, sizeof what);
    s->group_open = 0;
    ncclResult_t res = ncclGroupEnd();
    if (res == ncclInProgress) res = nccl_settle(s->nc, comm_clock() + s->timeout_s);
    if (res == ncclInProgress) return nccl_fail_timeout(c, what, "NCCL to launch the group (ncclGroupEnd)", e);
    if (res != ncclSuccess) return nccl_fail_nccl(c, what, "ncclGroupEnd", res, e);
    for (comm_req *r = s->group_first; r; r = ((nccl_req *)r->impl)->group_next) {
        nccl_req *q = r->impl;
        const cudaError_t err = cudaEventRecord(q->done, s->stream);
        if (err != cudaSuccess) return nccl_fail_cuda(c, r->what, "cudaEventRecord(done, comm stream) after ncclGroupEnd", err, e);
        q->enqueued = 1;
    }
    const int any = s->group_first != NULL;
    s->group_ops = 0;
    s->group_first = s->group_last = NULL;
    if (any && nccl_time_end(c, what, e)) return -1;
    const cudaError_t err = any ? cudaEventRecord(s->tail, s->stream) : cudaSuccess;
    if (err != cudaSuccess) return nccl_fail_cuda(c, what, "cudaEventRecord(tail, comm stream) after ncclGroupEnd", err, e);
    return 0;
}

int nccl_group_add(comm *c, comm_req *r, tg_err *e) {
    nccl_impl *s = c->impl;
    nccl_req *q = r->impl;
    q->group_next = NULL;
    if (s->group_last)
        ((nccl_req *)s->group_last->impl)->group_next = r;
    else
        s->group_first = r;
    s->group_last = r;
    if (++s->group_ops < NCCL_GROUP_MAX_OPS) return 0;
    return launch(c, e) || open_group(c, e) ? -1 : 0; /* full: launched, and the group goes on in a new one */
}

int nccl_group_end(comm *c, tg_err *e) {
    const nccl_impl *s = c->impl;
    if (s->broken) /* nccl_give_up closed the NCCL group */
        return tg_fail(e, "group %s: comm_group_end: the communicator is broken by an earlier failure", c->name);
    return launch(c, e);
}

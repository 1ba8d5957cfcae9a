/* The per-op timer's table (kernels/timed.c): every slot of kernels/ops.h
 * must be the timer's own (a wrapper, or NULL for its events), never the
 * wrapped backend's function, which would be called with the timer's table
 * and take its state for the backend's (as CUDA's ops do); an op added to
 * the interface without a wrapper fails here. A wrapped call reaches the
 * backend unchanged. */
#include <stddef.h>
#include <string.h>

#include "kernels/timed.h"
#include "tests/kernels/check.h"

typedef void (*any_fn)(void);

/* Slots [first, last] of two tables (function pointers, contiguous in
 * tg_ops) that hold the same non-NULL function; *at: the last one's offset. */
static size_t shared_slots(const tg_ops *a, const tg_ops *b, size_t first, size_t last, size_t *at) {
    size_t n = 0;
    for (size_t off = first; off <= last; off += sizeof(any_fn)) {
        any_fn fa, fb;
        memcpy(&fa, (const char *)a + off, sizeof fa);
        memcpy(&fb, (const char *)b + off, sizeof fb);
        if (fa == fb && fa) {
            n++;
            *at = off;
        }
    }
    return n;
}

void kcheck_timed(tally *t) {
    tg_err e;
    tg_ops *timed = ops_timed_create(ops_cpu(), &e);
    if (!timed) {
        report(t, 0, "timed_create", "%s", e.msg);
        return;
    }
    size_t at = 0;
    const size_t n = shared_slots(timed, ops_cpu(), offsetof(tg_ops, alloc), offsetof(tg_ops, adamw), &at);
    report(t, n == 0, "timed_wraps_every_slot", "%zu slot(s) are the backend's own, e.g. the one at byte %zu of tg_ops", n,
           at);
    float x[5] = {1, 2, 3, 4, 5}, y[5] = {0};
    timed->upload(timed, y, x, sizeof x);
    ops_timed_end_step(timed, true);
    report(t, memcmp(x, y, sizeof x) == 0 && ops_timed_steps(timed) == 1, "timed_call_reaches_backend", "upload lost");
    ops_destroy(timed);
}

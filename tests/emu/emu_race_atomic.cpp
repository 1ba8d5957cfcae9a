/* The data-race check's view of the one order blocks of a launch can have
 * (EMU_RACE=1 builds): a gpu-scope fence, then an atomic, in one block,
 * read by an atomic, then a fence, in a later one (kernels/cuda/dq_slots.cuh's
 * dqs_fence and dqs_count: the last key block to count its arrival at a
 * query tile sums the tile's dq slots that the others wrote). The
 * emulation writes them as gcc's __atomic builtins, which
 * -fsanitize=thread turns into the __tsan_atomic* calls below.
 *
 * The model, as PTX's release and acquire patterns:
 * - a thread's fence releases what the thread wrote before it and what its
 *   block wrote before its last __syncthreads; its next atomic on an
 *   address publishes that release there;
 * - a thread's atomic then fence acquires every release published at that
 *   address before the atomic: its own later accesses, and its block's
 *   after its next __syncthreads, are ordered after them.
 * emu_race.cpp asks emu_race_published whether a write by another block of
 * the launch is ordered so before an access; anything else between blocks
 * is still a race. */
#include <stdint.h>

#include <unordered_map>
#include <vector>

#include "emu_internal.h"

namespace {

/* A fence that an atomic published: the fencing thread, its barrier
 * interval, and the fence's place among all fences (seq). */
struct release_at {
    uint32_t block, bar, seq;
    int tid;
};
/* A release acquired by thread tid of the running block in barrier interval bar. */
struct acquired_at {
    release_at rel;
    uint32_t bar;
    int tid;
};
/* A thread's last fence in its block, and its last atomic's address and
 * how many releases were published there before it (what a fence after
 * it acquires). */
struct thread_sync {
    uint32_t block = 0;
    bool fenced = false;
    release_at fence = {};
    uintptr_t pending = 0;
    size_t pending_n = 0;
};
struct atomics {
    uint32_t seq = 0, launch = 0, block = 0;
    std::unordered_map<uintptr_t, std::vector<release_at>> published; /* the running launch's */
    std::vector<acquired_at> acquired;                                 /* the running block's */
    thread_sync threads[1024];
};

atomics &the_atomics() {
    static atomics a;
    return a;
}

/* The state for the running thread (what belongs to an earlier launch or
 * block dropped), or NULL outside a kernel. */
thread_sync *running(atomics &s, emu_race_pos *me) {
    if (!emu_race_position(me) || me->tid < 0 || me->tid >= 1024) return nullptr;
    if (s.launch != me->launch_first) s.launch = me->launch_first, s.published.clear();
    if (s.block != me->block) s.block = me->block, s.acquired.clear();
    thread_sync &t = s.threads[me->tid];
    if (t.block != me->block) t = thread_sync{}, t.block = me->block;
    return &t;
}

} // namespace

uint32_t emu_race_fence_seq() { return the_atomics().seq; }

bool emu_race_published(uint32_t wblk, int wtid, uint32_t wbar, uint32_t wseq, const emu_race_pos &me) {
    const atomics &s = the_atomics();
    if (s.block != me.block || s.launch != me.launch_first) return false;
    for (const acquired_at &a : s.acquired) {
        const release_at &r = a.rel;
        if (r.block != wblk) continue;
        const bool released = wtid == r.tid ? wseq < r.seq : wbar < r.bar;
        const bool seen = me.tid == a.tid || me.bar > a.bar;
        if (released && seen) return true;
    }
    return false;
}

/* __atomic_thread_fence: acquires what the thread's last atomic read, and
 * releases what it and its block wrote before. */
extern "C" void __tsan_atomic_thread_fence(int) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    atomics &s = the_atomics();
    emu_race_pos me;
    thread_sync *t = running(s, &me);
    if (!t) return;
    if (t->pending) {
        const std::vector<release_at> &list = s.published[t->pending];
        for (size_t i = 0; i < t->pending_n && i < list.size(); i++) s.acquired.push_back({list[i], me.bar, me.tid});
        t->pending = 0;
    }
    t->fenced = true;
    t->fence = release_at{me.block, me.bar, ++s.seq, me.tid};
}

/* __atomic_fetch_add on an int: the operation, and in a kernel the
 * thread's last fence published at the address. Outside kernels (the host's
 * reference counts, std::shared_ptr in the capture path): the operation. */
extern "C" int __tsan_atomic32_fetch_add(volatile int *a, int v, int) {
    const int old = __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);
    atomics &s = the_atomics();
    emu_race_pos me;
    thread_sync *t = running(s, &me);
    if (!t) return old;
    std::vector<release_at> &list = s.published[(uintptr_t)a];
    t->pending = (uintptr_t)a, t->pending_n = list.size();
    if (t->fenced) list.push_back(t->fence);
    return old;
}

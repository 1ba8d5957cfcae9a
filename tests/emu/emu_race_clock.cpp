/* The race check's order beyond __syncthreads (EMU_RACE=1; emu_race.cpp
 * asks it): vector clocks over the threads of the running block and over
 * the agents that write shared memory for them (the bulk tensor copies
 * completing on an mbarrier), for the syncs Hopper's kernels use:
 * - warp-level syncs (shuffles, __syncwarp, the tensor-core stand-ins'
 *   exchanges): the warp's lanes join their views;
 * - mbarriers: an arrival releases the thread's view into the phase; a wait
 *   that sees the phase complete acquires it, and with it the writes of the
 *   bulk loads that completed the phase;
 * - named barriers: an arrival (bar.arrive or bar.sync) releases into the
 *   barrier's round; bar.sync acquires the round once it completes.
 * A thread's clock ticks after each release, so what it does later is not
 * ordered by what it released. __syncthreads orders everything
 * (emu_race.cpp compares barrier counts first), so the clocks live only
 * within one barrier interval: every entry carries the era (block and
 * interval) it was made in, and an entry of another era reads as 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <map>
#include <utility>
#include <vector>

#include "emu_internal.h"
#include "emu_race_clock.h"

namespace {

const int MAX_THREADS = 1024, MAX_AGENTS = 32, /* agents: ids from 1024 (race_clock::is_agent) */ WIDTH = MAX_THREADS + MAX_AGENTS, WARPS = MAX_THREADS / 32;

using race_clock::stamp;
typedef std::vector<stamp> view;

/* v = max(v, w) over the entries of era `era` (the others read as 0). */
void merge(view &v, const view &w, uint32_t era) {
    for (int u = 0; u < WIDTH; u++)
        if (w[u].era == era && (v[u].era != era || v[u].clk < w[u].clk)) v[u] = w[u];
}

/* What a sync object gathered in one round (an mbarrier's phase, a named
 * barrier's generation): kept for the last 4 rounds of each object. */
struct round_view {
    uint64_t round = ~0ull;
    uint32_t era = 0;
    view v;
};

struct clocks {
    uint32_t block = 0, era_base = 1, max_era = 1;
    /* Each thread sees max(its warp's view, its own view if `own_era` is
     * current): the warp's view is what the warp's lanes joined at their
     * last sync, its own what it acquired alone since (an mbarrier wait). */
    view warp[WARPS], own[MAX_THREADS];
    uint32_t own_era[MAX_THREADS] = {};
    stamp tick[MAX_THREADS] = {}; /* each thread's own clock */
    std::map<std::pair<const void *, unsigned>, round_view> rounds;
    std::map<const void *, int> agents; /* an mbarrier's agent: MAX_THREADS + k */
};

clocks &the_clocks() {
    static clocks c;
    return c;
}

/* The clocks, made current for me's block; its era. */
uint32_t era_of(clocks &c, const emu_race_pos &me) {
    if (c.block != me.block) {
        c.block = me.block;
        c.era_base = c.max_era + 1;
        c.rounds.clear();
        c.agents.clear();
    }
    const uint32_t era = c.era_base + me.bar;
    if (era > c.max_era) c.max_era = era;
    return era;
}

view &sized(view &v) {
    if (v.empty()) v.assign(WIDTH, stamp{0, 0});
    return v;
}

uint32_t tick_of(clocks &c, int t, uint32_t era) {
    if (c.tick[t].era != era) c.tick[t] = stamp{era, 1};
    return c.tick[t].clk;
}

/* Thread t's whole view (its warp's and its own) merged into v, with its own clock. */
void view_into(clocks &c, view &v, int t, uint32_t era) {
    merge(v, sized(c.warp[t / 32]), era);
    if (c.own_era[t] == era) merge(v, c.own[t], era);
    v[t] = stamp{era, tick_of(c, t, era)};
}

round_view &round_of(clocks &c, const void *obj, uint64_t round, uint32_t era) {
    round_view &r = c.rounds[{obj, (unsigned)(round & 3)}];
    if (r.round != round || r.era != era) {
        r.round = round;
        r.era = era;
        r.v.assign(WIDTH, stamp{0, 0});
    }
    return r;
}

} // namespace

namespace race_clock {

viewer viewer_of(const emu_race_pos &me) {
    clocks &c = the_clocks();
    const uint32_t era = era_of(c, me);
    return viewer{era, tick_of(c, me.tid, era), sized(c.warp[me.warp]).data(), c.own_era[me.tid] == era ? c.own[me.tid].data() : NULL};
}

unsigned agent(const void *obj) {
    clocks &c = the_clocks();
    auto it = c.agents.find(obj);
    if (it != c.agents.end()) return (unsigned)it->second;
    const int k = (int)c.agents.size() < MAX_AGENTS ? (int)c.agents.size() : MAX_AGENTS - 1; /* the last is shared past 32 */
    c.agents[obj] = MAX_THREADS + k;
    return (unsigned)(MAX_THREADS + k);
}

} // namespace race_clock

/* A warp-level sync of lanes `tids` (all of one warp): they see what each saw. */
void emu_race_join(const int *tids, int n) {
    emu_race_pos me;
    if (n <= 0 || !emu_race_position(&me)) return;
    clocks &c = the_clocks();
    const uint32_t era = era_of(c, me);
    view &w = sized(c.warp[tids[0] / 32]);
    for (int i = 0; i < n; i++) {
        const int t = tids[i];
        if (c.own_era[t] == era) merge(w, c.own[t], era);
        c.own_era[t] = 0; /* within the warp's view now */
        w[t] = stamp{era, tick_of(c, t, era)};
    }
    for (int i = 0; i < n; i++) c.tick[tids[i]].clk++;
}

void emu_race_release(const void *obj, uint64_t round) {
    emu_race_pos me;
    if (!emu_race_position(&me)) return;
    clocks &c = the_clocks();
    const uint32_t era = era_of(c, me);
    view_into(c, round_of(c, obj, round, era).v, me.tid, era);
    c.tick[me.tid].clk++;
}

void emu_race_acquire(const void *obj, uint64_t round) {
    emu_race_pos me;
    if (!emu_race_position(&me)) return;
    clocks &c = the_clocks();
    const uint32_t era = era_of(c, me);
    auto it = c.rounds.find({obj, (unsigned)(round & 3)});
    if (it == c.rounds.end() || it->second.round != round || it->second.era != era) return; /* nothing released in it */
    view &mine = sized(c.own[me.tid]);
    if (c.own_era[me.tid] != era) mine.assign(WIDTH, stamp{0, 0}), c.own_era[me.tid] = era;
    merge(mine, it->second.v, era);
}

/* The bulk loads on mbarrier obj that complete its phase `round` have
 * written: whoever acquires the round has seen them. */
void emu_race_agent_release(const void *obj, uint64_t round) {
    emu_race_pos me;
    if (!emu_race_position(&me)) return;
    clocks &c = the_clocks();
    const uint32_t era = era_of(c, me);
    round_of(c, obj, round, era).v[race_clock::agent(obj)] = stamp{era, (uint32_t)round + 1};
}

/* The emulation's data-race check (EMU_RACE=1 bash tests/emu/build.sh).
 *
 * The kernels' objects are compiled with gcc's -fsanitize=thread, which
 * makes every load and store call __tsan_readN / __tsan_writeN; this file is
 * the runtime those calls reach, in place of ThreadSanitizer's (which knows
 * nothing of emulated threads). For an access to shared memory or to a
 * device allocation it checks the order the device guarantees against the
 * last write and the reads since, kept per 2-byte granule (bf16 is the
 * smallest type the kernels store):
 * - within a block, accesses are ordered by __syncthreads, and within a
 *   barrier interval by the vector clocks of emu_race_clock.cpp: warp-level
 *   syncs (shuffles, __syncwarp, the tensor-core stand-ins' exchanges),
 *   mbarriers, named barriers and the bulk tensor loads' completions; two
 *   accesses of different threads that nothing orders, one a write, race;
 * - blocks of one launch are not ordered, but for a release by a fence
 *   and an atomic that a later block's atomic and fence acquire
 *   (emu_race_atomic.cpp): a granule written by one block and touched by
 *   another in the same launch races unless its write was so published;
 * - launches are ordered (one stream at a time).
 * The emulator runs threads one at a time, so a race gives one answer here
 * and another on a GPU; this check finds it whatever order the threads ran
 * in. cp.async's copies (performed by emu_runtime.cpp, not instrumented) are
 * reported through emu_race_access: the destination is written at the issue
 * and again at the wait; so are the bulk copies' and wgmma's accesses
 * (emu_tma.cpp, emu_wgmma.cpp; a bulk load's box through
 * emu_race_async_write).
 *
 * A race prints "emu: ERROR" (so the binary exits 3) with both source lines,
 * once per pair of lines, at most MAX_REPORTS times. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "emu_internal.h"
#include "emu_race_clock.h"

namespace {

const int GRANULE_SHIFT = 1, PAGE_SHIFT = 12;
const size_t GRANULES_PER_PAGE = (size_t)1 << (PAGE_SHIFT - GRANULE_SHIFT);
const int MAX_REPORTS = 20;

/* Reads of a granule in the current barrier interval by the lanes `mask`
 * of one warp, all at the same clock clk and warp epoch we (lanes that
 * took the same syncs read at the same clock: a warp reading a broadcast
 * value is one entry); pc: the latest one's code offset. */
struct reader {
    uint32_t mask, clk, we, pc;
    uint16_t warp, pad;
};

/* What the check knows of one granule: its last write, and the reads since
 * by the latest reading block (blocks rlo..rhi read it in this launch): r0
 * and, past one, those in the pool's set rset (compacted now and then).
 * Serial 0: none. pc: the access's code address less the binary's base. */
struct granule {
    uint32_t wblk, wbar, wwe, wpc, wclk, wfence; /* wfence: the writer's fence.proxy.async count then */
    uint32_t wseq;                               /* gpu-scope fences before the write (emu_race_atomic.cpp) */
    uint32_t rlo, rhi, rbar, rset;
    reader r0;
    uint16_t wtid, rcount;
};

struct shadow {
    std::unordered_map<uintptr_t, granule *> pages;
    uintptr_t last_key = ~(uintptr_t)0;
    granule *last = nullptr;
    std::set<std::pair<uint32_t, uint32_t>> reported; /* pairs of code addresses */
    int reports = 0;
    long unreported = 0, found = 0; /* found: every race, reported or not */
    uintptr_t code_base = 0;
    std::vector<std::vector<reader>> sets{1}; /* the readers past r0 (set 0: unused) */
    std::vector<size_t> compact_at{0};         /* each set's size at which compact_readers runs */
    std::vector<uint32_t> free_sets;
    /* each thread's fence.proxy.async in its block, in order: the barrier
     * interval and the thread's clock at each (what a reader must have seen) */
    struct fence_at {
        uint32_t bar, clk;
    };
    struct fence_log {
        uint32_t block = 0;
        std::vector<fence_at> at;
    } fences[1024];
};

shadow &the_shadow() {
    static shadow s;
    return s;
}

granule *granule_at(shadow &s, uintptr_t a) {
    const uintptr_t key = a >> PAGE_SHIFT;
    if (key != s.last_key) {
        granule *&page = s.pages[key];
        if (!page) {
            page = (granule *)calloc(GRANULES_PER_PAGE, sizeof(granule));
            if (!page) {
                fprintf(stderr, "emu: out of memory for the race check's shadow\n");
                abort();
            }
        }
        s.last_key = key;
        s.last = page;
    }
    return s.last + ((a & (((uintptr_t)1 << PAGE_SHIFT) - 1)) >> GRANULE_SHIFT);
}

uint32_t code_offset(shadow &s, const void *pc) {
    if (!s.code_base) {
        Dl_info info;
        s.code_base = dladdr(pc, &info) && info.dli_fbase ? (uintptr_t)info.dli_fbase : 1;
    }
    return (uint32_t)((uintptr_t)pc - s.code_base);
}

/* A file:line of addr2line, the path from the repository's root. */
std::string from_root(std::string where) {
    for (const char *root : {"/kernels/", "/tests/"}) {
        const size_t at = where.rfind(root);
        if (at != std::string::npos) return where.substr(at + 1);
    }
    return where;
}

/* The file:line of a code offset in this binary, and those of the calls it
 * was inlined into ("a < b"), by addr2line (run directly, no shell), or the
 * bare offset if that fails. */
std::string source_lines(uint32_t offset) {
    char hex[32], exe[4096];
    snprintf(hex, sizeof hex, "%#x", offset > 0 ? offset - 1 : 0); /* the call's own line, not the next */
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return hex;
    exe[n] = '\0';
    int fd[2];
    if (pipe(fd)) return hex;
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execlp("addr2line", "addr2line", "-C", "-f", "-i", "-e", exe, hex, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    std::string out;
    char buf[512];
    ssize_t got;
    while ((got = read(fd[0], buf, sizeof buf)) > 0) out.append(buf, (size_t)got);
    close(fd[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || out.empty()) return hex;
    /* addr2line -f -i: a function line and a file:line line per frame,
     * innermost first, then each function it was inlined into: up to the
     * kernel and its launch (prep.py's lambda at the launch's line), not
     * into the library and the emulator that run it */
    std::vector<std::string> lines;
    for (size_t at = 0, nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1) lines.push_back(out.substr(at, nl - at));
    std::string where;
    for (size_t i = 1; i < lines.size(); i += 2) {
        const std::string at = from_root(lines[i]);
        if (at == lines[i] || at.rfind("tests/emu/cuda_emu.h", 0) == 0) break; /* std::apply's, the emulator's */
        where += (where.empty() ? "" : " < ") + at;
    }
    return where.empty() ? hex : where;
}

const char *how(bool write) { return write ? "writes" : "reads"; }

/* Counts a finding of the pair of code offsets (pc, other_pc): true when it
 * is to be printed (the pair's first, within MAX_REPORTS). */
bool take_report(shadow &s, uint32_t pc, uint32_t other_pc) {
    s.found++;
    if (!s.reported.insert({pc, other_pc}).second) return false;
    if (s.reports >= MAX_REPORTS) {
        s.unreported++;
        return false;
    }
    s.reports++;
    return true;
}

void report(shadow &s, const emu_race_pos &me, bool write, uint32_t pc, bool other_wrote, uint32_t other_blk, uint16_t other_tid,
            uint32_t other_pc, emu_space space, const char *base, uintptr_t a) {
    if (!take_report(s, pc, other_pc)) return;
    unsigned mine[3], theirs[3];
    emu_race_block_of(me.block, mine);
    emu_race_block_of(other_blk, theirs);
    char other[160];
    if (other_blk != me.block)
        snprintf(other, sizeof other, "block (%u,%u,%u) of the same launch (blocks are not ordered, but by a fence and an atomic each)",
                 theirs[0], theirs[1], theirs[2]);
    else if (race_clock::is_agent(other_tid))
        snprintf(other, sizeof other, "a bulk tensor load (landing on its mbarrier; nothing ordered this after that phase)");
    else
        snprintf(other, sizeof other, "thread %d, nothing ordering the two (a __syncthreads, or a chain of %s)", other_tid,
                 other_tid / 32 == me.warp ? "__syncwarp, mbarriers, named barriers" : "mbarriers, named barriers, warp syncs");
    const std::string here = source_lines(pc), there = source_lines(other_pc);
    emu_error("%s: data race on %s memory (+%zu): block (%u,%u,%u) thread %d %s it at %s; %s %s it at %s", me.kernel,
              space == EMU_SPACE_SHARED ? "shared" : "device", (size_t)(a - (uintptr_t)base), mine[0], mine[1], mine[2], me.tid,
              how(write), here.c_str(), other, other_wrote ? "wrote" : "read", there.c_str());
}

/* The accessing thread: where it stands, and what it has seen. */
struct accessor {
    emu_race_pos pos;
    race_clock::viewer view;
};

/* Whether an earlier access of `me`'s block (thread or agent tid, barrier
 * interval bar, warp epoch we, clock clk) may run at the same time as
 * `me`'s: same barrier interval, another thread, not ordered by a warp
 * sync nor by what `me` has seen through the syncs the clocks follow. */
bool concurrent_in_block(const accessor &me, uint16_t tid, uint32_t bar, uint32_t we, uint32_t clk) {
    if (bar != me.pos.bar) return false;
    if (tid == me.pos.tid) return false;
    if (!race_clock::is_agent(tid) && tid / 32 == me.pos.warp && we < me.pos.warp_epoch) return false;
    return !me.view.seen(tid, clk);
}

std::vector<reader> &readers_past_r0(shadow &s, granule &g) {
    if (!g.rset) {
        if (!s.free_sets.empty()) g.rset = s.free_sets.back(), s.free_sets.pop_back();
        else g.rset = (uint32_t)s.sets.size(), s.sets.emplace_back(), s.compact_at.push_back(0);
        s.compact_at[g.rset] = 8;
    }
    return s.sets[g.rset];
}

void drop_readers(shadow &s, granule &g) {
    if (g.rset) {
        s.sets[g.rset].clear();
        s.free_sets.push_back(g.rset);
        g.rset = 0;
    }
    g.rcount = 0;
}

/* Drops from e the lanes whose reads `me` (which has just read too) has
 * seen: whatever sees `me`'s read sees theirs. */
void drop_seen_lanes(reader &e, const accessor &me) {
    for (uint32_t m = e.mask; m; m &= m - 1) {
        const int lane = __builtin_ctz(m);
        const uint16_t tid = (uint16_t)(e.warp * 32 + lane);
        if (tid != me.pos.tid && !concurrent_in_block(me, tid, me.pos.bar, e.we, e.clk)) e.mask &= ~(1u << lane);
    }
}

size_t readers_past(const shadow &s, const granule &g) { return g.rset ? s.sets[g.rset].size() : 0; }

/* The interval's readers less those `me` has seen (each time their number
 * has doubled since the last time: a read costs a constant on average). */
void compact_readers(shadow &s, granule &g, const accessor &me) {
    std::vector<reader> &past = s.sets[g.rset];
    drop_seen_lanes(g.r0, me);
    size_t kept = 0;
    for (reader &e : past) {
        drop_seen_lanes(e, me);
        if (e.mask) past[kept++] = e;
    }
    past.resize(kept);
    if (!g.r0.mask) g.r0 = past.back(), past.pop_back(); /* `me`'s read is kept somewhere */
    g.rcount = (uint16_t)std::min<size_t>(1 + past.size(), 0xffff);
    s.compact_at[g.rset] = std::max<size_t>(8, 2 * past.size());
}

/* A read by `me`, thread tid at clock clk, joins the interval's readers:
 * into its warp's entry of the same clock and warp epoch, else a new one
 * (the entries past r0 are kept in warp order, so that a read looks only
 * at its own warp's).
 * Its warp's entries of earlier warp epochs go (a warp sync ordered them
 * before it), and so does its own earlier read. */
void add_reader(shadow &s, granule &g, unsigned tid, uint32_t clk, uint32_t pc, const accessor &me) {
    const reader r{1u << (tid % 32), clk, me.pos.warp_epoch, pc, (uint16_t)(tid / 32), 0};
    if (g.rcount && g.r0.warp == r.warp && g.r0.clk == r.clk && g.r0.we == r.we) { /* another lane of the warp reading */
        g.r0.mask |= r.mask, g.r0.pc = pc;
        return;
    }
    if (!g.rcount) {
        g.r0 = r, g.rcount = 1;
        return;
    }
    bool placed = false;
    auto keeps = [&](reader &e) { /* e updated by this read; false: e is gone */
        if (e.warp != r.warp) return true;
        if (e.clk == r.clk && e.we == r.we) {
            e.mask |= r.mask, e.pc = pc, placed = true;
            return true;
        }
        if (e.we < r.we) return false;
        e.mask &= ~r.mask;
        return e.mask != 0;
    };
    bool r0_kept = keeps(g.r0);
    size_t at = 0; /* where this warp's entries end among the rest (kept in warp order) */
    if (g.rcount > 1) {
        std::vector<reader> &past = s.sets[g.rset];
        auto by_warp = [](const reader &e, uint16_t w) { return e.warp < w; };
        const size_t lo = (size_t)(std::lower_bound(past.begin(), past.end(), r.warp, by_warp) - past.begin());
        size_t kept = lo, hi = lo;
        for (; hi < past.size() && past[hi].warp == r.warp; hi++)
            if (keeps(past[hi])) past[kept++] = past[hi];
        past.erase(past.begin() + (long)kept, past.begin() + (long)hi);
        at = kept;
    }
    if (!r0_kept && !placed) g.r0 = r, r0_kept = placed = true;
    if (!placed) {
        std::vector<reader> &past = readers_past_r0(s, g);
        past.insert(past.begin() + (long)std::min(at, past.size()), r);
    }
    if (!r0_kept) g.r0 = s.sets[g.rset].back(), s.sets[g.rset].pop_back(); /* one of the rest moves up */
    g.rcount = (uint16_t)std::min<size_t>(1 + readers_past(s, g), 0xffff);
    if (g.rset && readers_past(s, g) >= s.compact_at[g.rset]) compact_readers(s, g, me);
}

/* The first of the interval's readers that `me`'s write races with: its
 * thread in *tid, or NULL. */
const reader *racing_reader(shadow &s, const granule &g, const accessor &me, uint16_t *tid) {
    auto races = [&](const reader &e) {
        for (uint32_t m = e.mask; m; m &= m - 1) {
            *tid = (uint16_t)(e.warp * 32 + __builtin_ctz(m));
            if (concurrent_in_block(me, *tid, g.rbar, e.we, e.clk)) return true;
        }
        return false;
    };
    if (g.rcount && races(g.r0)) return &g.r0;
    if (g.rcount > 1)
        for (const reader &e : s.sets[g.rset])
            if (races(e)) return &e;
    return NULL;
}

uint32_t fences_of(const shadow &s, unsigned tid, uint32_t block) {
    return tid < 1024 && s.fences[tid].block == block ? (uint32_t)s.fences[tid].at.size() : 0;
}

/* `me`'s access to granule g, made as thread (or agent) `as` at clock clk. */
void check_granule(shadow &s, granule &g, const accessor &me, bool write, uint32_t pc, emu_space space, const char *base,
                   uintptr_t a, uint16_t as, uint32_t clk) {
    /* shared memory is the block's own; device memory's earlier launches are ordered */
    const uint32_t first_valid = space == EMU_SPACE_SHARED ? me.pos.block : me.pos.launch_first;
    if (g.wblk >= first_valid) {
        const bool race = g.wblk != me.pos.block ? !emu_race_published(g.wblk, g.wtid, g.wbar, g.wseq, me.pos)
                                                 : concurrent_in_block(me, g.wtid, g.wbar, g.wwe, g.wclk);
        if (race) report(s, me.pos, write, pc, true, g.wblk, g.wtid, g.wpc, space, base, a);
    }
    const bool interval = g.rhi == me.pos.block && g.rbar == me.pos.bar; /* the readers kept are this interval's */
    uint16_t reader_tid = 0;
    if (write && g.rhi >= first_valid) {
        if (g.rlo != me.pos.block || g.rhi != me.pos.block)
            report(s, me.pos, write, pc, false, g.rhi != me.pos.block ? g.rhi : g.rlo, (uint16_t)(g.r0.warp * 32), g.r0.pc, space,
                   base, a);
        else if (const reader *r = interval ? racing_reader(s, g, me, &reader_tid) : NULL)
            report(s, me.pos, write, pc, false, g.rhi, reader_tid, r->pc, space, base, a);
    }
    if (write) {
        g.wblk = me.pos.block, g.wbar = me.pos.bar, g.wwe = me.pos.warp_epoch, g.wpc = pc, g.wtid = as, g.wclk = clk;
        g.wfence = fences_of(s, as, me.pos.block), g.wseq = emu_race_fence_seq();
        if (interval) drop_readers(s, g);
        return;
    }
    if (g.rhi < first_valid) g.rlo = me.pos.block; /* the first read of this launch */
    if (!interval) {
        drop_readers(s, g);
        g.rhi = me.pos.block, g.rbar = me.pos.bar;
    }
    add_reader(s, g, as, clk, pc, me);
}

/* The running thread as an accessor; false outside a kernel. */
bool running_accessor(accessor *me) {
    if (!emu_race_position(&me->pos)) return false;
    me->view = race_clock::viewer_of(me->pos);
    return true;
}

/* An access to memory of `space` (shared or device, from `base`) as thread
 * or agent `as` at clock clk (the running thread's own unless an agent's
 * write). */
void access_in(emu_space space, const char *base, const void *p, size_t bytes, bool write, const void *pc, const accessor &me,
               uint16_t as, uint32_t clk) {
    shadow &s = the_shadow();
    const uint32_t off = code_offset(s, pc);
    const uintptr_t a = (uintptr_t)p;
    for (uintptr_t g = a >> GRANULE_SHIFT; g <= (a + bytes - 1) >> GRANULE_SHIFT; g++)
        check_granule(s, *granule_at(s, g << GRANULE_SHIFT), me, write, off, space, base, g << GRANULE_SHIFT, as, clk);
}

/* access_in wherever p lies in shared or device memory (else nothing). */
void access_as(const void *p, size_t bytes, bool write, const void *pc, const accessor &me, uint16_t as, uint32_t clk) {
    const char *base = nullptr;
    const emu_space space = emu_race_space(p, &base);
    if (space != EMU_SPACE_OTHER) access_in(space, base, p, bytes, write, pc, me, as, clk);
}

/* Every instrumented load and store: most are of a thread's own stack (the
 * kernels' local arrays), so where p lies is asked before the thread's
 * clocks are read. */
void access(const void *p, size_t bytes, bool write, const void *pc) {
    const char *base = nullptr;
    if (bytes == 0) return;
    const emu_space space = emu_race_space(p, &base);
    accessor me;
    if (space == EMU_SPACE_OTHER || !running_accessor(&me)) return;
    access_in(space, base, p, bytes, write, pc, me, (uint16_t)me.pos.tid, me.view.now);
}

struct summary_at_exit {
    ~summary_at_exit() {
        shadow &s = the_shadow();
        if (s.unreported) fprintf(stderr, "emu: %ld more data races not shown (pairs of source lines)\n", s.unreported);
    }
} g_summary;

} // namespace

void emu_race_access(const void *p, size_t bytes, bool write, const void *pc) { access(p, bytes, write, pc); }
bool emu_race_linked() { return true; }

/* The issuing thread writes now (what it and others did to the box must be
 * ordered before), and the record becomes the load's agent's, stamped with
 * the phase it completes (what reads it must have acquired that phase). */
void emu_race_async_write(const void *p, size_t bytes, const void *obj, uint64_t round, const void *pc) {
    accessor me;
    if (bytes == 0 || !running_accessor(&me)) return;
    access_as(p, bytes, true, pc, me, (uint16_t)me.pos.tid, me.view.now);
    access_as(p, bytes, true, pc, me, (uint16_t)race_clock::agent(obj), (uint32_t)round + 1);
}

/* Why the async proxy's read by `me` may miss the thread's store that g
 * holds, or NULL if it cannot: the writer's first fence.proxy.async after
 * the store (a later one is ordered after it) must come before the read:
 * in the writer's own order (the reader is the writer), before a
 * __syncthreads since, or before a sync `me` has acquired (its clock). */
const char *unfenced(const shadow &s, const granule &g, const accessor &me) {
    if (fences_of(s, g.wtid, me.pos.block) <= g.wfence) return "with no fence.proxy.async after it";
    const shadow::fence_at &f = s.fences[g.wtid].at[g.wfence];
    if (g.wtid == me.pos.tid || f.bar < me.pos.bar || me.view.seen(g.wtid, f.clk)) return NULL;
    return "fenced (fence.proxy.async) only after the sync that orders it before this read";
}

/* A thread's store that the async proxy reads (wgmma's operand, a bulk
 * store's box) unfenced: on the device the read may miss it (reported like
 * a race, once per pair of source lines). */
void emu_race_async_read(const void *p, size_t bytes, const void *pc) {
    accessor me;
    if (bytes == 0 || !running_accessor(&me)) return;
    access_as(p, bytes, false, pc, me, (uint16_t)me.pos.tid, me.view.now);
    const char *base = nullptr;
    if (emu_race_space(p, &base) != EMU_SPACE_SHARED) return;
    shadow &s = the_shadow();
    const uint32_t off = code_offset(s, pc);
    const uintptr_t a = (uintptr_t)p;
    for (uintptr_t at = a >> GRANULE_SHIFT; at <= (a + bytes - 1) >> GRANULE_SHIFT; at++) {
        const granule &g = *granule_at(s, at << GRANULE_SHIFT);
        if (g.wblk != me.pos.block || race_clock::is_agent(g.wtid)) continue;
        const char *why = unfenced(s, g, me);
        if (!why || !take_report(s, off, g.wpc)) continue;
        const std::string here = source_lines(off), there = source_lines(g.wpc);
        emu_error("%s: shared memory (+%zu) stored by thread %d at %s %s, read by the async proxy (wgmma's operand or a "
                  "bulk store's box) for thread %d at %s",
                  me.pos.kernel, (size_t)((at << GRANULE_SHIFT) - (uintptr_t)base), g.wtid, there.c_str(), why, me.pos.tid,
                  here.c_str());
    }
}

void emu_race_proxy_fence() {
    accessor me;
    if (!running_accessor(&me)) return;
    shadow::fence_log &log = the_shadow().fences[me.pos.tid];
    if (log.block != me.pos.block) log.block = me.pos.block, log.at.clear();
    log.at.push_back({me.pos.bar, me.view.now});
}

/* The shadow pages that lie wholly in the freed allocation go (those it
 * shares with a neighbour stay: their records of it are stale by serial). */
void emu_race_free(const void *base, size_t bytes) {
    shadow &s = the_shadow();
    const uintptr_t page = (uintptr_t)1 << PAGE_SHIFT, a = (uintptr_t)base;
    for (uintptr_t key = (a + page - 1) >> PAGE_SHIFT; (key + 1) << PAGE_SHIFT <= a + bytes; key++) {
        auto it = s.pages.find(key);
        if (it == s.pages.end()) continue;
        for (size_t i = 0; i < GRANULES_PER_PAGE; i++) drop_readers(s, it->second[i]); /* their sets back to the pool */
        free(it->second);
        s.pages.erase(it);
        if (s.last_key == key) s.last_key = ~(uintptr_t)0;
    }
}

extern "C" long emu_races(void) { return the_shadow().found; }

/* gcc -fsanitize=thread's entry points, the ones the kernels' objects call
 * (the link fails if they call one more). */
#define EMU_TSAN_ACCESS(n)                                                                       \
    extern "C" void __tsan_read##n(void *p) { access(p, n, false, __builtin_return_address(0)); } \
    extern "C" void __tsan_write##n(void *p) { access(p, n, true, __builtin_return_address(0)); }
EMU_TSAN_ACCESS(1)
EMU_TSAN_ACCESS(2)
EMU_TSAN_ACCESS(4)
EMU_TSAN_ACCESS(8)
EMU_TSAN_ACCESS(16)
extern "C" void __tsan_read_range(void *p, unsigned long n) { access(p, n, false, __builtin_return_address(0)); }
extern "C" void __tsan_write_range(void *p, unsigned long n) { access(p, n, true, __builtin_return_address(0)); }
extern "C" void __tsan_init(void) {}
extern "C" void __tsan_vptr_update(void **, void *) {}
/* __tsan_atomic32_fetch_add and __tsan_atomic_thread_fence: emu_race_atomic.cpp. */

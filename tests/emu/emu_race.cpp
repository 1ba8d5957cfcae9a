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
 *   warp also by its warp-level syncs (shuffles, __syncwarp, the tensor-core
 *   product's exchange); two accesses of different threads between the same
 *   barriers, one a write, race;
 * - blocks of one launch are not ordered at all (the kernels use no atomics
 *   or fences): a granule written by one block and touched by another in the
 *   same launch races;
 * - launches are ordered (one stream at a time).
 * The emulator runs threads one at a time, so a race gives one answer here
 * and another on a GPU; this check finds it whatever order the threads ran
 * in. cp.async's copies (performed by emu_runtime.cpp, not instrumented) are
 * reported through emu_race_access: the destination is written at the issue
 * and again at the wait.
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

#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "emu_internal.h"

namespace {

const uint16_t MANY = 0xffff; /* several readers / readers of several warps */
const int GRANULE_SHIFT = 1, PAGE_SHIFT = 12;
const size_t GRANULES_PER_PAGE = (size_t)1 << (PAGE_SHIFT - GRANULE_SHIFT);
const int MAX_REPORTS = 20;

/* What the check knows of one granule: its last write, and the reads since
 * by the latest reading block (blocks rlo..rhi read it in this launch).
 * Serial 0: none. pc: the access's code address less the binary's base. */
struct granule {
    uint32_t wblk, wbar, wwe, wpc;
    uint32_t rlo, rhi, rbar, rwe, rpc;
    uint16_t wtid, rtid, rwarp, pad;
};

struct shadow {
    std::unordered_map<uintptr_t, granule *> pages;
    uintptr_t last_key = ~(uintptr_t)0;
    granule *last = nullptr;
    std::set<std::pair<uint32_t, uint32_t>> reported; /* pairs of code addresses */
    int reports = 0;
    long unreported = 0, found = 0; /* found: every race, reported or not */
    uintptr_t code_base = 0;
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

void report(shadow &s, const emu_race_pos &me, bool write, uint32_t pc, bool other_wrote, uint32_t other_blk, uint16_t other_tid,
            uint32_t other_pc, emu_space space, const char *base, uintptr_t a) {
    s.found++;
    if (!s.reported.insert({pc, other_pc}).second) return;
    if (s.reports >= MAX_REPORTS) {
        s.unreported++;
        return;
    }
    s.reports++;
    unsigned mine[3], theirs[3];
    emu_race_block_of(me.block, mine);
    emu_race_block_of(other_blk, theirs);
    char other[160];
    if (other_blk != me.block)
        snprintf(other, sizeof other, "block (%u,%u,%u) of the same launch (blocks are not ordered)", theirs[0], theirs[1], theirs[2]);
    else if (other_tid == MANY)
        snprintf(other, sizeof other, "other threads of the block with no __syncthreads between");
    else
        snprintf(other, sizeof other, "thread %d with no __syncthreads%s between", other_tid,
                 other_tid / 32 == me.warp ? " or __syncwarp" : "");
    const std::string here = source_lines(pc), there = source_lines(other_pc);
    emu_error("%s: data race on %s memory (+%zu): block (%u,%u,%u) thread %d %s it at %s; %s %s it at %s", me.kernel,
              space == EMU_SPACE_SHARED ? "shared" : "device", (size_t)(a - (uintptr_t)base), mine[0], mine[1], mine[2], me.tid,
              how(write), here.c_str(), other, other_wrote ? "wrote" : "read", there.c_str());
}

/* Whether an earlier access of `me`'s block (thread tid, warp, barrier
 * interval bar, warp epoch we; tid and warp MANY for the reads of several)
 * may run at the same time as `me`'s: same barrier interval, another
 * thread, not ordered by a warp-level sync. */
bool concurrent_in_block(const emu_race_pos &me, uint16_t tid, uint16_t warp, uint32_t bar, uint32_t we) {
    if (bar != me.bar) return false;
    if (tid == me.tid) return false;
    return !(warp == (uint16_t)me.warp && we < me.warp_epoch);
}

void check_granule(shadow &s, granule &g, const emu_race_pos &me, bool write, uint32_t pc, emu_space space, const char *base,
                   uintptr_t a) {
    /* shared memory is the block's own; device memory's earlier launches are ordered */
    const uint32_t first_valid = space == EMU_SPACE_SHARED ? me.block : me.launch_first;
    const uint16_t tid = (uint16_t)me.tid, warp = (uint16_t)me.warp;
    if (g.wblk >= first_valid) {
        const bool race = g.wblk != me.block || concurrent_in_block(me, g.wtid, (uint16_t)(g.wtid / 32), g.wbar, g.wwe);
        if (race) report(s, me, write, pc, true, g.wblk, g.wtid, g.wpc, space, base, a);
    }
    if (write && g.rhi >= first_valid) {
        if (g.rlo != me.block || g.rhi != me.block)
            report(s, me, write, pc, false, g.rhi != me.block ? g.rhi : g.rlo, g.rtid, g.rpc, space, base, a);
        else if (concurrent_in_block(me, g.rtid, g.rwarp, g.rbar, g.rwe))
            report(s, me, write, pc, false, g.rhi, g.rtid, g.rpc, space, base, a);
    }
    if (write) {
        g.wblk = me.block, g.wbar = me.bar, g.wwe = me.warp_epoch, g.wpc = pc, g.wtid = tid;
        return;
    }
    if (g.rhi < first_valid) g.rlo = me.block; /* the first read of this launch */
    if (g.rhi != me.block || g.rbar != me.bar) {
        g.rhi = me.block, g.rbar = me.bar, g.rwe = me.warp_epoch, g.rpc = pc, g.rtid = tid, g.rwarp = warp;
        return;
    }
    if (g.rtid != tid) g.rtid = MANY;
    if (g.rwarp != warp) g.rwarp = MANY;
    if (me.warp_epoch > g.rwe) g.rwe = me.warp_epoch;
    g.rpc = pc;
}

void access(const void *p, size_t bytes, bool write, const void *pc) {
    emu_race_pos me;
    if (bytes == 0 || !emu_race_position(&me)) return;
    const char *base = nullptr;
    const emu_space space = emu_race_space(p, &base);
    if (space == EMU_SPACE_OTHER) return;
    shadow &s = the_shadow();
    const uint32_t off = code_offset(s, pc);
    const uintptr_t a = (uintptr_t)p;
    for (uintptr_t g = a >> GRANULE_SHIFT; g <= (a + bytes - 1) >> GRANULE_SHIFT; g++)
        check_granule(s, *granule_at(s, g << GRANULE_SHIFT), me, write, off, space, base, g << GRANULE_SHIFT);
}

struct summary_at_exit {
    ~summary_at_exit() {
        shadow &s = the_shadow();
        if (s.unreported) fprintf(stderr, "emu: %ld more data races not shown (pairs of source lines)\n", s.unreported);
    }
} g_summary;

} // namespace

void emu_race_access(const void *p, size_t bytes, bool write, const void *pc) { access(p, bytes, write, pc); }

/* The shadow pages that lie wholly in the freed allocation go (those it
 * shares with a neighbour stay: their records of it are stale by serial). */
void emu_race_free(const void *base, size_t bytes) {
    shadow &s = the_shadow();
    const uintptr_t page = (uintptr_t)1 << PAGE_SHIFT, a = (uintptr_t)base;
    for (uintptr_t key = (a + page - 1) >> PAGE_SHIFT; (key + 1) << PAGE_SHIFT <= a + bytes; key++) {
        auto it = s.pages.find(key);
        if (it == s.pages.end()) continue;
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
/* Host-side reference counts (std::shared_ptr in the capture path): the operation itself. */
extern "C" int __tsan_atomic32_fetch_add(volatile int *a, int v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }

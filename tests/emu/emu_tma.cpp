/* Hopper's asynchronous data movement on the emulated device (tests/emu):
 * mbarriers, bulk tensor copies (TMA) and the tensor maps they read, named
 * barriers and setmaxnreg, for kernels/cuda/mbarrier.cuh and tma.cuh.
 *
 * - cuTensorMapEncodeTiled (returned by cudaGetDriverEntryPointByVersion)
 *   checks the driver's documented rules (cuda.h) and keeps the map in the
 *   CUtensorMap's 128 bytes with a magic word and a checksum, so a copy
 *   through bytes it did not write is an error.
 * - An mbarrier's state (phase, pending arrivals, transaction bytes) is
 *   kept beside the block, keyed by the barrier's shared address. A phase
 *   completes when its pending arrivals and its transaction count are both
 *   zero; try_wait.parity(p) succeeds when the current phase's parity is
 *   not p (the phase of parity p before it has completed).
 * - A bulk load fills its destination with 0xff (NaN) at the issue and is
 *   queued on its barrier; a wait that finds the phase incomplete lands the
 *   barrier's queued loads (reading global memory then), each taking its
 *   box's bytes off the transaction count. A phase that completes while
 *   loads issued in it are queued had bytes never announced (an error); a
 *   wait that passes on the other parity while such loads are queued is
 *   an error too (the reader would see NaN: a wrong parity).
 * - Bulk stores are queued per thread by group and land at their wait.
 * - Threads wait by spinning (emu::spin): a round of the block where no
 *   thread moves is the launcher's deadlock error, which lists the waits.
 * Every problem is an `emu: ERROR`; wrong addresses abort, as they fault. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <string>
#include <vector>

#include "cuda.h"
#include "cuda_emu.h"
#include "emu_hooks.h"
#include "emu_internal.h"

namespace {

const uint64_t MAP_MAGIC = 0x454d552d544d4150ull; /* "EMU-TMAP" */
const int MAX_RANK = 5;

/* A tensor map as the stand-in encoder keeps it (16 qwords). */
struct map_view {
    uint64_t magic;
    uint64_t addr;
    uint32_t rank, esize, swizzle, dtype; /* swizzle: the span in bytes, 0 for none */
    uint64_t dim[MAX_RANK];
    uint64_t stride[MAX_RANK - 1]; /* bytes, of dimensions 1..rank-1 */
    uint16_t box[MAX_RANK];
    uint16_t pad[3];
    uint64_t check;
};
static_assert(sizeof(map_view) <= sizeof(CUtensorMap), "the map's view fits its 128 bytes");

uint64_t map_checksum(const map_view &m) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    const uint64_t *q = (const uint64_t *)&m;
    for (size_t i = 0; i < offsetof(map_view, check) / 8; i++) h = (h ^ q[i]) * 0x100000001b3ull;
    return h;
}

struct bulk_load {
    char *dst;
    map_view map;
    int coord[MAX_RANK];
    uint64_t phase; /* the barrier's phase at the issue */
    int tid;
};

struct mbar {
    unsigned count, pending;
    int64_t tx;
    uint64_t phase;
    bool valid;
    std::vector<bulk_load> loads; /* issued, not landed, in issue order */
    bool parity_reported;
};

struct bulk_store {
    const char *src;
    map_view map;
    int coord[MAX_RANK];
    unsigned group;
};

struct named_barrier {
    int expected, arrived;
    unsigned gen;
};

struct warpgroup_meet {
    int arrived, regs;
    bool inc;
    unsigned gen;
};

/* What a thread waits for, for a deadlock's message. */
struct wait_note {
    const void *bar; /* an mbarrier, or NULL */
    int named;       /* a named barrier's id, or 0 */
    unsigned parity;
};

/* The running block's state; reset when another block runs. */
struct block_tma {
    uint32_t block = 0;
    std::map<const void *, mbar> bars;
    std::map<int, std::vector<bulk_store>> stores; /* by thread */
    std::map<int, unsigned> committed;             /* store groups, by thread */
    named_barrier named[16];
    std::map<int, warpgroup_meet> meets; /* setmaxnreg, by warpgroup */
    std::map<int, wait_note> waits;      /* by thread */
};
block_tma g_tma;
std::string g_refusal; /* the stand-in encoder's last refusal (emu_tensor_map_refusal) */

/* The running thread, with the block's state made current; aborts outside a kernel. */
emu::thread_pos here(const char *what) {
    emu::thread_pos p;
    if (!emu::thread_position(&p)) {
        emu_error("%s outside a kernel", what);
        abort();
    }
    if (g_tma.block != p.block) {
        g_tma = block_tma();
        g_tma.block = p.block;
    }
    return p;
}

/* The state of the barrier at bar, which must have been initialized. */
mbar &barrier_of(const emu::thread_pos &p, uint64_t *bar, const char *what) {
    auto it = g_tma.bars.find(bar);
    if (it == g_tma.bars.end() || !it->second.valid) {
        emu_error("%s: thread %d: %s on %p, %s", p.kernel, p.tid, what, (void *)bar,
                  it == g_tma.bars.end() ? "not an mbarrier (mbar_init first)" : "an mbarrier already invalidated (mbar_inval)");
        abort();
    }
    return it->second;
}

/* The 16-byte chunk bits XORed with address bits 7.. for the map's swizzle. */
uintptr_t swizzled(uintptr_t a, uint32_t span) {
    const uintptr_t mask = span == 128 ? 7 : span == 64 ? 3 : span == 32 ? 1 : 0;
    return a ^ (((a >> 7) & mask) << 4);
}

size_t box_bytes(const map_view &m) {
    size_t n = m.esize;
    for (uint32_t d = 0; d < m.rank; d++) n *= m.box[d];
    return n;
}

/* The map at `map` (a thread's copy of the kernel's parameter). */
map_view map_checked(const emu::thread_pos &p, const void *map, int rank, const char *what) {
    map_view m;
    memcpy(&m, map, sizeof m);
    if (m.magic != MAP_MAGIC || m.check != map_checksum(m)) {
        emu_error("%s: thread %d: %s through %p, which is not a tensor map made by cuTensorMapEncodeTiled", p.kernel, p.tid,
                  what, map);
        abort();
    }
    if (rank >= 0 && (uint32_t)rank != m.rank) {
        emu_error("%s: thread %d: %s of %d coordinates with a tensor map of rank %u", p.kernel, p.tid, what, rank, m.rank);
        abort();
    }
    return m;
}

/* Shared box at `smem` for map m: in shared memory, aligned as the swizzle needs. */
void check_box_address(const emu::thread_pos &p, const map_view &m, const void *smem, const char *what) {
    const size_t align = m.swizzle ? (size_t)m.swizzle * 8 : 128;
    if ((uintptr_t)smem % align) {
        emu_error("%s: thread %d: %s at shared address %p, not %zu-byte aligned (%s)", p.kernel, p.tid, what, smem, align,
                  m.swizzle ? "the swizzle pattern repeats every 8 spans" : "bulk tensor copies need 128");
        abort();
    }
    if (!emu::shared_base(smem, box_bytes(m))) {
        emu_error("%s: thread %d: %s at %p: its %zu bytes are not in the block's shared memory", p.kernel, p.tid, what, smem,
                  box_bytes(m));
        abort();
    }
    if (m.swizzle && (uint32_t)m.box[0] * m.esize != m.swizzle) {
        emu_error("%s: thread %d: %s with a %u-byte inner box under the %u-byte swizzle: only a box row of the whole span is "
                  "emulated",
                  p.kernel, p.tid, what, (unsigned)m.box[0] * m.esize, m.swizzle);
        abort();
    }
}

/* Calls f(global element address or NULL if outside, shared address) for
 * each element of the box at coordinates c, shared addresses swizzled. */
template <typename F>
void for_box(const map_view &m, const int *c, const char *smem, F f) {
    size_t n = 1;
    for (uint32_t d = 0; d < m.rank; d++) n *= m.box[d];
    for (size_t e = 0; e < n; e++) {
        size_t rest = e;
        uint64_t offset = 0;
        bool inside = true;
        for (uint32_t d = 0; d < m.rank; d++) {
            const int64_t g = (int64_t)c[d] + (int64_t)(rest % m.box[d]);
            rest /= m.box[d];
            if (g < 0 || (uint64_t)g >= m.dim[d]) inside = false;
            else offset += (uint64_t)g * (d ? m.stride[d - 1] : m.esize);
        }
        f(inside ? (char *)(uintptr_t)(m.addr + offset) : (char *)NULL,
          (char *)swizzled((uintptr_t)(smem + e * m.esize), m.swizzle));
    }
}

/* A load lands: global memory read now, zeros outside the tensor. */
void land(const bulk_load &l) {
    for_box(l.map, l.coord, l.dst, [&](char *g, char *s) {
        if (!g) memset(s, 0, l.map.esize);
        else if (emu_check_device_range(g, l.map.esize, "bulk tensor load source")) memcpy(s, g, l.map.esize);
        else abort();
    });
}

/* The phase completes if nothing is pending: loads of this phase still
 * queued then were never announced. */
void settle(const emu::thread_pos &p, uint64_t *bar, mbar &b) {
    if (b.pending || b.tx) return;
    size_t early = 0;
    for (const bulk_load &l : b.loads) early += l.phase == b.phase;
    if (early)
        emu_error("%s: mbarrier %p: phase %llu completed with %zu bulk copies issued in it still in flight: their bytes were "
                  "not announced (mbar_arrive_expect_tx missing or short)",
                  p.kernel, (void *)bar, (unsigned long long)b.phase, early);
    emu_race_agent_release(bar, b.phase); /* the loads of this phase have landed */
    b.phase++;
    b.pending = b.count;
    emu::progress();
}

} // namespace

namespace emu {

void mbar_init(uint64_t *bar, unsigned count) {
    const thread_pos p = here("mbarrier.init");
    if ((uintptr_t)bar % 8 || !shared_base(bar, 8)) {
        emu_error("%s: thread %d: mbarrier.init at %p, not an 8-byte aligned word of shared memory", p.kernel, p.tid, (void *)bar);
        abort();
    }
    if (count < 1 || count >= (1u << 20)) emu_error("%s: mbarrier.init with count %u (1 to 2^20 - 1)", p.kernel, count);
    auto it = g_tma.bars.find(bar);
    if (it != g_tma.bars.end() && it->second.valid)
        emu_error("%s: thread %d: mbarrier.init of %p, a valid mbarrier (mbar_inval it first)", p.kernel, p.tid, (void *)bar);
    g_tma.bars[bar] = mbar{count, count, 0, 0, true, {}, false};
    memset(bar, 0, 8); /* the word holds the barrier now, not NaN */
    progress();
}

uint64_t mbar_arrive(uint64_t *bar, unsigned expect_tx_bytes) {
    const thread_pos p = here("mbarrier.arrive");
    mbar &b = barrier_of(p, bar, "mbarrier.arrive");
    if (expect_tx_bytes) mbar_expect_tx(bar, expect_tx_bytes);
    if (b.pending == 0) {
        emu_error("%s: thread %d: mbarrier %p: an arrival beyond the %u its phase %llu expects", p.kernel, p.tid, (void *)bar,
                  b.count, (unsigned long long)b.phase);
        return b.phase;
    }
    const uint64_t token = b.phase;
    emu_race_release(bar, b.phase);
    b.pending--;
    progress();
    settle(p, bar, b);
    /* The arrival completed the phase: let the threads waiting on it run
     * now, before this one goes on. On the device they run at once; here,
     * without the switch, a producer waiting for an empty stage ran only at
     * this thread's next wait, so a stage released before the products
     * that read it were waited for was refilled after they ran, and
     * nothing saw it (with the switch, its copy's NaN fill lands in their
     * operands before their wait: wgmma's digest check). */
    if (b.phase != token) spin();
    return token;
}

void mbar_expect_tx(uint64_t *bar, unsigned bytes) {
    const thread_pos p = here("mbarrier.expect_tx");
    mbar &b = barrier_of(p, bar, "mbarrier.expect_tx");
    b.tx += bytes;
    if (b.tx >= (1 << 20))
        emu_error("%s: thread %d: mbarrier %p: %lld transaction bytes pending, over the ISA's 2^20 - 1", p.kernel, p.tid,
                  (void *)bar, (long long)b.tx);
    progress();
}

bool mbar_try_wait(uint64_t *bar, unsigned parity) {
    const thread_pos p = here("mbarrier.try_wait");
    mbar &b = barrier_of(p, bar, "mbarrier.try_wait");
    if (parity > 1) emu_error("%s: mbarrier.try_wait.parity with parity %u (0 or 1)", p.kernel, parity);
    if ((b.phase & 1) == parity && !b.loads.empty()) { /* the wait needs the phase's loads: they land now */
        std::vector<bulk_load> loads;
        loads.swap(b.loads);
        for (size_t i = 0; i < loads.size(); i++) {
            land(loads[i]);
            b.tx -= (int64_t)box_bytes(loads[i].map);
            b.loads.assign(loads.begin() + (long)i + 1, loads.end()); /* what is still in flight, for settle */
            settle(p, bar, b);
        }
        b.loads.clear();
        progress();
    }
    const bool done = (b.phase & 1) != parity;
    if (done && !b.loads.empty() && !b.parity_reported) {
        emu_error("%s: thread %d: mbarrier %p: a wait for parity %u passed (phase %llu is current) while %zu bulk copies "
                  "issued on it are in flight: their data is not there yet (a wait with the wrong parity, or bytes not "
                  "announced by mbar_arrive_expect_tx before the arrival that completed the phase)",
                  p.kernel, p.tid, (void *)bar, parity, (unsigned long long)b.phase, b.loads.size());
        b.parity_reported = true;
    }
    if (done) {
        if (b.phase > 0) emu_race_acquire(bar, b.phase - 1); /* the phase of that parity that completed */
        g_tma.waits.erase(p.tid);
        return true;
    }
    g_tma.waits[p.tid] = wait_note{bar, 0, parity};
    spin();
    return false;
}

void mbar_inval(uint64_t *bar) {
    const thread_pos p = here("mbarrier.inval");
    mbar &b = barrier_of(p, bar, "mbarrier.inval");
    if (!b.loads.empty())
        emu_error("%s: thread %d: mbarrier.inval of %p with %zu bulk copies in flight on it", p.kernel, p.tid, (void *)bar,
                  b.loads.size());
    b.valid = false;
    progress();
}

void named_bar(int id, int threads, bool wait) {
    const thread_pos p = here("bar.sync");
    if (id < 1 || id > 15 || threads < 32 || threads % 32 || threads > p.nthreads) {
        emu_error("%s: thread %d: named barrier %d of %d threads (ids 1 to 15, 0 being __syncthreads'; a multiple of 32, at "
                  "most the block's %d)",
                  p.kernel, p.tid, id, threads, p.nthreads);
        abort();
    }
    named_barrier &n = g_tma.named[id];
    if (n.arrived == 0) n.expected = threads;
    else if (n.expected != threads)
        emu_error("%s: thread %d: named barrier %d reached with %d threads while others wait for %d", p.kernel, p.tid, id,
                  threads, n.expected);
    progress();
    const unsigned gen = n.gen;
    emu_race_release(&n, gen);
    if (++n.arrived >= n.expected) {
        n.arrived = 0;
        n.gen++;
        if (wait) emu_race_acquire(&n, gen);
        return;
    }
    if (!wait) return;
    g_tma.waits[p.tid] = wait_note{NULL, id, 0};
    while (g_tma.named[id].gen == gen) spin();
    g_tma.waits.erase(p.tid);
    emu_race_acquire(&n, gen);
}

void fence_proxy_async() {
    here("fence.proxy.async");
    emu_race_proxy_fence();
}

bool sm90a_code() {
    const char *no = getenv("EMU_NO_SM90A");
    return !(no && strcmp(no, "1") == 0);
}

void setmaxnreg(int regs, bool inc) {
    const thread_pos p = here("setmaxnreg");
    const int wg = p.tid / 128;
    if ((wg + 1) * 128 > p.nthreads) {
        emu_error("%s: thread %d: setmaxnreg in a warpgroup of fewer than 128 threads (block of %d)", p.kernel, p.tid, p.nthreads);
        abort();
    }
    warpgroup_meet &w = g_tma.meets[wg];
    if (w.arrived == 0) {
        w.regs = regs;
        w.inc = inc;
    } else if (w.regs != regs || w.inc != inc) {
        emu_error("%s: thread %d: setmaxnreg.%s %d where its warpgroup's others ran setmaxnreg.%s %d (not warpgroup-uniform)",
                  p.kernel, p.tid, inc ? "inc" : "dec", regs, w.inc ? "inc" : "dec", w.regs);
    }
    progress();
    if (++w.arrived == 128) { /* .sync.aligned: the warpgroup meets */
        w.arrived = 0;
        w.gen++;
        return;
    }
    const unsigned gen = w.gen;
    while (g_tma.meets[wg].gen == gen) spin();
}

void tma_prefetch(const void *map) { map_checked(here("prefetch.tensormap"), map, -1, "prefetch.tensormap"); }

void tma_load(void *dst, const void *map, uint64_t *bar, const int *coords, int rank) {
    const thread_pos p = here("cp.async.bulk.tensor");
    const map_view m = map_checked(p, map, rank, "a bulk tensor load");
    check_box_address(p, m, dst, "a bulk tensor load's destination");
    mbar &b = barrier_of(p, bar, "a bulk tensor load's completion");
    memset(dst, 0xff, box_bytes(m)); /* undefined until it lands: NaN */
    bulk_load l{(char *)dst, m, {0, 0, 0, 0, 0}, b.phase, p.tid};
    memcpy(l.coord, coords, sizeof(int) * (size_t)rank);
    const void *pc = __builtin_return_address(0);
    for_box(m, l.coord, l.dst, [&](char *g, char *sh) { /* the race check: read there, written here by the load */
        if (g) emu_race_access(g, m.esize, false, pc);
        emu_race_async_write(sh, m.esize, bar, b.phase, pc);
    });
    b.loads.push_back(l);
    progress();
}

void tma_store(const void *map, const void *src, const int *coords, int rank) {
    const thread_pos p = here("cp.async.bulk.tensor (store)");
    const map_view m = map_checked(p, map, rank, "a bulk tensor store");
    check_box_address(p, m, src, "a bulk tensor store's source");
    bulk_store s{(const char *)src, m, {0, 0, 0, 0, 0}, g_tma.committed[p.tid]};
    memcpy(s.coord, coords, sizeof(int) * (size_t)rank);
    const void *pc = __builtin_return_address(0);
    for_box(m, s.coord, s.src, [&](char *, char *sh) { emu_race_async_read(sh, m.esize, pc); }); /* read from here to its wait */
    g_tma.stores[p.tid].push_back(s);
}

void tma_store_commit() { g_tma.committed[here("cp.async.bulk.commit_group").tid]++; }

void tma_store_wait(int newest_pending) {
    const thread_pos p = here("cp.async.bulk.wait_group");
    const unsigned committed = g_tma.committed[p.tid];
    const unsigned done = committed > (unsigned)newest_pending ? committed - (unsigned)newest_pending : 0;
    const void *pc = __builtin_return_address(0);
    std::vector<bulk_store> &queue = g_tma.stores[p.tid], kept;
    for (const bulk_store &s : queue) {
        if (s.group >= done) {
            kept.push_back(s);
            continue;
        }
        for_box(s.map, s.coord, s.src, [&](char *g, char *sh) { /* shared memory read now; nothing outside the tensor */
            emu_race_async_read(sh, s.map.esize, pc);
            if (!g) return;
            emu_race_access(g, s.map.esize, true, pc);
            if (emu_check_device_range(g, s.map.esize, "bulk tensor store destination")) memcpy(g, sh, s.map.esize);
            else abort();
        });
    }
    queue.swap(kept);
}

} // namespace emu

void emu_tma_thread_exit(int tid) {
    if (g_tma.block == 0) return;
    auto it = g_tma.stores.find(tid);
    if (it != g_tma.stores.end() && !it->second.empty()) {
        emu_error("thread %d exited with %zu bulk tensor stores not waited for (cp.async.bulk.wait_group)", tid, it->second.size());
        it->second.clear();
    }
}

void emu_tma_block_end() {
    for (auto &kv : g_tma.bars) {
        if (kv.second.loads.empty()) continue;
        emu_error("mbarrier %p: the block ended with %zu bulk tensor loads on it never waited for", kv.first,
                  kv.second.loads.size());
        kv.second.loads.clear();
    }
    /* bar.arrive without a bar.sync to meet it: the two sides' counts of
     * turns disagree (the device resets the barrier with the block, so it
     * would pass unseen there) */
    for (int id = 1; id < 16; id++)
        if (g_tma.named[id].arrived > 0)
            emu_error("named barrier %d: the block ended with %d of its %d threads arrived (arrivals no bar.sync met)", id,
                      g_tma.named[id].arrived, g_tma.named[id].expected);
    g_tma = block_tma();
}

std::string emu_tma_waits() {
    std::string out;
    int shown = 0;
    for (const auto &kv : g_tma.waits) {
        char line[256];
        if (kv.second.bar) {
            const auto it = g_tma.bars.find(kv.second.bar);
            const mbar &b = it->second;
            snprintf(line, sizeof line, "; thread %d waits on mbarrier %p for parity %u (phase %llu: %u of %u arrivals and %lld "
                     "transaction bytes pending)",
                     kv.first, kv.second.bar, kv.second.parity, (unsigned long long)b.phase, b.pending, b.count, (long long)b.tx);
        } else {
            const named_barrier &n = g_tma.named[kv.second.named];
            snprintf(line, sizeof line, "; thread %d waits at named barrier %d (%d of %d threads arrived)", kv.first,
                     kv.second.named, n.arrived, n.expected);
        }
        if (shown++ < 4) out += line;
    }
    if (shown > 4) out += "; ... (" + std::to_string(shown) + " threads wait on mbarriers or named barriers)";
    return out;
}

/* ---- the driver's entry point and its cuTensorMapEncodeTiled ---- */

namespace {

/* Records why the stand-in refused a map, and the driver's answer. */
CUresult refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
CUresult refuse(const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    g_refusal = why;
    return CUDA_ERROR_INVALID_VALUE;
}

int element_bytes(CUtensorMapDataType t) {
    switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: case CU_TENSOR_MAP_DATA_TYPE_FLOAT16: case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64: case CU_TENSOR_MAP_DATA_TYPE_INT64: case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32: case CU_TENSOR_MAP_DATA_TYPE_INT32: case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ: case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32: case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
        return 4;
    default: return 0;
    }
}

/* The rules of cuda.h's cuTensorMapEncodeTiled for the tensor itself. */
CUresult check_global(cuuint32_t rank, const void *addr, const cuuint64_t *dim, const cuuint64_t *stride) {
    if (rank < 1 || rank > (cuuint32_t)MAX_RANK) return refuse("tensorRank %u: 1 to 5", rank);
    if (!addr || (uintptr_t)addr % 16) return refuse("globalAddress %p: not 16-byte aligned", addr);
    for (cuuint32_t d = 0; d < rank; d++)
        if (dim[d] < 1 || dim[d] > ((uint64_t)1 << 32)) return refuse("globalDim[%u] = %llu: 1 to 2^32", d, (unsigned long long)dim[d]);
    for (cuuint32_t d = 0; d + 1 < rank; d++) {
        if (stride[d] % 16) return refuse("globalStrides[%u] = %llu: not a multiple of 16", d, (unsigned long long)stride[d]);
        if (stride[d] >= ((uint64_t)1 << 40)) return refuse("globalStrides[%u] = %llu: not below 2^40", d, (unsigned long long)stride[d]);
    }
    return CUDA_SUCCESS;
}

/* The rules for the box, its traversal and the layout in shared memory. */
CUresult check_box(cuuint32_t rank, int esize, const cuuint32_t *box, const cuuint32_t *estride, CUtensorMapInterleave il,
                   CUtensorMapSwizzle sw) {
    for (cuuint32_t d = 0; d < rank; d++) {
        if (box[d] < 1 || box[d] > 256) return refuse("boxDim[%u] = %u: 1 to 256", d, box[d]);
        if (estride[d] < 1 || estride[d] > 8) return refuse("elementStrides[%u] = %u: 1 to 8", d, estride[d]);
    }
    if ((unsigned)il > CU_TENSOR_MAP_INTERLEAVE_32B) return refuse("interleave %d: not a CUtensorMapInterleave", (int)il);
    if ((unsigned)sw > CU_TENSOR_MAP_SWIZZLE_128B) return refuse("swizzle %d: not emulated (none, 32B, 64B, 128B are)", (int)sw);
    const unsigned inner = box[0] * (unsigned)esize, span = sw ? 16u << sw : 0;
    if (il == CU_TENSOR_MAP_INTERLEAVE_NONE && inner % 16)
        return refuse("boxDim[0] * element size = %u bytes: not a multiple of 16", inner);
    if (il == CU_TENSOR_MAP_INTERLEAVE_NONE && span && inner > span)
        return refuse("boxDim[0] * element size = %u bytes: over the swizzle span of %u bytes", inner, span);
    if (il == CU_TENSOR_MAP_INTERLEAVE_32B && sw != CU_TENSOR_MAP_SWIZZLE_32B)
        return refuse("interleave 32B with swizzle %d: it needs the 32B swizzle", (int)sw);
    return CUDA_SUCCESS;
}

CUresult encode_tiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr, const cuuint64_t *dim,
                      const cuuint64_t *stride, const cuuint32_t *box, const cuuint32_t *estride, CUtensorMapInterleave il,
                      CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    g_refusal.clear();
    if (!map || (uintptr_t)map % 64) return refuse("tensorMap %p: not 64-byte aligned", (void *)map);
    const int esize = element_bytes(type);
    if (!esize) return refuse("tensorDataType %d: not emulated", (int)type);
    CUresult r = check_global(rank, addr, dim, stride);
    if (r == CUDA_SUCCESS) r = check_box(rank, esize, box, estride, il, sw);
    if (r != CUDA_SUCCESS) return r;
    if ((unsigned)l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B) return refuse("l2Promotion %d: not a CUtensorMapL2promotion", (int)l2);
    if ((unsigned)oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA) return refuse("oobFill %d: not a CUtensorMapFloatOOBfill", (int)oob);
    /* legal, but not what the emulated copies model */
    if (il != CU_TENSOR_MAP_INTERLEAVE_NONE) return refuse("interleave %d: only CU_TENSOR_MAP_INTERLEAVE_NONE is emulated", (int)il);
    if (oob != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) return refuse("oobFill %d: only the zero fill is emulated", (int)oob);
    for (cuuint32_t d = 0; d < rank; d++)
        if (estride[d] != 1 && d > 0) return refuse("elementStrides[%u] = %u: only 1 is emulated", d, estride[d]);
    map_view m;
    memset(&m, 0, sizeof m);
    m.magic = MAP_MAGIC;
    m.addr = (uint64_t)(uintptr_t)addr;
    m.rank = rank;
    m.esize = (uint32_t)esize;
    m.swizzle = sw ? 16u << sw : 0;
    m.dtype = (uint32_t)type;
    for (cuuint32_t d = 0; d < rank; d++) {
        m.dim[d] = dim[d];
        m.box[d] = (uint16_t)box[d];
        if (d) m.stride[d - 1] = stride[d - 1];
    }
    m.check = map_checksum(m);
    memset(map, 0, sizeof *map);
    memcpy(map, &m, sizeof m);
    return CUDA_SUCCESS;
}

} // namespace

extern "C" const char *emu_tensor_map_refusal(void) { return g_refusal.c_str(); }

extern "C" cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                                       unsigned long long flags, enum cudaDriverEntryPointQueryResult *status) {
    (void)flags;
    const bool known = symbol && strcmp(symbol, "cuTensorMapEncodeTiled") == 0;
    if (!fn) return emu_fail(cudaErrorInvalidValue);
    *fn = known && version >= 12000 ? (void *)&encode_tiled : NULL;
    if (status)
        *status = !known ? cudaDriverEntryPointSymbolNotFound
                  : *fn  ? cudaDriverEntryPointSuccess
                         : cudaDriverEntryPointVersionNotSufficent;
    return cudaSuccess;
}

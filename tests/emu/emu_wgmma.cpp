/* The wgmma stand-ins (kernels/cuda/wgmma.cuh; tests/emu/README.md):
 * Hopper's warpgroup MMA, wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16,
 * with its fence, commit_group and wait_group, on the emulator's fibers.
 *
 * - Issue (wgmma_mma): the 128 threads of the warpgroup meet in one barrier
 *   (emu::warpgroup_gather: a missing, partial or exited warp is an error)
 *   and compare what the ISA says must agree (descriptors, shape, tnsp,
 *   groups committed); the A fragments of the register form are exchanged
 *   in the warp then (so they are read at the issue). The product itself is
 *   queued in the thread's open group.
 * - Asynchrony as cp.async's: wgmma_wait(N) performs, in issue order, the
 *   products of all but the N newest committed groups, reading shared
 *   memory then and writing the accumulators then. A kernel that reads its
 *   accumulators before the wait sees their old values, and one that
 *   rewrites an operand tile before the wait gets a product of the new one.
 * - Operands: each descriptor decoded by smem_layout.h (reserved bits must be
 *   zero), its start address resolved to the block's shared memory (the
 *   18-bit address kernels get from wgmma_shared_address), and every element
 *   read at smem_element_address; an element outside the block's shared
 *   memory is an error.
 * - wgmma.fence: a thread's first mma_async without a fence before it is an
 *   error, and so is an mma_async on accumulators the thread changed since
 *   the emulator last wrote or issued them without a fence between (writes
 *   are seen by comparing values; reads, and the A-fragment registers, are
 *   not checked).
 * Products accumulate in float in k order from the accumulator (or 0 with
 * scale-d 0); the hardware's order and rounding inside a k16 step may differ. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cuda_emu.h"
#include "emu_internal.h"
#include "kernels/cuda/smem_layout.h"

namespace {

const int MAX_THREADS = 1024;
const uint32_t WINDOW = 1u << 18; /* the shared window a descriptor addresses */

/* One product queued by a thread: its accumulators, operands and group. */
struct wg_op {
    float *d;
    int n;
    uint64_t desc_a, desc_b;
    bool a_regs;
    float a_rows[2][16]; /* register form: rows g and g + 8 of the warp's A, read at the issue */
    int scale_d, tnsp_a, tnsp_b;
    unsigned group;
    uint64_t digest; /* lane 0's: of the operand elements its warp read at the issue (warp_reads) */
};

/* Accumulators (n / 2 floats) as the emulator last left them (the fence check). */
struct wg_acc {
    const float *d;
    int n;
    uint32_t fences;
    float seen[128];
};

struct wg_thread {
    uint32_t block; /* serial of the block this state belongs to */
    std::vector<wg_op> ops;
    unsigned committed;
    uint32_t fences;
    std::vector<wg_acc> accs;
};

wg_thread g_threads[MAX_THREADS];
/* The 256 KiB windows (host address bits above 18) the running block took
 * shared addresses in: a descriptor's 18-bit start is resolved among them. */
std::vector<uintptr_t> g_windows;
uint32_t g_windows_block = 0;
uint32_t g_changed_block = 0; /* the last block whose operand changed before its wait (reported once a block) */

/* The calling thread's state (fresh in a new block), or NULL outside a kernel. */
wg_thread *thread_state(emu_race_pos *pos, const char *what) {
    if (!emu_race_position(pos)) {
        emu_error("%s outside a kernel", what);
        return NULL;
    }
    wg_thread &t = g_threads[pos->tid];
    if (t.block != pos->block) {
        t.block = pos->block;
        t.ops.clear();
        t.committed = t.fences = 0;
        t.accs.clear();
    }
    return &t;
}

/* An operand as the tensor core sees it: descriptor fields, and the host
 * address of its start in the block's shared memory. */
struct operand {
    uint64_t desc;
    smem_desc_fields f;
    const char *start, *region, *region_end; /* [region, region_end): the shared region start lies in */
    const char *kernel, *name;
};

/* The host address of 18-bit shared address s in block `block`, or NULL (an error). */
const char *resolve(uint32_t s, uint32_t block, const char **region, const char *kernel, const char *name) {
    const char *found = NULL;
    int candidates = 0;
    if (g_windows_block != block) g_windows.clear(), g_windows_block = block; /* none taken in this block yet */
    for (uintptr_t hi : g_windows)
        for (int step = -1; step <= 1; step++) {
            const char *p = (const char *)(hi + (uintptr_t)((intptr_t)step * WINDOW) + s), *base;
            if (emu_race_space(p, &base) != EMU_SPACE_SHARED || p == found) continue;
            found = p, *region = base;
            candidates++;
        }
    if (candidates == 1) return found;
    if (candidates == 0)
        emu_error("%s: wgmma operand %s: start address %#x is not in the block's shared memory (shared addresses come "
                  "from wgmma_shared_address)", kernel, name, s);
    else
        emu_error("%s: wgmma operand %s: start address %#x is ambiguous in the emulator (%d shared regions hold it)", kernel,
                  name, s, candidates);
    return NULL;
}

bool open_operand(operand *o, uint64_t desc, uint32_t block, const char *kernel, const char *name) {
    o->kernel = kernel, o->name = name;
    if (desc & SMEM_DESC_RESERVED) {
        emu_error("%s: wgmma operand %s: descriptor %#llx has reserved bits set", kernel, name, (unsigned long long)desc);
        return false;
    }
    o->desc = desc;
    o->f = smem_desc_decode(desc);
    o->start = resolve(o->f.start, block, &o->region, kernel, name);
    o->region_end = emu::shared_end(o->region);
    return o->start != NULL;
}

float bf16_at(const char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Element (mn, k) of operand o must lie in the operand's shared region
 * (what emu_race_space says of its two bytes): outside, an error, and the
 * device faults. */
void check_element(const operand &o, unsigned major, uint32_t mn, uint32_t k) {
    const uint32_t at = smem_element_address(o.f, major, mn, k, 2);
    const char *p = o.start + ((intptr_t)at - (intptr_t)o.f.start);
    if (p < o.region || p + 2 > o.region_end) {
        emu_error("%s: wgmma operand %s: element (%u, %u) at shared address %#x is outside the block's shared memory", o.kernel,
                  o.name, mn, k, at);
        abort();
    }
}

/* An operand's layout: the offset from its start of each element (mn, k)
 * of rows [0, rows), as smem_element_address gives it. All 128 threads of a
 * warpgroup read the same operands, so a layout is worked out once for a
 * descriptor and kept, in a table of LAYOUTS slots by a hash of it (a
 * kernel's loop goes through more descriptors than a short list holds). */
struct layout {
    uint64_t desc;
    unsigned major;
    uint32_t rows; /* 0: an empty slot */
    std::vector<int32_t> offset; /* of (mn, k) at [16 mn + k] */
    int32_t lo, hi;              /* the lowest offset, the highest + 2 */
};
const unsigned LAYOUTS = 256;
layout g_layouts[LAYOUTS];

/* Operand o's layout for rows [0, rows) read as major; an element outside
 * the operand's shared region is reported (check_element). */
const layout &checked_layout(const operand &o, unsigned major, uint32_t rows) {
    const uint64_t hash = (o.desc ^ (uint64_t)major << 47 ^ (uint64_t)rows << 53) * 0x9e3779b97f4a7c15ull;
    layout *found = &g_layouts[hash >> 56];
    if (found->rows != rows || found->desc != o.desc || found->major != major) {
        layout &l = *found;
        l.desc = o.desc, l.major = major, l.rows = rows;
        l.offset.resize(16 * (size_t)rows);
        l.lo = INT32_MAX, l.hi = INT32_MIN;
        for (uint32_t mn = 0; mn < rows; mn++)
            for (uint32_t k = 0; k < 16; k++) {
                const int32_t off = (int32_t)(smem_element_address(o.f, major, mn, k, 2) - o.f.start);
                l.offset[16 * mn + k] = off;
                l.lo = off < l.lo ? off : l.lo, l.hi = off + 2 > l.hi ? off + 2 : l.hi;
            }
    }
    const uintptr_t start = (uintptr_t)o.start;
    if (start + found->lo < (uintptr_t)o.region || start + found->hi > (uintptr_t)o.region_end)
        for (uint32_t mn = 0; mn < rows; mn++)
            for (uint32_t k = 0; k < 16; k++) check_element(o, major, mn, k); /* aborts at the first outside */
    return *found;
}

/* The bits at p into *digest, the race check reading them at pc. */
void digest_read(const char *p, const void *pc, uint64_t *digest) {
    emu_race_async_read(p, 2, pc);
    uint16_t bits;
    memcpy(&bits, p, 2);
    *digest = (*digest ^ bits) * 0x100000001b3ull;
}

/* The operand elements the calling thread's share of op reads: rows 16w + g
 * and + 8 of A (its warp w), columns 8j + 2q + i of B, in the accumulator
 * layout of kernels/cuda/wgmma.cuh. */
void operands(const wg_op &op, const emu_race_pos &pos, float a[2][16], float b[32][2][16]) {
    const int w = (pos.tid % 128) / 32, lane = pos.tid % 32, g = lane / 4, q = lane % 4;
    operand oa, ob;
    if (op.a_regs) memcpy(a, op.a_rows, sizeof op.a_rows);
    else {
        if (!open_operand(&oa, op.desc_a, pos.block, pos.kernel, "A")) abort();
        const layout &la = checked_layout(oa, op.tnsp_a ? SMEM_MN_MAJOR : SMEM_K_MAJOR, 64);
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 16; k++) a[h][k] = bf16_at(oa.start + la.offset[16 * (16 * w + g + 8 * h) + k]);
    }
    if (!open_operand(&ob, op.desc_b, pos.block, pos.kernel, "B")) abort();
    const layout &lb = checked_layout(ob, op.tnsp_b ? SMEM_MN_MAJOR : SMEM_K_MAJOR, (uint32_t)op.n);
    for (int j = 0; j < op.n / 8; j++)
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 16; k++) b[j][i][k] = bf16_at(ob.start + lb.offset[16 * (8 * j + 2 * q + i) + k]);
}

/* The operand elements op reads for the calling thread's warp w, A's rows
 * 16w to 16w + 15 and the whole of B: lane 0 reads them at the issue and
 * at the wait (each time beside a sync of the warp), for the race check
 * (at pc) and for a digest of their bits, which the wait compares with the
 * issue's. */
uint64_t warp_reads(const wg_op &op, const emu_race_pos &pos, const void *pc) {
    const int w = (pos.tid % 128) / 32;
    uint64_t digest = 0xcbf29ce484222325ull;
    operand oa, ob;
    if (!op.a_regs) {
        if (!open_operand(&oa, op.desc_a, pos.block, pos.kernel, "A")) abort();
        const layout &la = checked_layout(oa, op.tnsp_a ? SMEM_MN_MAJOR : SMEM_K_MAJOR, 64);
        for (int r = 0; r < 16; r++)
            for (int k = 0; k < 16; k++) digest_read(oa.start + la.offset[16 * (16 * w + r) + k], pc, &digest);
    }
    if (!open_operand(&ob, op.desc_b, pos.block, pos.kernel, "B")) abort();
    const layout &lb = checked_layout(ob, op.tnsp_b ? SMEM_MN_MAJOR : SMEM_K_MAJOR, (uint32_t)op.n);
    for (int col = 0; col < op.n; col++)
        for (int k = 0; k < 16; k++) digest_read(ob.start + lb.offset[16 * col + k], pc, &digest);
    return digest;
}

/* The calling thread's share of op, its operands read now (the wait). */
void perform(const wg_op &op, const emu_race_pos &pos) {
    float a[2][16], b[32][2][16];
    operands(op, pos, a, b);
    for (int j = 0; j < op.n / 8; j++)
        for (int i = 0; i < 2; i++)
            for (int h = 0; h < 2; h++) {
                float acc = op.scale_d ? op.d[4 * j + 2 * h + i] : 0.0f;
                for (int k = 0; k < 16; k++) acc += a[h][k] * b[j][i][k];
                op.d[4 * j + 2 * h + i] = acc;
            }
}

wg_acc *acc_record(wg_thread *t, const float *d) {
    for (wg_acc &a : t->accs)
        if (a.d == d) return &a;
    t->accs.push_back(wg_acc{d, 0, 0, {}});
    return &t->accs.back();
}

void remember(wg_thread *t, const float *d, int n) {
    wg_acc *a = acc_record(t, d);
    a->n = n, a->fences = t->fences;
    memcpy(a->seen, d, sizeof(float) * (size_t)(n / 2));
}

/* The fence rules this emulation can see (top of file). */
void check_fence(wg_thread *t, const emu_race_pos &pos, const float *d, int n) {
    if (t->fences == 0) {
        emu_error("%s: thread %d: wgmma.mma_async without a wgmma.fence before it", pos.kernel, pos.tid);
        return;
    }
    for (const wg_acc &a : t->accs)
        if (a.d == d && a.fences == t->fences && a.n == n && memcmp(a.seen, d, sizeof(float) * (size_t)(n / 2)) != 0)
            emu_error("%s: thread %d: wgmma.mma_async on accumulators the thread wrote since the last wgmma, without a "
                      "wgmma.fence between", pos.kernel, pos.tid);
}

} // namespace

namespace emu {

uint32_t wgmma_shared_address(const void *p) {
    emu_race_pos pos;
    const char *base;
    if (!emu_race_position(&pos)) {
        emu_error("wgmma_shared_address outside a kernel");
        return 0;
    }
    if (emu_race_space(p, &base) != EMU_SPACE_SHARED) {
        emu_error("%s: wgmma_shared_address(%p): not in the block's shared memory", pos.kernel, p);
        abort();
    }
    if ((uintptr_t)p & 15) { /* a descriptor drops the low 4 bits: another address on the device */
        emu_error("%s: wgmma_shared_address(%p): not 16-byte aligned", pos.kernel, p);
        abort();
    }
    if (g_windows_block != pos.block) g_windows.clear(), g_windows_block = pos.block;
    const uintptr_t hi = (uintptr_t)p & ~(uintptr_t)(WINDOW - 1);
    bool known = false;
    for (uintptr_t w : g_windows) known |= w == hi;
    if (!known) g_windows.push_back(hi);
    return (uint32_t)((uintptr_t)p & (WINDOW - 1));
}

void wgmma_fence() {
    emu_race_pos pos;
    wg_thread *t = thread_state(&pos, "wgmma.fence");
    if (t) t->fences++;
}

void wgmma_commit() {
    emu_race_pos pos;
    wg_thread *t = thread_state(&pos, "wgmma.commit_group");
    if (t) t->committed++;
}

void wgmma_wait(int pending) {
    emu_race_pos pos;
    wg_thread *t = thread_state(&pos, "wgmma.wait_group");
    if (!t) return;
    if (pending < 0 || pending > 7) {
        emu_error("%s: wgmma.wait_group %d (0 to 7)", pos.kernel, pending);
        return;
    }
    const unsigned done = t->committed > (unsigned)pending ? t->committed - (unsigned)pending : 0;
    size_t kept = 0;
    for (size_t i = 0; i < t->ops.size(); i++) {
        const wg_op op = t->ops[i];
        if (op.group < done) {
            perform(op, pos);
            /* read until now: they must hold what they held at the issue (reported once a block) */
            if (pos.tid % 32 == 0 && warp_reads(op, pos, __builtin_return_address(0)) != op.digest && g_changed_block != pos.block) {
                g_changed_block = pos.block;
                emu_error("%s: warp %d: a wgmma operand in shared memory changed between its wgmma.mma_async and the "
                          "wgmma.wait_group that completes it (the device may read it any time between)", pos.kernel, pos.warp);
            }
            remember(t, op.d, op.n);
        } else t->ops[kept++] = op;
    }
    t->ops.resize(kept);
    syncwarp(0xffffffffu); /* .sync.aligned: the warp waits as one (and the race check joins its lanes here) */
}

void wgmma_mma(float *d, int n, uint64_t desc_a, const uint32_t *a, uint64_t desc_b, int scale_d, int tnsp_a, int tnsp_b) {
    emu_race_pos pos;
    wg_thread *t = thread_state(&pos, "wgmma.mma_async");
    if (!t) return;
    if (n < 8 || n > 256 || n % 8) {
        emu_error("%s: wgmma.mma_async with N = %d (8 to 256, a multiple of 8)", pos.kernel, n);
        abort();
    }
    /* .sync.aligned: the whole warpgroup, with the same descriptors and shape */
    const uint32_t shape = (uint32_t)n | (uint32_t)tnsp_a << 9 | (uint32_t)tnsp_b << 10 | (uint32_t)(a != NULL) << 11;
    const uint32_t mine[6] = {(uint32_t)desc_b, (uint32_t)(desc_b >> 32), a ? 0u : (uint32_t)desc_a,
                              a ? 0u : (uint32_t)(desc_a >> 32), shape, t->committed};
    uint32_t all[128 * 6];
    if (!warpgroup_gather(mine, 6, all)) return;
    for (int other = 0; other < 128; other++)
        if (memcmp(all + other * 6, mine, sizeof mine) != 0) {
            emu_error("%s: thread %d: wgmma.mma_async differs from warpgroup thread %d's (descriptors, shape or groups "
                      "committed): divergent", pos.kernel, pos.tid, other);
            break;
        }
    check_fence(t, pos, d, n);
    remember(t, d, n);
    wg_op op{d, n, desc_a, desc_b, a != NULL, {}, scale_d, tnsp_a, tnsp_b, t->committed, 0};
    if (a) { /* the warp's A fragments (mma.sync's m16n8k16 A layout): rows g, g + 8 */
        uint32_t frag[32 * 4];
        warp_gather(a, 4, frag);
        const int g = (pos.tid % 32) / 4;
        for (int q = 0; q < 4; q++) {
            const uint32_t *from = frag + (4 * g + q) * 4;
            for (int h = 0; h < 2; h++)
                for (int half = 0; half < 2; half++) {
                    op.a_rows[h][2 * q + half] = emu_bf16_half(from[h], half);
                    op.a_rows[h][2 * q + 8 + half] = emu_bf16_half(from[2 + h], half);
                }
        }
    }
    if (pos.tid % 32 == 0) op.digest = warp_reads(op, pos, __builtin_return_address(0)); /* read from the issue on */
    t->ops.push_back(op);
}

} // namespace emu

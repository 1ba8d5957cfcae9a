/* CUDA device-code emulation for g++ (tests/emu): force-included (-include)
 * before each .cu file of kernels/cuda, after tests/emu/prep.py has rewritten
 * its kernel launches k<<<g, b, s, st>>>(args) into
 *   ::emu::launch_at("k", ADDRESS, __FILE__, __LINE__, ::emu::cfg(g, b, s, st),
 *                    [](auto... a) { k(a...); }, args)
 * (ADDRESS: (const void *)&k when k has template arguments, else nullptr)
 * and its dynamic shared memory declarations (see dynamic_shared).
 * Each launch runs synchronously: blocks one at a time in a fixed order,
 * each thread of a block as a cooperative fiber (emu_runtime.cpp), so that
 * __syncthreads and the warp shuffles are real barriers. */
#ifndef EMU_CUDA_EMU_H
#define EMU_CUDA_EMU_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__
/* Static shared memory: one copy per kernel (blocks run one at a time), all
 * in one ELF section that the launcher fills with 0xff (NaN) before every
 * block, so reads of shared memory never written in this block show. */
#define __shared__ static __attribute__((section("emu_shared")))

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

/* Set by the scheduler before it resumes a thread's fiber. */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
constexpr int warpSize = 32;

namespace emu {
struct config {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
};
inline config cfg(dim3 g, dim3 b, size_t shmem = 0, cudaStream_t stream = 0) { return config{g, b, shmem, stream}; }

/* Runs body(ctx) once per thread of the grid (emu_runtime.cpp). kernel:
 * the kernel's address where prep.py can name it (a launch with template
 * arguments), else NULL; the opt-in to over 48 KiB of dynamic shared
 * memory (cudaFuncSetAttribute) is checked against it. */
void run_grid(const char *name, const void *kernel, const char *file, int line, const config &c, void (*body)(void *),
              void *ctx);
void syncthreads(const char *file, int line);
void syncwarp(unsigned mask);
/* Every lane of the warp publishes `bits`, then reads lane src's. */
uint64_t shfl(unsigned mask, uint64_t bits, int src_lane);
/* Every lane of the (full) warp publishes n <= EMU_GATHER_WORDS words, then
 * reads every lane's: all[lane * n + i]. One warp barrier, where n
 * shuffles would take n (the tensor-core stand-in's fragment exchange). */
#define EMU_GATHER_WORDS 8
void warp_gather(const uint32_t *words, int n, uint32_t *all);
/* The same exchange without the copy (32 lanes x n words a lane, which
 * dominated the tensor-core stand-in's time): lane l's words at
 * view[l * EMU_GATHER_WORDS + i], readable until this lane's next shuffle,
 * gather or sync. */
const uint32_t *warp_gather_view(const uint32_t *words, int n);
int lane_id();
/* ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16
 * (kernels/cuda/mma.cuh): lane 8 m + i gives the address of row i of
 * matrix m < count (16 bytes, 16-byte aligned, in the block's shared
 * memory; the other lanes' addresses are ignored, as from sm_80 on: sm_75
 * and older want valid ones there too), and lane 4 i + j gets in
 * r[m] the elements 2j and 2j + 1 of row i of matrix m, or with trans those
 * of column i (rows 2j and 2j + 1), the lower index in the low half. One
 * warp barrier, like the hardware's .sync. */
void ldmatrix(uint32_t *r, int count, bool trans, const void *row);
/* Every thread of the calling thread's warpgroup (warps 4g..4g+3, all 128
 * lanes present and live, else an error and false) publishes n <=
 * EMU_GATHER_WORDS words, then reads all 128 threads': all[t * n + i]. One
 * barrier over the warpgroup (wgmma's .sync.aligned). */
bool warpgroup_gather(const uint32_t *words, int n, uint32_t *all);
/* The wgmma stand-ins (tests/emu/emu_wgmma.cpp, kernels/cuda/wgmma.cuh):
 * a shared-memory pointer's 18-bit shared address, as a descriptor holds
 * it; wgmma.fence, commit_group and wait_group (the products of all but the
 * `pending` newest committed groups are computed then, reading shared
 * memory then); one m64nNk16 bf16 product into the thread's n / 2
 * accumulators d, A from a descriptor (a == NULL) or from the thread's four
 * A-fragment registers a. */
uint32_t wgmma_shared_address(const void *p);
void wgmma_fence();
void wgmma_commit();
void wgmma_wait(int pending);
void wgmma_mma(float *d, int n, uint64_t desc_a, const uint32_t *a, uint64_t desc_b, int scale_d, int tnsp_a, int tnsp_b);

/* The block's dynamic shared memory (the launch's shmem bytes, filled with
 * 0xff before every block): prep.py turns `extern __shared__ T name[];`
 * into `T *name = (T *)::emu::dynamic_shared();`. */
void *dynamic_shared();
/* cp.async (kernels/cuda/async_copy.cuh): each thread's copies wait in its
 * own queue, the open group first; commit closes it; wait(n) performs the
 * copies of all but the n newest committed groups; a copy of `bytes` takes
 * the first src_bytes from the source and zero-fills the rest (the ISA's
 * src-size; 0 reads nothing). An issued copy's
 * destination reads as NaN (0xff) until its group is waited for, and a
 * thread that exits with copies queued is an error. */
void cp_async(void *dst_shared, const void *src_global, unsigned bytes, unsigned src_bytes);
void cp_async_commit();
void cp_async_wait(int newest_pending);
/* Hopper (emu_tma.cpp; kernels/cuda/mbarrier.cuh and tma.cuh): mbarrier
 * phases as the PTX ISA defines them (a phase completes when its pending
 * arrivals and its transaction bytes are both zero); a try_wait that
 * fails gives way to the other threads. A bulk tensor load's destination
 * reads NaN from its issue; the load lands (reading global memory then,
 * zeros outside the tensor, the map's swizzle on the absolute shared
 * address) when a wait on its barrier needs it. Stores land at their
 * wait. Named barriers: `threads` threads meet at id; setmaxnreg: checked
 * warpgroup-uniform. `map` is a CUtensorMap (cuda.h). */
void mbar_init(uint64_t *bar, unsigned count);
uint64_t mbar_arrive(uint64_t *bar, unsigned expect_tx_bytes);
void mbar_expect_tx(uint64_t *bar, unsigned bytes);
bool mbar_try_wait(uint64_t *bar, unsigned parity);
void mbar_inval(uint64_t *bar);
void named_bar(int id, int threads, bool wait);
/* fence.proxy.async: the thread's earlier shared-memory stores become
 * visible to the async proxy (wgmma's operand reads, bulk stores); the race
 * check (EMU_RACE=1) reports such a read of a store no fence followed. */
void fence_proxy_async();
void setmaxnreg(int regs, bool inc);
/* Whether the emulated device runs sm_90a's code: yes, unless
 * EMU_NO_SM90A=1 stands in for a build without it (CUDA_SM=90). */
bool sm90a_code();
void tma_prefetch(const void *map);
void tma_load(void *dst, const void *map, uint64_t *bar, const int *coords, int rank);
void tma_store(const void *map, const void *src, const int *coords, int rank);
void tma_store_commit();
void tma_store_wait(int newest_pending);

template <typename F, typename Tuple>
struct kernel_call {
    F f;
    Tuple args;
    static void run(void *p) {
        kernel_call *k = (kernel_call *)p;
        Tuple mine = k->args; /* each thread gets its own copy of the parameters */
        std::apply(k->f, mine);
    }
};

/* Stream capture (emu_graph.cpp): whether work enqueued on s is to be
 * recorded into the graph being captured rather than run (false when no
 * capture is active; work on a stream that neither captures nor joined the
 * capture is an error there); and the recording of one node, run by each
 * launch of the graph. */
bool capturing(cudaStream_t s);
void capture_node(std::function<void()> node);
/* EMU_CAPTURE_FAIL=launch: a kernel launch during a capture is refused as a
 * GPU refuses an illegal call there (the launch error, the capture
 * invalidated), without an emulator error. */
bool capture_refuses_launch(cudaStream_t s);
/* EMU_LAZY=1 (emu_lazy.cpp): work enqueued on stream s waits in its queue
 * until the host synchronizes with it (true: taken); false: run it now. */
bool lazy_take(cudaStream_t s, std::function<void()> work);
bool lazy_active();

/* Counts a launch of kernel `name` (emu_kernel_launches, emu_hooks.h). */
void count_launch(const char *name);

/* A kernel launch runs at once, or during a capture becomes a graph node
 * holding its own copy of the arguments (as a GPU's graph keeps the
 * parameters it was captured with), or under EMU_LAZY=1 waits in its
 * stream's queue with such a copy. */
template <typename F, typename... A>
void launch_at(const char *name, const void *kernel, const char *file, int line, const config &c, F f, A... args) {
    using call = kernel_call<F, std::tuple<A...>>;
    if (capture_refuses_launch(c.stream)) return;
    count_launch(name);
    const bool captured = capturing(c.stream);
    if (captured || lazy_active()) {
        std::shared_ptr<call> k = std::make_shared<call>(call{f, std::tuple<A...>(args...)});
        std::function<void()> node = [name, kernel, file, line, c, k] { run_grid(name, kernel, file, line, c, &call::run, k.get()); };
        if (captured) capture_node(std::move(node));
        else lazy_take(c.stream, std::move(node));
        return;
    }
    call k{f, std::tuple<A...>(args...)};
    run_grid(name, kernel, file, line, c, &call::run, &k);
}

template <typename T>
inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of an unsupported type");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    return b;
}
template <typename T>
inline T from_bits(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof v);
    return v;
}
} // namespace emu

#define __syncthreads() ::emu::syncthreads(__FILE__, __LINE__)
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::emu::syncwarp(mask); }

/* Lane arithmetic as PTX shfl.sync defines it for a segment of `width` lanes. */
template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    int lane = ::emu::lane_id(), base = lane & ~(width - 1);
    return ::emu::from_bits<T>(::emu::shfl(mask, ::emu::to_bits(v), base + (src & (width - 1))));
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    int lane = ::emu::lane_id(), base = lane & ~(width - 1), src = lane ^ lane_mask;
    if (src < base || src >= base + width) src = lane;
    return ::emu::from_bits<T>(::emu::shfl(mask, ::emu::to_bits(v), src));
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    int lane = ::emu::lane_id(), base = lane & ~(width - 1), src = lane + (int)delta;
    if (src >= base + width) src = lane;
    return ::emu::from_bits<T>(::emu::shfl(mask, ::emu::to_bits(v), src));
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    int lane = ::emu::lane_id(), base = lane & ~(width - 1), src = lane - (int)delta;
    if (src < base) src = lane;
    return ::emu::from_bits<T>(::emu::shfl(mask, ::emu::to_bits(v), src));
}

/* Correctly rounded float operations that must never be fused: the asm
 * barrier keeps the compiler from contracting them into an FMA even when
 * the emulation is built with -mfma -ffp-contract=fast (EMU_FMA=1, which
 * imitates nvcc's default --fmad=true for the plain operators). */
#define EMU_OPAQUE(r) __asm__("" : "+x"(r))
static inline float __fmul_rn(float a, float b) { float r = a * b; EMU_OPAQUE(r); return r; }
static inline float __fadd_rn(float a, float b) { float r = a + b; EMU_OPAQUE(r); return r; }
static inline float __fsub_rn(float a, float b) { float r = a - b; EMU_OPAQUE(r); return r; }
static inline float __fdiv_rn(float a, float b) { float r = a / b; EMU_OPAQUE(r); return r; }
static inline float __fsqrt_rn(float a) { float r = sqrtf(a); EMU_OPAQUE(r); return r; }
static inline float __frcp_rn(float a) { float r = 1.0f / a; EMU_OPAQUE(r); return r; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dmul_rn(double a, double b) { double r = a * b; EMU_OPAQUE(r); return r; }
static inline double __dadd_rn(double a, double b) { double r = a + b; EMU_OPAQUE(r); return r; }
static inline double __ddiv_rn(double a, double b) { double r = a / b; EMU_OPAQUE(r); return r; }
/* Fast intrinsics: the device's are approximate; the exact ones stand in. */
/* (__expf and __logf: glibc declares functions of those names, the exact ones.) */
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float a) { return 1.0f / sqrtf(a); }

/* Stand-in for one warp's mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
 * (kernels/cuda/mma.cuh): the lanes exchange their fragments (one
 * warp_gather), then every lane reads the A rows and B columns its four
 * outputs need from the lanes that hold them in the PTX ISA's fragment
 * layout (g = lane / 4, t = lane % 4; see mma.cuh) and accumulates in
 * float32 in k order. A lane holding its fragment in the wrong places gets
 * the wrong product, as on the hardware. */
inline float emu_bf16_half(uint32_t r, int high) {
    uint32_t u = high ? (r & 0xffff0000u) : (r << 16);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
inline void emu_mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    const int lane = ::emu::lane_id(), g = lane >> 2, t = lane & 3;
    const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
    /* lane l's a[0..3], b[0..1]: at all + l * EMU_GATHER_WORDS */
    const uint32_t *all = ::emu::warp_gather_view(mine, 6);
    float A[2][16], B[2][16]; /* rows g, g+8 of A; columns 2t, 2t+1 of B (over k) */
    for (int s = 0; s < 4; s++) {
        const uint32_t *from_a = all + (4 * g + s) * EMU_GATHER_WORDS; /* rows g, g+8 at k = 2s, 2s+1 (a[0..1]) and 2s+8, 2s+9 (a[2..3]) */
        for (int i = 0; i < 2; i++)
            for (int h = 0; h < 2; h++) {
                A[i][2 * s + h] = emu_bf16_half(from_a[i], h);
                A[i][2 * s + 8 + h] = emu_bf16_half(from_a[2 + i], h);
            }
        for (int j = 0; j < 2; j++) {
            const uint32_t *from_b = all + (4 * (2 * t + j) + s) * EMU_GATHER_WORDS; /* column 2t+j at k = 2s, 2s+1 and 2s+8, 2s+9 */
            for (int h = 0; h < 2; h++) {
                B[j][2 * s + h] = emu_bf16_half(from_b[4], h);
                B[j][2 * s + 8 + h] = emu_bf16_half(from_b[5], h);
            }
        }
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            float acc = d[2 * i + j];
            for (int k = 0; k < 16; k++) acc += A[i][k] * B[j][k];
            d[2 * i + j] = acc;
        }
}

#include <cuda_bf16.h>

#endif

/* What the emulated runtime's files share (emu_runtime.cpp: memory, copies,
 * streams and events, the launcher, cuBLAS(Lt); emu_graph.cpp: stream
 * capture and graphs). Not for the code under test. */
#ifndef EMU_INTERNAL_H
#define EMU_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <string>

/* Prints "emu: ERROR ..." and counts it (exit status 3 at the end). */
void emu_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Sets the thread's last error to e and returns it. */
cudaError_t emu_fail(cudaError_t e);
/* The host's monotonic clock, in seconds (emu_runtime.cpp). */
double emu_now_s();
/* Runs the deferred copies from pinned memory (emu_runtime.cpp). */
void emu_flush_pending_copies();
bool emu_is_device(const void *p);
/* A fresh device allocation of `bytes` reading as EMU_MALLOC_FILL's bytes,
 * aligned to at least 256 bytes, or NULL; and its release
 * (emu_device_memory.cpp). */
void *emu_fresh_alloc(size_t bytes);
void emu_fresh_free(void *p, size_t bytes);
bool emu_is_pinned(const void *p);
/* p..p+bytes lies in one device allocation (else an error naming `what`). */
extern "C" int emu_check_device_range(const void *p, size_t bytes, const char *what);

/* During a capture, calls a GPU refuses while a capture is under way
 * (cudaStreamCaptureModeGlobal: synchronizing, querying events,
 * allocating, synchronous copies): reports `call`, invalidates the capture
 * and returns true; false when no capture is active. */
bool emu_capture_refuses(const char *call);
/* Events and stream capture (emu_graph.cpp): e recorded outside a capture
 * (or destroyed); whether e was last recorded during a capture (then
 * reporting `call` on it as an error); a stream's wait for e, which forks
 * s into the capture that recorded e, or joins the capturing stream back
 * to e's stream; false (an error, the capture invalidated) when a
 * capturing stream waits for an event recorded outside the capture. */
void emu_capture_event_recorded(cudaEvent_t e);
bool emu_capture_event_unusable(cudaEvent_t e, const char *call);
bool emu_capture_wait(cudaStream_t s, cudaEvent_t e);
/* Whether s is capturing (the capturing stream, or joined to it). */
bool emu_capture_has(cudaStream_t s);
/* Graphs and executable graphs alive whose nodes belong to `owner` (an
 * emulated NCCL communicator whose collectives were captured: NCCL 2.26 and
 * later wait in ncclCommDestroy and ncclCommAbort until there are none). */
int emu_graph_holds(const void *owner);
namespace emu {
/* As in cuda_emu.h: whether work on s is captured (s capturing or joined). */
bool capturing(cudaStream_t s);
/* A node that may stall (see emu_graph.cpp's emu_node), on the stream
 * capturing() last accepted. */
void capture_attempt_node(std::function<bool(bool may_stall)> node);
/* The graph being captured holds `owner` (see emu_graph_holds). */
void capture_hold(const void *owner);
/* cudaEventRecord during a capture on capturing stream s: `mark` as a node. */
void capture_record(cudaEvent_t e, cudaStream_t s, std::function<void()> mark);
} // namespace emu

/* Whether an event recorded on stream s now would complete before NCCL
 * work it should follow (emu_nccl.cpp: a group's collectives on s not yet
 * launched by ncclGroupEnd, or a nonblocking group end still in progress);
 * why says which. Without the emulated NCCL linked in, never (a weak
 * default in emu_runtime.cpp). */
bool emu_nccl_event_too_early(cudaStream_t s, const char **why);

/* ---- EMU_LAZY=1 (emu_lazy.cpp): stream work waits until the host needs it ---- */

/* EMU_LAZY is set and no queued work is running (work running from a queue
 * runs its own calls at once). */
bool emu_lazy_active();
void emu_lazy_stream_created(cudaStream_t s, bool nonblocking);
void emu_lazy_stream_destroyed(cudaStream_t s);
/* cudaEventRecord: `mark` runs when the stream reaches it. */
void emu_lazy_record(cudaEvent_t e, cudaStream_t s, std::function<void()> mark);
/* cudaStreamWaitEvent: s's later work waits for e's latest record. */
void emu_lazy_wait(cudaStream_t s, cudaEvent_t e);
/* Whether e's latest record had not run: it has now (its stream ran up to it). */
bool emu_lazy_event_pending(cudaEvent_t e);
/* Whether e's latest record is still queued (nothing runs). */
bool emu_lazy_event_queued(cudaEvent_t e);
/* cudaEventSynchronize: runs e's stream up to its record, waiting while it stalls. */
void emu_lazy_event_wait(cudaEvent_t e, const char *call);
/* Work that may stall: `attempt` runs when its stream reaches it and again
 * at every later try until it returns true; the stream goes no further
 * meanwhile. False (nothing queued) when the device is not lazy. */
bool emu_lazy_take_until(cudaStream_t s, std::function<bool()> attempt);
void emu_lazy_event_destroyed(cudaEvent_t e);
void emu_lazy_sync_stream(cudaStream_t s);
void emu_lazy_sync_device();
/* A synchronous copy or set: the legacy stream and the blocking streams. */
void emu_lazy_sync_legacy();

/* ---- the data-race check (emu_race.cpp; linked only into EMU_RACE=1
 * builds, whose kernel objects gcc instruments with -fsanitize=thread) ---- */

/* Where the running emulated thread stands in the happens-before order the
 * device gives: blocks are unordered within a launch (serials from
 * launch_first up) and ordered after earlier launches; within a block,
 * accesses are ordered by __syncthreads (bar: how many the thread has
 * passed) and, within a warp, by its warp-level syncs (shuffles,
 * __syncwarp, the tensor-core stand-in's exchange: warp_epoch). */
struct emu_race_pos {
    uint32_t block;        /* serial of the running block, from 1, over the whole run */
    uint32_t launch_first; /* serial of its launch's first block */
    uint32_t bar, warp_epoch;
    int tid, warp;
    const char *kernel;
};
/* False outside a kernel. */
bool emu_race_position(emu_race_pos *pos);
/* The block index (x, y, z) of block `serial` of the running launch. */
void emu_race_block_of(uint32_t serial, unsigned idx[3]);

enum emu_space { EMU_SPACE_OTHER, EMU_SPACE_SHARED, EMU_SPACE_DEVICE };
/* Which memory p is in (thread stacks and host globals: OTHER); *base: the
 * start of its shared region or device allocation. */
emu_space emu_race_space(const void *p, const char **base);

/* An access the instrumentation cannot see (cp.async: its source read and
 * destination write, emulated in emu_runtime.cpp), by the code at pc (the
 * kernel's call into the emulator). No-op unless emu_race.cpp is linked in. */
void emu_race_access(const void *p, size_t bytes, bool write, const void *pc);
/* A device allocation freed (cudaFree): the check drops what it kept of it. */
void emu_race_free(const void *base, size_t bytes);
/* The syncs that order a block's accesses besides __syncthreads, for the
 * check's vector clocks (emu_race_clock.cpp); no-ops unless it is linked in:
 * - a warp-level sync of lanes tids (one warp's, all that take part);
 * - a release into round `round` of the sync object at obj (an mbarrier's
 *   phase, a named barrier's generation), and an acquire of a round that
 *   completed: the acquiring thread has seen what the releasing ones had;
 * - the bulk loads on mbarrier obj that complete its phase `round`;
 * - a bulk load's write of [p, p + bytes), issued by the running thread (at
 *   pc) now, visible to those that acquire mbarrier obj's phase `round`. */
void emu_race_join(const int *tids, int n);
/* Whether emu_race.cpp is linked in (the weak default: false). */
bool emu_race_linked();
void emu_race_release(const void *obj, uint64_t round);
void emu_race_acquire(const void *obj, uint64_t round);
void emu_race_agent_release(const void *obj, uint64_t round);
void emu_race_async_write(const void *p, size_t bytes, const void *obj, uint64_t round, const void *pc);
/* The async proxy (wgmma's operands, a bulk store's box) reads [p, p +
 * bytes) for the running thread (at pc); fence.proxy.async by the running
 * thread: its earlier shared-memory stores become visible to such reads. */
void emu_race_async_read(const void *p, size_t bytes, const void *pc);
void emu_race_proxy_fence();
/* Blocks ordered by a fence and an atomic (emu_race_atomic.cpp, linked with
 * emu_race.cpp): how many gpu-scope fences ran so far (a write's place
 * among them), and whether a write of block wblk (thread wtid, barrier
 * interval wbar, after wseq fences) was released and acquired before the
 * access of `me`. */
uint32_t emu_race_fence_seq();
bool emu_race_published(uint32_t wblk, int wtid, uint32_t wbar, uint32_t wseq, const emu_race_pos &me);

/* ---- Hopper's mbarriers, bulk tensor copies, named barriers and
 * setmaxnreg (emu_tma.cpp), on the launcher of emu_runtime.cpp ---- */
namespace emu {
struct thread_pos {
    int tid, nthreads;
    uint32_t block; /* serial of the running block, from 1, over the whole run */
    const char *kernel;
};
/* Where the running thread is; false outside a kernel. */
bool thread_position(thread_pos *p);
/* The running thread gives way to the others (a wait that cannot finish
 * yet); a round where every thread only spins is a deadlock. */
void spin();
/* A state change another thread may be waiting for. */
void progress();
/* The start of the block's shared memory region that [p, p + bytes) lies in, or NULL. */
const char *shared_base(const void *p, size_t bytes);
/* The end of the region shared_base returned (base itself: NULL if it is not one). */
const char *shared_end(const char *base);
} // namespace emu
/* Called by the launcher: a thread returned (its bulk stores must be
 * waited for); the block ended (its bulk loads must have landed); and, for
 * a deadlock's message, what the block's threads wait for ("" if nothing
 * of emu_tma's). */
void emu_tma_thread_exit(int tid);
void emu_tma_block_end();
std::string emu_tma_waits();

#endif

/* What the emulated runtime's files share (emu_runtime.cpp: memory, copies,
 * streams and events, the launcher, cuBLAS(Lt); emu_graph.cpp: stream
 * capture and graphs). Not for the code under test. */
#ifndef EMU_INTERNAL_H
#define EMU_INTERNAL_H

#include <cuda_runtime_api.h>

/* Prints "emu: ERROR ..." and counts it (exit status 3 at the end). */
void emu_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Sets the thread's last error to e and returns it. */
cudaError_t emu_fail(cudaError_t e);
/* Runs the deferred copies from pinned memory (emu_runtime.cpp). */
void emu_flush_pending_copies();
bool emu_is_device(const void *p);
bool emu_is_pinned(const void *p);

/* During a capture, calls a GPU refuses while a capture is under way
 * (cudaStreamCaptureModeGlobal: synchronizing, querying events,
 * allocating, synchronous copies): reports `call`, invalidates the capture
 * and returns true; false when no capture is active. */
bool emu_capture_refuses(const char *call);

/* Whether an event recorded on stream s now would complete before NCCL
 * work it should follow (emu_nccl.cpp: a group's collectives on s not yet
 * launched by ncclGroupEnd, or a nonblocking group end still in progress);
 * why says which. Without the emulated NCCL linked in, never (a weak
 * default in emu_runtime.cpp). */
bool emu_nccl_event_too_early(cudaStream_t s, const char **why);

#endif

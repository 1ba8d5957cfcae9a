/* The CUDA backend's per-process state (tg_ops.ctx) and its error checks.
 * Usable from C (ops_cuda.c) and CUDA (.cu kernel files). */
#ifndef KERNELS_CUDA_CUDA_CTX_H
#define KERNELS_CUDA_CUDA_CTX_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stddef.h>

#include "kernels/ops.h"

#define CUDA_UPLOAD_SLOTS 4
#define CUDA_UPLOAD_SLOT_BYTES ((size_t)2 << 20)

/* kernels.attention (ops_cuda_attention): which attention forward runs;
 * the backward is mma.sync or wgmma on its own (cuda_ctx.wgmma_backward). */
typedef enum cuda_forward_kernel {
    CUDA_FORWARD_MMA = 0,   /* mma.sync, every device */
    CUDA_FORWARD_WGMMA,     /* Hopper: the cp.async wgmma forward */
    CUDA_FORWARD_WGMMA_WS,  /* Hopper: the TMA-pipelined, warp-specialized forward */
} cuda_forward_kernel;

typedef struct cuda_ctx {
    int device;
    int sm_count, cc_major, cc_minor;
    int shared_optin;             /* most shared memory a block may opt in to, bytes */
    int sm90a_code;               /* 1: the code the device runs has sm_90a's features (cuda_sm90a_code) */
    /* kernels.attention: the wgmma kernels run where they have an instance */
    cuda_forward_kernel attention_forward;
    int wgmma_backward;           /* 1: the wgmma backward (Hopper); 0: mma.sync */
    cudaStream_t stream;          /* every kernel and copy runs here, in order */
    /* kernels.dw_overlap (matmul.cu): a weight gradient's product on the
     * side stream, forked from `stream` before the call's input-gradient
     * product and joined back into it before the call returns, so that
     * to every other op the call is still one step of the stream. */
    int dw_overlap;
    cudaStream_t side_stream;     /* NULL until dw_overlap is first asked for */
    cudaEvent_t side_fork, side_join;
    cudaEvent_t timer_start, timer_stop; /* timer_begin / timer_end_ms */
    cublasLtHandle_t lt;
    struct cuda_lt_plans *lt_plans; /* cuBLASLt plans by shape, built once each (lt_plan.cu) */
    void *lt_workspace;           /* cuBLASLt's scratch (counted in mem_peak) */
    size_t lt_workspace_bytes;
    /* Device scratch any launcher may use within one call (calls run in
     * stream order, so they never overlap): partial sums of deterministic
     * reductions, sort buffers. Fixed size, allocated once. */
    void *scratch;
    size_t scratch_bytes;
    void *staging;                /* pinned host buffer for small transfers */
    size_t staging_bytes;
    /* Uploads up to CUDA_UPLOAD_SLOT_BYTES (a micro-batch's tokens) go
     * through a ring of pinned slots without waiting: the host copies into
     * the next slot and queues its copy; it waits only when that slot's
     * previous copy, CUDA_UPLOAD_SLOTS uploads ago, has not run yet. */
    void *upload_ring;
    cudaEvent_t upload_done[CUDA_UPLOAD_SLOTS];
    int upload_next;
    cudaGraphExec_t step_graph;   /* the captured step (graph.cu), NULL until one is */
    size_t baseline_used;         /* device bytes in use before our first allocation */
    size_t peak_used;             /* highest device bytes in use seen since (cudaMemGetInfo) */
} cuda_ctx;

static inline cuda_ctx *cuda_ctx_of(tg_o o) { return (cuda_ctx *)o->ctx; }

/* Fixed device allocations of the backend, counted in the memory budget. */
#define CUDA_LT_WORKSPACE_BYTES OPS_CUDA_LT_WORKSPACE_BYTES
#define CUDA_SCRATCH_BYTES OPS_CUDA_SCRATCH_BYTES
/* Most cuBLASLt plans a context keeps (host memory; past it, products build
 * their plan on every call). */
#define CUDA_LT_PLANS_MAX OPS_CUDA_LT_PLANS

#ifdef __cplusplus
extern "C" {
#endif
/* Print "train_gpt: error: <file>:<line>: <what>: <CUDA's message>" and exit
 * 1. Kernels run asynchronously, so a failure may surface at a later call;
 * the message says so. */
void cuda_fail(cudaError_t err, const char *what, const char *file, int line) __attribute__((noreturn));
void cublas_fail(int status, const char *what, const char *file, int line) __attribute__((noreturn));
/* The context's empty table of cuBLASLt plans (NULL when out of host
 * memory), and its release with every plan in it (lt_plan.cu). */
struct cuda_lt_plans *cuda_lt_plans_create(void);
void cuda_lt_plans_destroy(struct cuda_lt_plans *plans);
/* *has = 1 where this build's code for the current device has sm_90a's
 * features (the Hopper kernels run), else 0; waits for the stream
 * (arch_probe.cu). */
cudaError_t cuda_sm90a_code(cudaStream_t stream, int *has);
#ifdef __cplusplus
}
#endif

#define CUDA_CHECK(call)                                                   \
    do {                                                                   \
        cudaError_t err_ = (call);                                         \
        if (err_ != cudaSuccess) cuda_fail(err_, #call, __FILE__, __LINE__); \
    } while (0)
#define CUBLAS_CHECK(call)                                                         \
    do {                                                                           \
        int st_ = (int)(call);                                                     \
        if (st_ != 0) cublas_fail(st_, #call, __FILE__, __LINE__);                 \
    } while (0)
/* After a kernel launch: launch-configuration errors surface here. */
#define CUDA_LAUNCHED(what) CUDA_CHECK(cudaGetLastError())

#endif

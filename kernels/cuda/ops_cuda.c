/* The CUDA backend's instance: device selection, its stream and cuBLASLt
 * handle, device memory, transfers (with a pinned staging buffer for the
 * communicators), measured peak memory, and the table of launchers
 * (kernels/cuda/kernels.h). Host C. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "kernels/ops.h"

#define STAGING_BYTES ((size_t)8 << 20)

/* Whether err is CUDA refusing a call inside a stream capture. */
static bool capture_refusal(cudaError_t err) {
    return err == cudaErrorStreamCaptureUnsupported || err == cudaErrorStreamCaptureInvalidated ||
           err == cudaErrorStreamCaptureImplicit;
}

void cuda_fail(cudaError_t err, const char *what, const char *file, int line) {
    fprintf(stderr, "train_gpt: error: %s:%d: %s failed: %s (%s); %s\n", file, line, what, cudaGetErrorString(err),
            cudaGetErrorName(err),
            capture_refusal(err) ? "the op cannot be part of the step's CUDA graph: train.cuda_graph=false runs the steps "
                                   "op by op"
                                 : "kernels run asynchronously, so the failing one may be an earlier launch "
                                   "(CUDA_LAUNCH_BLOCKING=1 pins it down)");
    exit(1);
}

void cublas_fail(int status, const char *what, const char *file, int line) {
    fprintf(stderr, "train_gpt: error: %s:%d: %s failed with cuBLAS status %d\n", file, line, what, status);
    exit(1);
}

int ops_cuda_compiled(void) { return 1; }

int ops_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return n;
}

/* ---- measured memory ---- */

/* Device bytes in use now (the whole device: other processes on it count). */
static size_t device_used(void) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return total_b - free_b;
}

static void note_usage(cuda_ctx *x) {
    size_t used = device_used();
    if (used > x->peak_used) x->peak_used = used;
}

static size_t cuda_mem_peak(tg_o o) {
    cuda_ctx *x = cuda_ctx_of(o);
    note_usage(x);
    return x->peak_used > x->baseline_used ? x->peak_used - x->baseline_used : 0;
}

/* ---- memory ---- */

static void *cuda_alloc(tg_o o, size_t bytes, const char *what) {
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total_b);
        fprintf(stderr, "train_gpt: error: out of device memory allocating %zu bytes (%.1f MiB) for %s on %s: %.1f MiB of "
                        "%.1f MiB free (%s); see the memory budget printed at start, or try --plan\n",
                bytes, bytes / 1048576.0, what, o->device, free_b / 1048576.0, total_b / 1048576.0, cudaGetErrorString(err));
        exit(1);
    }
    note_usage(cuda_ctx_of(o));
    return p;
}

static void cuda_free(tg_o o, void *p) {
    (void)o;
    if (p) CUDA_CHECK(cudaFree(p));
}

/* The caller may reuse src at once. Small uploads (tokens, every
 * micro-batch) return without waiting for the device; large ones (weights,
 * at start) wait for their copy. */
static void cuda_upload(tg_o o, void *dst, const void *src, size_t bytes) {
    cuda_ctx *x = cuda_ctx_of(o);
    if (bytes > CUDA_UPLOAD_SLOT_BYTES) {
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, x->stream));
        CUDA_CHECK(cudaStreamSynchronize(x->stream));
        return;
    }
    const int slot = x->upload_next;
    x->upload_next = (slot + 1) % CUDA_UPLOAD_SLOTS;
    char *pinned = (char *)x->upload_ring + (size_t)slot * CUDA_UPLOAD_SLOT_BYTES;
    CUDA_CHECK(cudaEventSynchronize(x->upload_done[slot])); /* the slot's last copy has run */
    memcpy(pinned, src, bytes);
    CUDA_CHECK(cudaMemcpyAsync(dst, pinned, bytes, cudaMemcpyHostToDevice, x->stream));
    CUDA_CHECK(cudaEventRecord(x->upload_done[slot], x->stream));
}

static void cuda_download(tg_o o, void *dst, const void *src, size_t bytes) {
    cuda_ctx *x = cuda_ctx_of(o);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, x->stream));
    CUDA_CHECK(cudaStreamSynchronize(x->stream));
}

static void cuda_zero(tg_o o, void *p, size_t bytes) { CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, cuda_ctx_of(o)->stream)); }

static void cuda_download_floats(tg_o o, float *dst, const void *src, size_t n) {
    if (o->act == TG_F32) {
        cuda_download(o, dst, src, n * sizeof(float));
        return;
    }
    uint16_t *raw = malloc(n * sizeof(uint16_t) + 1);
    if (!raw) {
        fprintf(stderr, "train_gpt: error: out of host memory for %zu logits\n", n);
        exit(1);
    }
    cuda_download(o, raw, src, n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) dst[i] = tg_bf16_to_f32(raw[i]);
    free(raw);
}

static void cuda_timer_begin(tg_o o) {
    cuda_ctx *x = cuda_ctx_of(o);
    CUDA_CHECK(cudaEventRecord(x->timer_start, x->stream));
}

static double cuda_timer_end_ms(tg_o o) {
    cuda_ctx *x = cuda_ctx_of(o);
    float ms = 0.0f;
    CUDA_CHECK(cudaEventRecord(x->timer_stop, x->stream));
    CUDA_CHECK(cudaEventSynchronize(x->timer_stop));
    CUDA_CHECK(cudaEventElapsedTime(&ms, x->timer_start, x->timer_stop));
    return ms;
}

/* ---- events for the per-op timer (kernels/timed.h) ---- */

static void *cuda_event_create(tg_o o) {
    (void)o;
    cudaEvent_t ev;
    CUDA_CHECK(cudaEventCreate(&ev));
    return ev;
}

static void cuda_event_record(tg_o o, void *ev) { CUDA_CHECK(cudaEventRecord((cudaEvent_t)ev, cuda_ctx_of(o)->stream)); }

static double cuda_event_elapsed_ms(tg_o o, void *start, void *stop) {
    (void)o;
    float ms = 0.0f;
    CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)stop));
    CUDA_CHECK(cudaEventElapsedTime(&ms, (cudaEvent_t)start, (cudaEvent_t)stop));
    return ms;
}

static void cuda_event_destroy(tg_o o, void *ev) {
    (void)o;
    cudaEventDestroy((cudaEvent_t)ev);
}

/* ---- transfers for the communicators: through the pinned staging buffer,
 * in chunks; cudaMemcpyDefault, so host buffers work as well ---- */

static void staged_to_host(void *ctx, void *host, const void *buf, size_t bytes) {
    cuda_ctx *x = ctx;
    for (size_t a = 0; a < bytes; a += x->staging_bytes) {
        size_t cc = bytes - a < x->staging_bytes ? bytes - a : x->staging_bytes;
        CUDA_CHECK(cudaMemcpyAsync(x->staging, (const char *)buf + a, cc, cudaMemcpyDefault, x->stream));
        CUDA_CHECK(cudaStreamSynchronize(x->stream));
        memcpy((char *)host + a, x->staging, cc);
    }
}

static void staged_from_host(void *ctx, void *buf, const void *host, size_t bytes) {
    cuda_ctx *x = ctx;
    for (size_t a = 0; a < bytes; a += x->staging_bytes) {
        size_t cc = bytes - a < x->staging_bytes ? bytes - a : x->staging_bytes;
        memcpy(x->staging, (const char *)host + a, cc);
        CUDA_CHECK(cudaMemcpyAsync((char *)buf + a, x->staging, cc, cudaMemcpyDefault, x->stream));
        CUDA_CHECK(cudaStreamSynchronize(x->stream)); /* before the staging buffer is refilled */
    }
}

/* Synchronous, as either side may be a host buffer the caller reads next. */
static void device_copy(void *ctx, void *dst, const void *src, size_t bytes) {
    cuda_ctx *x = ctx;
    if (dst == src) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, x->stream));
    CUDA_CHECK(cudaStreamSynchronize(x->stream));
}

/* ---- the device ---- */

static double cuda_peak_tflops(tg_o o) { return ops_peak_tflops(o->device, o->act); }

static void cuda_destroy(tg_ops *o) {
    cuda_ctx *x = o->ctx;
    if (x) {
        cudaStreamSynchronize(x->stream);
        if (x->step_graph) cudaGraphExecDestroy(x->step_graph);
        cudaFree(x->lt_workspace);
        cudaFree(x->scratch);
        cudaFreeHost(x->staging);
        cudaFreeHost(x->upload_ring);
        for (int i = 0; i < CUDA_UPLOAD_SLOTS; i++)
            if (x->upload_done[i]) cudaEventDestroy(x->upload_done[i]);
        cuda_lt_plans_destroy(x->lt_plans);
        if (x->lt) cublasLtDestroy(x->lt);
        if (x->timer_start) cudaEventDestroy(x->timer_start);
        if (x->timer_stop) cudaEventDestroy(x->timer_stop);
        if (x->side_stream) {
            cudaStreamSynchronize(x->side_stream);
            cudaStreamDestroy(x->side_stream);
        }
        if (x->side_fork) cudaEventDestroy(x->side_fork);
        if (x->side_join) cudaEventDestroy(x->side_join);
        if (x->stream) cudaStreamDestroy(x->stream);
        free(x);
    }
    free(o);
}

static const tg_ops CUDA_TABLE = {
    .name = "cuda",
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .zero = cuda_zero,
    .cast_params = cuda_cast_params,
    .download_floats = cuda_download_floats,
    .timer_begin = cuda_timer_begin,
    .timer_end_ms = cuda_timer_end_ms,
    .mem_peak = cuda_mem_peak,
    .peak_tflops = cuda_peak_tflops,
    .destroy = cuda_destroy,
    .event_create = cuda_event_create,
    .event_record = cuda_event_record,
    .event_elapsed_ms = cuda_event_elapsed_ms,
    .event_destroy = cuda_event_destroy,
    .encoder_forward = cuda_encoder_forward,
    .encoder_backward = cuda_encoder_backward,
    .layernorm_forward = cuda_layernorm_forward,
    .layernorm_backward = cuda_layernorm_backward,
    .matmul_forward = cuda_matmul_forward,
    .matmul_forward_gelu = cuda_matmul_forward_gelu,
    .matmul_backward = cuda_matmul_backward,
    .matmul_backward_dgelu = cuda_matmul_backward_dgelu,
    .lmhead_forward = cuda_lmhead_forward,
    .lmhead_backward = cuda_lmhead_backward,
    .attention_forward = cuda_attention_forward,
    .attention_backward = cuda_attention_backward,
    .gelu_forward = cuda_gelu_forward,
    .gelu_backward = cuda_gelu_backward,
    .bias_residual_add = cuda_bias_residual_add,
    .bias_residual_layernorm = cuda_bias_residual_layernorm,
    .dropout = cuda_dropout,
    .bias_backward = cuda_bias_backward,
    .position_forward = cuda_position_forward,
    .position_backward = cuda_position_backward,
    .xent_partial = cuda_xent_partial,
    .xent_rescale = cuda_xent_rescale,
    .xent_finish = cuda_xent_finish,
    .xent_fused = cuda_xent_fused,
    .loss_accumulate = cuda_loss_accumulate,
    .loss_finish = cuda_loss_finish,
    .grad_sumsq = cuda_grad_sumsq,
    .grad_clip_factor = cuda_grad_clip_factor,
    .adamw = cuda_adamw,
    .graph_capture_begin = cuda_graph_capture_begin,
    .graph_capture_end = cuda_graph_capture_end,
    .graph_launch = cuda_graph_launch,
    .graph_release = cuda_graph_release,
};

/* Fails with CUDA's message, for the set-up steps that may fail in the
 * field (no device, no memory) rather than through a bug. */
static int setup_check(cudaError_t err, const char *what, tg_err *e) {
    if (err == cudaSuccess) return 0;
    cudaGetLastError();
    return tg_fail(e, "CUDA: %s: %s", what, cudaGetErrorString(err));
}

/* Stream, handles and fixed buffers of the context on the current device. */
static int open_context(cuda_ctx *x, tg_err *e) {
    if (setup_check(cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking), "creating a stream", e) ||
        setup_check(cudaEventCreate(&x->timer_start), "creating an event", e) ||
        setup_check(cudaEventCreate(&x->timer_stop), "creating an event", e))
        return -1;
    x->baseline_used = device_used();
    x->peak_used = x->baseline_used;
    if (cublasLtCreate(&x->lt) != CUBLAS_STATUS_SUCCESS) return tg_fail(e, "cuBLASLt: cannot create a handle");
    if (!(x->lt_plans = cuda_lt_plans_create())) return tg_fail(e, "out of host memory for the cuBLASLt plan table");
    x->lt_workspace_bytes = CUDA_LT_WORKSPACE_BYTES;
    x->scratch_bytes = CUDA_SCRATCH_BYTES;
    x->staging_bytes = STAGING_BYTES;
    if (setup_check(cudaMalloc(&x->lt_workspace, x->lt_workspace_bytes), "allocating the cuBLASLt workspace", e) ||
        setup_check(cudaMalloc(&x->scratch, x->scratch_bytes), "allocating the kernels' scratch", e) ||
        setup_check(cudaMallocHost(&x->staging, x->staging_bytes), "allocating pinned staging memory", e) ||
        setup_check(cudaMallocHost(&x->upload_ring, CUDA_UPLOAD_SLOTS * CUDA_UPLOAD_SLOT_BYTES),
                    "allocating pinned upload memory", e))
        return -1;
    for (int i = 0; i < CUDA_UPLOAD_SLOTS; i++)
        if (setup_check(cudaEventCreateWithFlags(&x->upload_done[i], cudaEventDisableTiming), "creating an event", e))
            return -1;
    note_usage(x);
    return 0;
}

tg_ops *ops_cuda_create(int local_rank, tg_dtype act, tg_err *e) {
    const int count = ops_cuda_device_count();
    if (count == 0) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        tg_fail(e, "no CUDA device is visible%s%s%s (nvidia-smi lists what the driver sees)",
                vis ? " (CUDA_VISIBLE_DEVICES=" : "", vis ? vis : "", vis ? ")" : "");
        return NULL;
    }
    const int device = local_rank % count;
    struct cudaDeviceProp prop;
    if (setup_check(cudaSetDevice(device), "selecting the device", e) ||
        setup_check(cudaGetDeviceProperties(&prop, device), "reading the device's properties", e))
        return NULL;
    if (prop.major < 8) {
        tg_fail(e, "device %d (%s) has compute capability %d.%d; train_gpt needs 8.0 or newer (bf16)", device, prop.name,
                prop.major, prop.minor);
        return NULL;
    }
    /* the context exists before the baseline is read */
    if (setup_check(cudaFree(NULL), "creating the context", e)) return NULL;
    tg_ops *o = calloc(1, sizeof *o);
    cuda_ctx *x = calloc(1, sizeof *x);
    if (!o || !x) {
        free(o);
        free(x);
        tg_fail(e, "out of host memory creating the CUDA backend");
        return NULL;
    }
    *o = CUDA_TABLE;
    o->ctx = x;
    o->act = act;
    x->device = device;
    x->sm_count = prop.multiProcessorCount;
    x->cc_major = prop.major;
    x->cc_minor = prop.minor;
    x->shared_optin = (int)prop.sharedMemPerBlockOptin;
    snprintf(o->device, sizeof o->device, "device %d: %s (sm_%d%d, %d SMs, %.1f GiB)", device, prop.name, prop.major,
             prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0);
    if (open_context(x, e) ||
        (prop.major == 9 && prop.minor == 0 &&
         setup_check(cuda_sm90a_code(x->stream, &x->sm90a_code), "asking which machine code the device runs", e))) {
        cuda_destroy(o);
        return NULL;
    }
    o->workspace_bytes = x->lt_workspace_bytes + x->scratch_bytes;
    o->mem = (comm_memory){x, staged_to_host, staged_from_host, device_copy, 1, x->stream, cuda_graphs_drop};
    return o;
}

/* 0 when kernel (wgmma or wgmma_ws) can run here; else fails, naming what is missing. */
static int wgmma_unavailable(const tg_ops *o, const char *kernel, int hs, double dropout, tg_err *e) {
    const cuda_ctx *x = cuda_ctx_of(o);
    /* the config's reasons first: they hold on every device */
    if (o->act != TG_BF16)
        return tg_fail(e, "%s runs bf16 activations only; train.precision gives float32 (use mma or auto)", kernel);
    if (!cuda_attention_wgmma_head_size(hs))
        return tg_fail(e, "%s has head sizes 64, 96 and 128; model.n_embd / model.n_head is %d (use mma or auto)", kernel, hs);
    if (dropout > 0.0) return tg_fail(e, "%s runs without dropout; model.dropout is %g (use mma or auto)", kernel, dropout);
    /* the wgmma kernels are sm_90a machine code: other devices, and builds without it, would trap */
    if (x->cc_major != 9 || x->cc_minor != 0)
        return tg_fail(e, "%s needs a device of compute capability 9.0 (H100, H200); %s has %d.%d (use mma or auto)", kernel,
                       o->device, x->cc_major, x->cc_minor);
    if (!x->sm90a_code)
        return tg_fail(e, "%s needs sm_90a machine code, which this build of train_gpt lacks for %s (make GPU=1 builds it, as "
                          "does CUDA_SM=90a; CUDA_SM=90 does not) (use mma or auto)",
                       kernel, o->device);
    return 0;
}

/* kernels.attention = auto where the wgmma kernels can run: per head size,
 * what an H200 measured faster a step (results/gpu/2026-11-30_h200, the op
 * tables with kernels.attention = mma and wgmma_ws). Head size 64 (GPT-2
 * 124M): forward 1.87 ms wgmma_ws against 1.89 mma, backward 4.73 wgmma
 * against 5.73. Head size 96 (the 1.2B model, batch 8): forward 6.31 ms
 * wgmma_ws against 5.80 mma, so mma; backward 17.8 wgmma against 21.1.
 * Head size 128 has not been timed: mma, the reference, until it is. */
static void choose_measured_fastest(cuda_ctx *x, int hs) {
    x->attention_forward = hs == 64 ? CUDA_FORWARD_WGMMA_WS : CUDA_FORWARD_MMA;
    x->wgmma_backward = hs == 64 || hs == 96;
}

int ops_cuda_attention(const tg_ops *o, const char *kernel, int hs, double dropout, tg_err *e) {
    cuda_ctx *x = cuda_ctx_of(o);
    x->attention_forward = CUDA_FORWARD_MMA;
    x->wgmma_backward = 0;
    if (strcmp(kernel, "mma") == 0) return 0;
    if (strcmp(kernel, "auto") == 0) {
        tg_err why; /* auto falls back to mma where wgmma cannot run: not an error */
        if (!wgmma_unavailable(o, kernel, hs, dropout, &why)) choose_measured_fastest(x, hs);
        return 0;
    }
    const int ws = strcmp(kernel, "wgmma_ws") == 0;
    if (!ws && strcmp(kernel, "wgmma") != 0)
        return tg_fail(e, "attention kernel \"%s\": expected auto, mma, wgmma or wgmma_ws", kernel);
    if (wgmma_unavailable(o, kernel, hs, dropout, e)) return 1;
    x->attention_forward = ws ? CUDA_FORWARD_WGMMA_WS : CUDA_FORWARD_WGMMA;
    x->wgmma_backward = 1;
    return 0;
}

int ops_cuda_dw_overlap(const tg_ops *o, int on, tg_err *e) {
    cuda_ctx *x = cuda_ctx_of(o);
    x->dw_overlap = 0;
    if (!on) return 0;
    if (!x->side_stream && setup_check(cudaStreamCreateWithFlags(&x->side_stream, cudaStreamNonBlocking),
                                       "creating the weight gradients' stream", e))
        return -1;
    /* ordering only: no timing, so the fork and join cost no timestamps */
    if ((!x->side_fork && setup_check(cudaEventCreateWithFlags(&x->side_fork, cudaEventDisableTiming), "creating an event", e)) ||
        (!x->side_join && setup_check(cudaEventCreateWithFlags(&x->side_join, cudaEventDisableTiming), "creating an event", e)))
        return -1;
    x->dw_overlap = 1;
    return 0;
}

void ops_cuda_attention_describe(const tg_ops *o, char *out, size_t size) {
    static const char *const forward[] = {"mma", "wgmma", "wgmma_ws"}; /* by cuda_forward_kernel */
    const cuda_ctx *x = cuda_ctx_of(o);
    snprintf(out, size, "forward %s, backward %s", forward[x->attention_forward], x->wgmma_backward ? "wgmma" : "mma");
}

/* The step as one CUDA graph (tg_ops.graph_capture_begin/end, graph_launch):
 * stream capture of everything the ops enqueue on the context's stream (and
 * on the NCCL communicators' streams, which fork off it and join back:
 * parallel/comm.h, comm_capture_begin), instantiated once, then launched as
 * a single unit each step, which saves the host the per-kernel launch cost
 * of a few hundred launches. Host code. */
#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"

/* A refusal by CUDA, as the caller's error (not left as the thread's last
 * error, where the next launch check would take it for its own). */
static int graph_fail(cudaError_t err, const char *what, tg_err *e) {
    (void)cudaGetLastError();
    return tg_fail(e, "CUDA graph: %s failed: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

int cuda_graph_capture_begin(tg_o o, tg_err *e) {
    /* Thread-local mode: a call of this thread that could not be captured
     * (a synchronization, an allocation) fails instead of silently breaking
     * the recording; threads of NCCL's own (each call of a nonblocking
     * communicator runs on one, as does a network plugin) are left alone, as NCCL advises
     * for processes with threads of their own. The trainer's CUDA calls are
     * all on this thread. */
    const cudaError_t err = cudaStreamBeginCapture(cuda_ctx_of(o)->stream, cudaStreamCaptureModeThreadLocal);
    return err == cudaSuccess ? 0 : graph_fail(err, "cudaStreamBeginCapture", e);
}

/* Destroys the step's graph, if any, without waiting for its launches:
 * CUDA frees an executable graph still running once it ends, and a launch
 * whose collective waits for a rank that died would keep a wait here from
 * ever returning. */
static void forget_step_graph(cuda_ctx *x) {
    if (x->step_graph) cudaGraphExecDestroy(x->step_graph);
    x->step_graph = NULL;
}

int cuda_graph_capture_end(tg_o o, tg_err *e) {
    cuda_ctx *x = cuda_ctx_of(o);
    cudaGraph_t graph = NULL;
    cudaError_t err = cudaStreamEndCapture(x->stream, &graph);
    if (err != cudaSuccess) return graph_fail(err, "cudaStreamEndCapture", e);
    cudaGraphExec_t exec = NULL;
    err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph); /* the executable graph holds what it needs */
    if (err != cudaSuccess) return graph_fail(err, "cudaGraphInstantiate", e);
    forget_step_graph(x);
    x->step_graph = exec;
    return 0;
}

void cuda_graph_release(tg_o o) { forget_step_graph(cuda_ctx_of(o)); }

/* Before NCCL's abort (comm_memory.drop_graphs), which waits until no graph
 * holds the communicator's collectives (NCCL 2.26 on): a capture under way
 * ends, its graph discarded, and the step's graph goes. Its launch still
 * running ends when the abort stops the collectives it waits for. */
void cuda_graphs_drop(void *ctx) {
    cuda_ctx *x = (cuda_ctx *)ctx;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(x->stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
        cudaGraph_t partial = NULL;
        if (cudaStreamEndCapture(x->stream, &partial) == cudaSuccess) cudaGraphDestroy(partial);
    }
    (void)cudaGetLastError(); /* a refused end is no error of the next launch's */
    forget_step_graph(x);
}

int cuda_graph_launch(tg_o o, tg_err *e) {
    cuda_ctx *x = cuda_ctx_of(o);
    if (!x->step_graph) return tg_fail(e, "CUDA graph: launch before any step was captured");
    const cudaError_t err = cudaGraphLaunch(x->step_graph, x->stream);
    return err == cudaSuccess ? 0 : graph_fail(err, "cudaGraphLaunch", e);
}

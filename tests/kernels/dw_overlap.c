/* Kernel family: kernels.dw_overlap (kernels/cuda/matmul.cu), the weight
 * gradient's product on a second stream, beside the input gradient's,
 * against the same calls with the two in turn. No CPU part (the option
 * is the CUDA backend's; the products' CPU checks are matmul.c's). */
#include <stdio.h>
#include <stdlib.h>

#include "tests/kernels/check.h"

#ifdef TG_CUDA
#include "kernels/ops.h"
#include "tests/kernels/twin.h"
#ifdef TG_CUDA_EMU
#include "tests/emu/emu_hooks.h"
#endif

/* Sets the option on e's CUDA backend; a failure is a failed check. */
static int set_overlap(env *e, int on) {
    tg_err err;
    if (ops_cuda_dw_overlap(e->gpu, on, &err) == 0) return 1;
    check_true(e, 0, on ? "dw_overlap_on" : "dw_overlap_off", err.msg);
    return 0;
}

/* Whether the GPU sides of a and b hold the same bytes (NULL twins: yes). */
static int same_gpu_bits(env *e, twin a, twin b) {
    if (!a.g) return 1;
    void *want = gpu_bytes(e, a);
    const int same = gpu_holds(e, b, want);
    free(want);
    return same;
}

/* One call's outputs: dinp (or dpre), dw and dbias, the last two holding
 * the same random values before the call (they accumulate). */
typedef struct outs {
    twin dinp, dw, dbias;
} outs;

static outs outs_like(env *e, const outs *first, size_t n_dinp) {
    outs o = {tw_out(e, ACT, n_dinp), tw_ref(e, first->dw), tw_ref(e, first->dbias)};
    return o;
}

static void outs_free(env *e, outs *o) {
    tw_free(e, o->dinp);
    tw_free(e, o->dw);
    tw_free(e, o->dbias);
}

static void expect_same(env *e, const outs *a, const outs *b, int use_dinp, int use_dw, int use_dbias, const char *name) {
    const int same = (!use_dinp || same_gpu_bits(e, a->dinp, b->dinp)) && (!use_dw || same_gpu_bits(e, a->dw, b->dw)) &&
                     (!use_dbias || same_gpu_bits(e, a->dbias, b->dbias));
    check_true(e, same, name, "(against the same call with its products in turn)");
}

/* The inputs of one shape's calls, and one of the calls: matmul_backward
 * (dgelu 0) with each of dinp, dw and dbias or not, or
 * matmul_backward_dgelu (dgelu 1, dinp and dw always) with its bias
 * gradient or not. */
typedef struct inputs {
    twin inp, w, dout, pre;
    int N, C, OC;
} inputs;
typedef struct variant {
    int dgelu, use_dinp, use_dw, use_dbias;
    const char *name;
} variant;

static void run_variant(env *e, const inputs *in, const outs *o, const variant *v) {
    float *dbias = v->use_dbias ? o->dbias.g : NULL;
    if (v->dgelu)
        e->gpu->matmul_backward_dgelu(e->gpu, o->dinp.g, dbias, o->dw.g, in->dout.g, in->inp.g, in->w.g, in->pre.g, in->N, in->C,
                                      in->OC, true);
    else
        e->gpu->matmul_backward(e->gpu, v->use_dinp ? o->dinp.g : NULL, v->use_dw ? o->dw.g : NULL, dbias, in->dout.g, in->inp.g,
                                in->w.g, in->N, in->C, in->OC, true);
}

/* matmul_backward with each of dinp, dw and dbias left out, then
 * matmul_backward_dgelu with and without its bias gradient: each call
 * with the option off, then on, from the same accumulators; the same
 * bits. Under the emulation, where the kernel scratch holds the side's
 * cuBLASLt workspace (OPS_CUDA_LT_WORKSPACE_BYTES above the bias
 * gradient's floats), a product ran on a stream no product had run on
 * before (so: once a backend); where it does not (the chunked runs' small
 * scratch), none did: the calls ran in turn. */
static void overlap_shape(env *e, int N, int C, int OC) {
    static const variant variants[] = {
        {0, 1, 1, 1, "matmul_backward"},       {0, 1, 1, 0, "matmul_backward_dbias_null"},
        {0, 0, 1, 1, "matmul_backward_dinp_null"}, {0, 1, 0, 1, "matmul_backward_dw_null"},
        {1, 1, 1, 1, "matmul_backward_dgelu"}, {1, 1, 1, 0, "matmul_backward_dgelu_dbias_null"},
    };
    const inputs in = {tw_rand(e, ACT, (size_t)N * C, -1, 1), tw_rand(e, ACT, (size_t)C * OC, -1, 1),
                       tw_rand(e, ACT, (size_t)N * OC, -1, 1), tw_rand(e, ACT, (size_t)N * C, -4, 4), N, C, OC};
    char name[96];
    for (size_t k = 0; k < sizeof variants / sizeof variants[0]; k++) {
        const variant *v = &variants[k];
        const size_t n_bias = (size_t)(v->dgelu ? C : OC);
        outs a = {tw_out(e, ACT, (size_t)N * C), tw_rand(e, F32, (size_t)C * OC, -1, 1), tw_rand(e, F32, n_bias, -1, 1)};
        outs b = outs_like(e, &a, (size_t)N * C);
        const outs *runs[2] = {&a, &b};
        for (int on = 0; on < 2; on++) {
            if (!set_overlap(e, on)) break;
            run_variant(e, &in, runs[on], v);
        }
        sync_gpu(e);
        snprintf(name, sizeof name, "dw_overlap_%s_bitwise N=%d C=%d OC=%d", v->name, N, C, OC);
        expect_same(e, &a, &b, v->use_dinp, v->use_dw, v->use_dbias, name);
        outs_free(e, &a);
        outs_free(e, &b);
    }
    twin all[] = {in.inp, in.w, in.dout, in.pre};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

/* Once a backend: the MLP's shapes at a width of 72 (the DGELU epilogue,
 * BGRADA), then odd ones (C 29: the DGELU fallback, whose bias gradient
 * runs after the join). */
void cuda_test_dw_overlap(env *e) {
    NEED(e, matmul_backward);
    NEED(e, matmul_backward_dgelu);
#ifdef TG_CUDA_EMU
    const long streams0 = emu_lt_matmul_streams();
#endif
    overlap_shape(e, 39, 72, 288);
    overlap_shape(e, 13, 29, 41);
    set_overlap(e, 0);
#ifdef TG_CUDA_EMU
    const int room = scratch_holds(OPS_CUDA_LT_WORKSPACE_BYTES + 288 * sizeof(float));
    const long streams = emu_lt_matmul_streams();
    char detail[128];
    snprintf(detail, sizeof detail, "(cuBLASLt ran on %ld streams, %ld before; the scratch %s the side's workspace)", streams,
             streams0, room ? "holds" : "does not hold");
    check_true(e, room ? streams > streams0 : streams == streams0,
               room ? "dw_overlap_side_stream_used" : "dw_overlap_side_stream_unused", detail);
#endif
}
#endif

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

/* matmul_backward with each of dinp, dw and dbias left out, then
 * matmul_backward_dgelu with and without its bias gradient: each call
 * with the option off, then on, from the same accumulators; the same
 * bits. Under the emulation, where the kernel scratch holds the side's
 * cuBLASLt workspace (OPS_CUDA_LT_WORKSPACE_BYTES above the bias
 * gradient's floats), a product ran on a stream no product had run on
 * before (so: once a backend); where it does not (the chunked runs' small
 * scratch), none did: the calls ran in turn. */
static void overlap_shape(env *e, int N, int C, int OC) {
    twin inp = tw_rand(e, ACT, (size_t)N * C, -1, 1), w = tw_rand(e, ACT, (size_t)C * OC, -1, 1);
    twin dout = tw_rand(e, ACT, (size_t)N * OC, -1, 1), pre = tw_rand(e, ACT, (size_t)N * C, -4, 4);
    char name[96];
    for (int which = 0; which < 4; which++) { /* everything, dbias NULL, dinp NULL, dw NULL */
        const int use_dinp = which != 2, use_dbias = which != 1, use_dw = which != 3;
        outs a = {tw_out(e, ACT, (size_t)N * C), tw_rand(e, F32, (size_t)C * OC, -1, 1), tw_rand(e, F32, OC, -1, 1)};
        outs b = outs_like(e, &a, (size_t)N * C);
        const outs *runs[2] = {&a, &b};
        for (int on = 0; on < 2; on++) {
            if (!set_overlap(e, on)) break;
            const outs *o = runs[on];
            e->gpu->matmul_backward(e->gpu, use_dinp ? o->dinp.g : NULL, use_dw ? o->dw.g : NULL, use_dbias ? o->dbias.g : NULL,
                                    dout.g, inp.g, w.g, N, C, OC, true);
        }
        sync_gpu(e);
        snprintf(name, sizeof name, "dw_overlap_matmul_backward%s_bitwise N=%d C=%d OC=%d",
                 which == 0 ? "" : which == 1 ? "_dbias_null" : which == 2 ? "_dinp_null" : "_dw_null", N, C, OC);
        expect_same(e, &a, &b, use_dinp, use_dw, use_dbias, name);
        outs_free(e, &a);
        outs_free(e, &b);
    }
    for (int with_bias = 1; with_bias >= 0; with_bias--) {
        outs a = {tw_out(e, ACT, (size_t)N * C), tw_rand(e, F32, (size_t)C * OC, -1, 1), tw_rand(e, F32, C, -1, 1)};
        outs b = outs_like(e, &a, (size_t)N * C);
        const outs *runs[2] = {&a, &b};
        for (int on = 0; on < 2; on++) {
            if (!set_overlap(e, on)) break;
            const outs *o = runs[on];
            e->gpu->matmul_backward_dgelu(e->gpu, o->dinp.g, with_bias ? o->dbias.g : NULL, o->dw.g, dout.g, inp.g, w.g, pre.g, N,
                                          C, OC, true);
        }
        sync_gpu(e);
        snprintf(name, sizeof name, "dw_overlap_matmul_backward_dgelu%s_bitwise N=%d C=%d OC=%d", with_bias ? "" : "_dbias_null",
                 N, C, OC);
        expect_same(e, &a, &b, 1, 1, with_bias, name);
        outs_free(e, &a);
        outs_free(e, &b);
    }
    twin all[] = {inp, w, dout, pre};
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

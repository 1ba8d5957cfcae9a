/* Kernel family: GELU (gelu_*).
 * CPU: each kernel against a double-precision reference and its backward
 * against finite differences (tests/kernels/check.h); with CUDA (or the
 * emulation, tests/emu) also the CUDA backend against the CPU one
 * (tests/kernels/twin.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/kernels/check.h"

/* ---- GELU ---- */
static void gelu_ref(const double *x, double *y, void *vctx) {
    size_t n = *(size_t *)vctx;
    for (size_t i = 0; i < n; i++) y[i] = 0.5 * x[i] * (1 + tanh(sqrt(2 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
}
void kcheck_gelu(tally *t) {
    size_t n = 1001;
    float *x = randf(n, 50, 4), *R = randf(n, 51, 1);
    double *xd = to_d(x, n), *Rd = to_d(R, n), *want = malloc(sizeof(double) * n);
    gelu_ref(xd, want, &n);
    float *out = poisoned(n);
    cpu_gelu_forward(NULL, out, x, n);
    expect_close(t, "gelu_forward", out, want, n, 1e-5, 1e-6);
    float *dx = poisoned(n);
    cpu_gelu_backward(NULL, dx, x, R, n);
    double *g = fd_grad(gelu_ref, &n, xd, n, Rd, n, 1e-5);
    expect_close(t, "gelu_backward_fd", dx, g, n, 1e-4, 1e-5);
    memcpy(dx, R, n * sizeof(float)); /* in place, as the model calls it */
    cpu_gelu_backward(NULL, dx, x, dx, n);
    expect_close(t, "gelu_backward_in_place", dx, g, n, 1e-4, 1e-5);
    free(g); free(x); free(R); free(xd); free(Rd); free(want); free(out); free(dx);
}

#ifdef TG_CUDA
/* ---- CUDA against the CPU ---- */
#include "util/rng_core.h"
#include "tests/kernels/twin.h"
#include "util/err.h"

void cuda_test_gelu(env *e, size_t n) {
    NEED(e, gelu_forward);
    NEED(e, gelu_backward);
    twin inp = tw_rand(e, ACT, n, -4, 4), out = tw_out(e, ACT, n);
    e->cpu->gelu_forward(e->cpu, out.c, inp.c, n);
    e->gpu->gelu_forward(e->gpu, out.g, inp.g, n);
    check(e, out, e->tol, "gelu_forward n=%zu", n);
    twin dout = tw_rand(e, ACT, n, -1, 1), dinp = tw_out(e, ACT, n);
    e->cpu->gelu_backward(e->cpu, dinp.c, inp.c, dout.c, n);
    e->gpu->gelu_backward(e->gpu, dinp.g, inp.g, dout.g, n);
    check(e, dinp, e->tol, "gelu_backward n=%zu", n);
    twin buf = tw_ref(e, dout); /* in place: dinp == dout, as the model calls it */
    e->cpu->gelu_backward(e->cpu, buf.c, inp.c, buf.c, n);
    e->gpu->gelu_backward(e->gpu, buf.g, inp.g, buf.g, n);
    check(e, buf, e->tol, "gelu_backward_in_place n=%zu", n);
    twin all[] = {inp, out, dout, dinp, buf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

/* Inputs where the GELU's exponential overflows or vanishes (from about
 * x < -10.7, and large x) and the largest floats, in packs and one by one
 * (21 and 8 elements): the results must match the CPU's, finite (a check
 * fails on NaN or infinity), 0 in the negative tail and x in the positive. */
void cuda_test_gelu_tails(env *e) {
    NEED(e, gelu_forward);
    static const float tails[] = {-100, -30, -12, -11, -10.5f, -10, -9, -7, -5, -3, -1,
                                  0,    1,   3,   5,   7,      9,   10, 12, 30, 100};
    static const float huge[] = {-3e38f, -1e30f, 1e30f, 3e38f, 2, -2, 0.5f, -0.5f};
    const struct { const float *x; size_t n; const char *name; } cases[] = {
        {tails, sizeof tails / sizeof *tails, "gelu_forward_tails"}, {huge, sizeof huge / sizeof *huge, "gelu_forward_huge"}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        twin inp = tw_vals(e, ACT, cases[k].x, cases[k].n), out = tw_out(e, ACT, cases[k].n);
        e->cpu->gelu_forward(e->cpu, out.c, inp.c, cases[k].n);
        e->gpu->gelu_forward(e->gpu, out.g, inp.g, cases[k].n);
        check(e, out, e->tol, "%s n=%zu", cases[k].name, cases[k].n);
        tw_free(e, inp);
        tw_free(e, out);
    }
}

/* Buffers one element past an aligned start (the kernels' vector path
 * needs 16-byte alignment, so they take the element path); element 0 of
 * the output must stay as it was. */
void cuda_test_gelu_unaligned(env *e, size_t n) {
    NEED(e, gelu_forward);
    twin inp = tw_rand(e, ACT, n + 1, -4, 4), out = tw_rand(e, ACT, n + 1, -1, 1);
    const size_t g1 = gpu_elem(e, ACT);
    e->cpu->gelu_forward(e->cpu, (float *)out.c + 1, (const float *)inp.c + 1, n);
    e->gpu->gelu_forward(e->gpu, (char *)out.g + g1, (const char *)inp.g + g1, n);
    check(e, out, e->tol, "gelu_forward_unaligned n=%zu", n);
    tw_free(e, inp);
    tw_free(e, out);
}
#endif

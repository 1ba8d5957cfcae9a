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

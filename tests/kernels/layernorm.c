/* Kernel family: LayerNorm (layernorm_*).
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

/* ---- layernorm ---- */
typedef struct { int N, C; const double *w, *b, *x; int wrt; } ln_ctx; /* wrt: 0 x, 1 w, 2 b */
static void ln_ref(const double *x, const double *w, const double *b, double *y, int N, int C) {
    for (int n = 0; n < N; n++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[n * C + c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[n * C + c] - m) * (x[n * C + c] - m);
        double s = 1.0 / sqrt(v / C + 1e-5);
        for (int c = 0; c < C; c++) y[n * C + c] = (x[n * C + c] - m) * s * w[c] + b[c];
    }
}
static void ln_fd(const double *p, double *y, void *vctx) {
    ln_ctx *k = vctx;
    ln_ref(k->wrt == 0 ? p : k->x, k->wrt == 1 ? p : k->w, k->wrt == 2 ? p : k->b, y, k->N, k->C);
}
void kcheck_layernorm(tally *t) {
    const int N = 7, C = 67;
    float *x = randf(N * C, 10, 2), *w = randf(C, 11, 1), *b = randf(C, 12, 1), *R = randf(N * C, 13, 1);
    for (int i = 0; i < N * C; i++) x[i] += 0.5f; /* a non-zero mean */
    double *xd = to_d(x, N * C), *wd = to_d(w, C), *bd = to_d(b, C), *Rd = to_d(R, N * C);
    double *want = malloc(sizeof(double) * N * C);
    ln_ref(xd, wd, bd, want, N, C);
    float *out = poisoned(N * C), *mean = poisoned(N), *rstd = poisoned(N);
    cpu_layernorm_forward(NULL, out, mean, rstd, x, w, b, N, C);
    expect_close(t, "layernorm_forward", out, want, N * C, 1e-5, 1e-5);
    /* backward: dinp, dw, db accumulate onto random starting values */
    float *dx = randf(N * C, 14, 1), *dw = randf(C, 15, 1), *db = randf(C, 16, 1);
    double *dx0 = to_d(dx, N * C), *dw0 = to_d(dw, C), *db0 = to_d(db, C);
    cpu_layernorm_backward(NULL, dx, dw, db, R, x, w, mean, rstd, N, C, true, true);
    ln_ctx k = {N, C, wd, bd, xd, 0};
    const double *inputs[3] = {xd, wd, bd};
    const int sizes[3] = {N * C, C, C};
    float *outs[3] = {dx, dw, db};
    double *starts[3] = {dx0, dw0, db0};
    const char *names[3] = {"layernorm_backward_dinp_fd", "layernorm_backward_dw_fd", "layernorm_backward_db_fd"};
    for (int which = 0; which < 3; which++) {
        k.wrt = which;
        double *g = fd_grad(ln_fd, &k, inputs[which], sizes[which], Rd, N * C, 1e-5);
        for (int i = 0; i < sizes[which]; i++) g[i] += starts[which][i];
        expect_close(t, names[which], outs[which], g, sizes[which], 1e-4, 1e-4);
        free(g);
    }
    free(x); free(w); free(b); free(R); free(xd); free(wd); free(bd); free(Rd); free(want);
    free(out); free(mean); free(rstd); free(dx); free(dw); free(db); free(dx0); free(dw0); free(db0);
}

#ifdef TG_CUDA
/* ---- CUDA against the CPU ---- */
#include "util/rng_core.h"
#include "tests/kernels/twin.h"
#include "util/err.h"

#ifdef TG_CUDA_EMU
#include "tests/emu/emu_hooks.h"
/* Whether the backward should run in one pass: its column sums (8 warps x
 * dw and db x the row, rounded up to whole rounds of 32 16-byte packs when
 * the row is read in packs), with a copy of w where the row's packs are
 * held in registers (up to 8 a lane), within the emulated device's 227 KiB
 * of shared memory a block; else three kernels, the first of them dinp
 * alone. */
static int ln_expect_one_pass(const env *e, int C) {
    const int P = e->act == TG_BF16 ? 8 : 4, round = 32 * P, packs = C % P == 0;
    const size_t row = packs ? (size_t)(C + round - 1) / round * round : (size_t)C;
    const size_t w_bytes = packs && (C + round - 1) / round <= 8 ? (size_t)C * (e->act == TG_BF16 ? 2 : 4) : 0;
    return 8 * 2 * row * sizeof(float) + w_bytes <= ((size_t)227 << 10);
}
#endif

void cuda_test_layernorm(env *e, int N, int C) {
    NEED(e, layernorm_forward);
    NEED(e, layernorm_backward);
    const size_t NC = (size_t)N * C;
    twin inp = tw_rand(e, ACT, NC, -0.5f, 1.5f); /* a non-zero mean */
    twin w = tw_rand(e, ACT, C, -1, 1), b = tw_rand(e, ACT, C, -1, 1);
    twin out = tw_out(e, ACT, NC), mean = tw_out(e, F32, N), rstd = tw_out(e, F32, N);
    e->cpu->layernorm_forward(e->cpu, out.c, mean.c, rstd.c, inp.c, w.c, b.c, N, C);
    e->gpu->layernorm_forward(e->gpu, out.g, mean.g, rstd.g, inp.g, w.g, b.g, N, C);
    check(e, out, e->tol, "layernorm_forward out N=%d C=%d", N, C);
    check(e, mean, e->tol, "layernorm_forward mean N=%d C=%d", N, C);
    check(e, rstd, e->tol, "layernorm_forward rstd N=%d C=%d", N, C);
    /* backward from the reference's statistics; dinp, dw, db accumulate */
    twin mean_r = tw_ref(e, mean), rstd_r = tw_ref(e, rstd);
    twin dout = tw_rand(e, ACT, NC, -1, 1), dinp = tw_rand(e, ACT, NC, -1, 1);
    twin dw = tw_rand(e, F32, C, -1, 1), db = tw_rand(e, F32, C, -1, 1);
    e->cpu->layernorm_backward(e->cpu, dinp.c, dw.c, db.c, dout.c, inp.c, w.c, mean_r.c, rstd_r.c, N, C, true, true);
#ifdef TG_CUDA_EMU
    const long fused0 = emu_kernel_launches("layernorm_backward_fused_kernel"), split0 = emu_kernel_launches("layernorm_backward_dinp_kernel");
#endif
    e->gpu->layernorm_backward(e->gpu, dinp.g, dw.g, db.g, dout.g, inp.g, w.g, mean_r.g, rstd_r.g, N, C, true, true);
#ifdef TG_CUDA_EMU
    {
        const long fused = emu_kernel_launches("layernorm_backward_fused_kernel") - fused0;
        const long split = emu_kernel_launches("layernorm_backward_dinp_kernel") - split0;
        const int want = ln_expect_one_pass(e, C);
        char detail[128], name[96];
        snprintf(detail, sizeof detail, "(one pass ran %ld times, three kernels %ld; expected %d and %d)", fused, split, want,
                 !want);
        snprintf(name, sizeof name, "layernorm_backward_path N=%d C=%d", N, C);
        check_true(e, fused == want && split == !want, name, detail);
    }
#endif
    check(e, dinp, e->tol, "layernorm_backward dinp N=%d C=%d", N, C);
    check(e, dw, e->tol, "layernorm_backward dw N=%d C=%d", N, C);
    check(e, db, e->tol, "layernorm_backward db N=%d C=%d", N, C);
    twin all[] = {inp, w, b, out, mean, rstd, mean_r, rstd_r, dout, dinp, dw, db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}
#endif

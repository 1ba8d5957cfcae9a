/* Kernel family: bias + dropout + residual, dropout, bias gradients (bias_residual_add, dropout, bias_backward).
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

/* A site's step read from memory when the kernel runs: the masks of its
 * stream moved by that step (tg_dropout_stream), a new mask for a new
 * value in the same memory (a replayed CUDA graph's case). */
static void check_dropout_step(tally *t, const tg_dropout *site, const float *x, int N, int C) {
    float *got = poisoned((size_t)N * C), *want = poisoned((size_t)N * C), *before = poisoned((size_t)N * C);
    uint64_t step = 5;
    tg_dropout at_step = *site, moved = *site;
    at_step.step = &step;
    moved.stream += step << 24;
    cpu_dropout(NULL, before, x, N, C, at_step);
    cpu_dropout(NULL, want, x, N, C, moved);
    const int same = memcmp(before, want, sizeof(float) * N * C) == 0;
    step = 6;
    moved.stream = site->stream + (step << 24);
    cpu_dropout(NULL, got, x, N, C, at_step);
    cpu_dropout(NULL, want, x, N, C, moved);
    const int next = memcmp(got, want, sizeof(float) * N * C) == 0, changed = memcmp(got, before, sizeof(float) * N * C) != 0;
    report(t, same && next && changed, "dropout_step_read_from_memory", "step 5 as the moved stream: %d, step 6: %d, changed: %d",
           same, next, changed);
    free(got); free(want); free(before);
}

/* Dropout masks: the kept fraction is 1-p, kept values scaled by 1/(1-p),
 * the same mask in the residual site, the plain kernel and its backward. */
void kcheck_dropout(tally *t) {
    const tg_dropout d = {0.1f, 7, 42, 1000, 0, 0, NULL};
    const int N = 40, C = 2500; /* 100000 draws */
    float *ones = malloc(sizeof(float) * N * C), *out = poisoned((size_t)N * C);
    for (int i = 0; i < N * C; i++) ones[i] = 1.0f;
    cpu_dropout(NULL, out, ones, N, C, d);
    long kept = 0;
    int bad_scale = 0;
    for (int i = 0; i < N * C; i++) {
        if (out[i] != 0.0f) kept++;
        if (out[i] != 0.0f && fabsf(out[i] - 1.0f / 0.9f) > 1e-6f) bad_scale++;
    }
    double frac = (double)kept / (N * C);
    report(t, fabs(frac - 0.9) < 0.005 && bad_scale == 0, "dropout_kept_fraction_and_scale", "kept %.4f, %d badly scaled", frac,
           bad_scale);
    float *x = randf((size_t)N * C, 110, 1), *bias = randf(C, 111, 1), *res = randf((size_t)N * C, 112, 1);
    double *want = malloc(sizeof(double) * N * C);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            uint64_t i = (d.row0 + (uint64_t)n) * C + (uint64_t)c;
            want[n * C + c] = ((double)x[n * C + c] + bias[c]) * cpu_dropout_scale(&d, i) + res[n * C + c];
        }
    cpu_bias_residual_add(NULL, out, x, bias, res, N, C, d);
    expect_close(t, "bias_dropout_residual_add", out, want, (size_t)N * C, 1e-6, 1e-7);
    /* the kernel with p = 0 draws nothing and is the identity */
    cpu_dropout(NULL, out, x, N, C, (tg_dropout){0});
    report(t, memcmp(out, x, sizeof(float) * N * C) == 0, "dropout_p0_identity", "p = 0 changed values");
    check_dropout_step(t, &d, x, N, C);
    free(ones); free(out); free(x); free(bias); free(res); free(want);
}

/* The row-parallel layer's bias + residual, and the bias gradient. */
void kcheck_row_ops(tally *t) {
    const int N = 23, C = 13;
    float *x = randf(N * C, 100, 1), *bias = randf(C, 101, 1), *res = randf(N * C, 102, 1), *out = poisoned(N * C);
    double *want = malloc(sizeof(double) * N * C);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) want[n * C + c] = (double)x[n * C + c] + bias[c] + res[n * C + c];
    cpu_bias_residual_add(NULL, out, x, bias, res, N, C, (tg_dropout){0});
    expect_close(t, "bias_residual_add", out, want, N * C, 1e-6, 1e-7);
    float *db = randf(C, 103, 1);
    double *dbw = to_d(db, C);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) dbw[c] += x[n * C + c];
    cpu_bias_backward(NULL, db, x, N, C, true);
    expect_close(t, "bias_backward", db, dbw, C, 1e-5, 1e-6);
    free(x); free(bias); free(res); free(out); free(want); free(db); free(dbw);
}

#ifdef TG_CUDA
/* ---- CUDA against the CPU ---- */
#include "util/rng_core.h"
#include "tests/kernels/twin.h"
#include "util/err.h"
#ifdef TG_CUDA_EMU
#include "tests/emu/emu_hooks.h"
#endif

void cuda_test_bias_residual(env *e, int N, int C, tg_dropout drop) {
    NEED(e, bias_residual_add);
    const size_t NC = (size_t)N * C;
    char shape[96];
    snprintf(shape, sizeof shape, "N=%d C=%d p=%g row0=%llu", N, C, (double)drop.p, (unsigned long long)drop.row0);
    twin x = tw_rand(e, ACT, NC, -1, 1), res = tw_rand(e, ACT, NC, -1, 1), bias = tw_rand(e, ACT, C, -1, 1);
    twin out = tw_out(e, ACT, NC);
    e->cpu->bias_residual_add(e->cpu, out.c, x.c, bias.c, res.c, N, C, drop);
    e->gpu->bias_residual_add(e->gpu, out.g, x.g, bias.g, res.g, N, C, drop);
    check(e, out, e->tol, "bias_residual_add %s", shape);
    twin bx = tw_ref(e, x); /* out == x */
    e->cpu->bias_residual_add(e->cpu, bx.c, bx.c, bias.c, res.c, N, C, drop);
    e->gpu->bias_residual_add(e->gpu, bx.g, bx.g, bias.g, res.g, N, C, drop);
    check(e, bx, e->tol, "bias_residual_add_out_is_x %s", shape);
    twin br = tw_ref(e, res); /* out == res */
    e->cpu->bias_residual_add(e->cpu, br.c, x.c, bias.c, br.c, N, C, drop);
    e->gpu->bias_residual_add(e->gpu, br.g, x.g, bias.g, br.g, N, C, drop);
    check(e, br, e->tol, "bias_residual_add_out_is_res %s", shape);
    twin all[] = {x, res, bias, out, bx, br};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

void cuda_test_dropout(env *e, int N, int C, tg_dropout drop) {
    NEED(e, dropout);
    const size_t NC = (size_t)N * C;
    char shape[96];
    snprintf(shape, sizeof shape, "N=%d C=%d p=%g row0=%llu", N, C, (double)drop.p, (unsigned long long)drop.row0);
    twin in = tw_rand(e, ACT, NC, -1, 1), out = tw_out(e, ACT, NC);
    e->cpu->dropout(e->cpu, out.c, in.c, N, C, drop);
    e->gpu->dropout(e->gpu, out.g, in.g, N, C, drop);
    check(e, out, e->tol, "dropout %s", shape);
    twin buf = tw_ref(e, in); /* in place */
    e->cpu->dropout(e->cpu, buf.c, buf.c, N, C, drop);
    e->gpu->dropout(e->gpu, buf.g, buf.g, N, C, drop);
    check(e, buf, e->tol, "dropout_in_place %s", shape);
    tw_free(e, in);
    tw_free(e, out);
    tw_free(e, buf);
}

/* The step read from backend memory when the op runs (a CUDA graph replays
 * the same launch every step): the GPU's site points at its own copy of the
 * step, set to 3 and then 4 between two runs of the same site, and must
 * draw what the CPU draws with the stream moved by that step, each time. */
void cuda_test_dropout_step(env *e, int N, int C) {
    NEED(e, dropout);
    const size_t NC = (size_t)N * C;
    const tg_dropout site = {0.2f, 1234, 85, 11, 0, 0, NULL};
    uint64_t *step_g = e->gpu->alloc(e->gpu, sizeof(uint64_t), "test step");
    tg_dropout at_step = site;
    at_step.step = step_g;
    twin in = tw_rand(e, ACT, NC, -1, 1);
    for (uint64_t step = 3; step <= 4; step++) {
        e->gpu->upload(e->gpu, step_g, &step, sizeof step);
        tg_dropout moved = site;
        moved.stream += step << 24;
        twin out = tw_out(e, ACT, NC);
        e->cpu->dropout(e->cpu, out.c, in.c, N, C, moved);
        e->gpu->dropout(e->gpu, out.g, in.g, N, C, at_step);
        check(e, out, e->tol, "dropout_step_in_memory N=%d C=%d step=%llu", N, C, (unsigned long long)step);
        tw_free(e, out);
    }
    tw_free(e, in);
    e->gpu->free(e->gpu, step_g);
}

void cuda_test_bias_backward(env *e, int N, int C) {
    NEED(e, bias_backward);
    twin dout = tw_rand(e, ACT, (size_t)N * C, -1, 1), dbias = tw_rand(e, F32, C, -1, 1); /* accumulates */
    e->cpu->bias_backward(e->cpu, dbias.c, dout.c, N, C, true);
#ifdef TG_CUDA_EMU
    const long packed0 = emu_kernel_launches("column_partials_packed_kernel");
#endif
    e->gpu->bias_backward(e->gpu, dbias.g, dout.g, N, C, true);
#ifdef TG_CUDA_EMU
    { /* 16-byte loads where rows hold whole packs (dout is aligned) */
        const long packed = emu_kernel_launches("column_partials_packed_kernel") - packed0;
        const int want = C % (e->act == TG_BF16 ? 8 : 4) == 0;
        char detail[96], name[64];
        snprintf(detail, sizeof detail, "(the packed column sums ran %ld times; expected %d)", packed, want);
        snprintf(name, sizeof name, "bias_backward_packs N=%d C=%d", N, C);
        check_true(e, packed == want, name, detail);
    }
#endif
    check(e, dbias, e->tol, "bias_backward N=%d C=%d", N, C);
    tw_free(e, dout);
    tw_free(e, dbias);
}
#endif

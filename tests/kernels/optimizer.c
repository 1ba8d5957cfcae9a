/* Kernel family: optimizer and whole-buffer ops: sum_squares, scale, AdamW; on CUDA also memory, cast_params, download_floats.
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

/* ---- vector ops and AdamW ---- */
void kcheck_vector(tally *t) {
    size_t n = 100003;
    float *a = randf(n, 80, 1);
    double *want = malloc(sizeof(double) * n), ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)a[i] * a[i];
    double got = cpu_sum_squares(NULL, a, n);
    report(t, fabs(got - ss) <= 1e-12 * ss, "sum_squares", "got %.17g want %.17g", got, ss);
    for (size_t i = 0; i < n; i++) want[i] = (double)a[i] * 0.3f;
    cpu_scale(NULL, a, 0.3f, n);
    expect_close(t, "scale", a, want, n, 1e-7, 0);
    free(a); free(want);
}

void kcheck_adamw(tally *t) {
    size_t n = 1037;
    float *p = randf(n, 90, 1), *g = randf(n, 91, 1), *m = randf(n, 92, 0.1f), *v = randf(n, 93, 0.1f);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    double *pw = malloc(sizeof(double) * n), *mw = malloc(sizeof(double) * n), *vw = malloc(sizeof(double) * n);
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    const int step = 3;
    const double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
    for (size_t i = 0; i < n; i++) { /* torch.optim.AdamW, written out */
        double pi = p[i] * (1 - lr * wd);
        mw[i] = b1 * m[i] + (1 - b1) * g[i];
        vw[i] = b2 * v[i] + (1 - b2) * (double)g[i] * g[i];
        pw[i] = pi - lr / bc1 * mw[i] / (sqrt(vw[i]) / sqrt(bc2) + eps);
    }
    cpu_adamw(NULL, p, p, g, m, v, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, (float)bc1, (float)bc2);
    expect_close(t, "adamw_params", p, pw, n, 1e-5, 1e-6);
    expect_close(t, "adamw_exp_avg", m, mw, n, 1e-5, 1e-7);
    expect_close(t, "adamw_exp_avg_sq", v, vw, n, 1e-5, 1e-7);
    free(p); free(g); free(m); free(v); free(pw); free(mw); free(vw);
}

#ifdef TG_CUDA
/* ---- CUDA against the CPU ---- */
#include "util/rng_core.h"
#include "tests/kernels/twin.h"
#include "util/err.h"

void cuda_test_memory(env *e) {
    tg_o g = e->gpu;
    /* upload then download returns the same bytes (an odd byte count) */
    const size_t nb = 1000003;
    unsigned char *src = tg_malloc(nb, "bytes"), *back = tg_malloc(nb, "bytes");
    for (size_t i = 0; i < nb; i++) src[i] = (unsigned char)(rng_bits_core(SEED, e->stream, i) >> 56);
    e->stream++;
    memset(back, 0, nb);
    void *d = g->alloc(g, nb, "round trip");
    g->upload(g, d, src, nb);
    g->download(g, back, d, nb);
    check_true(e, memcmp(src, back, nb) == 0, "upload_download_round_trip", "(1000003 bytes)");
    g->free(g, d);
    free(src);
    free(back);

    /* zero clears exactly the bytes asked for */
    if (need(e, "zero", e->cpu->zero != NULL, g->zero != NULL)) {
        twin t = tw_rand(e, F32, 4096, -1, 1);
        const size_t first = 17, count = 1001;
        e->cpu->zero(e->cpu, (float *)t.c + first, count * sizeof(float));
        g->zero(g, (float *)t.g + first, count * sizeof(float));
        check(e, t, TOL_F32, "zero floats [17, 1018) of 4096");
        tw_free(e, t);
    }

    /* the measured peak sees a 256 MiB allocation while it is held */
    if (need(e, "mem_peak", 1, g->mem_peak != NULL)) {
        const size_t big = (size_t)256 << 20;
        void *p = g->alloc(g, big, "mem_peak probe");
        if (g->zero) g->zero(g, p, big); /* touch it */
        sync_gpu(e);
        size_t peak = g->mem_peak(g);
        char detail[128];
        snprintf(detail, sizeof detail, "(peak %zu bytes while holding %zu)", peak, big);
        check_true(e, peak >= big, "mem_peak_sees_allocation", detail);
        g->free(g, p);
    }
    if (need(e, "peak_tflops", 1, g->peak_tflops != NULL)) {
        double tf = g->peak_tflops(g);
        char detail[128];
        snprintf(detail, sizeof detail, "(%g TFLOP/s; 0 means unknown)", tf);
        check_true(e, isfinite(tf) && tf >= 0, "peak_tflops_valid", detail);
    }
}

void cuda_test_cast_params(env *e, size_t n) {
    NEED(e, cast_params);
    twin src = tw_rand(e, F32, n, -1, 1), dst = tw_out(e, ACT, n);
    e->cpu->cast_params(e->cpu, dst.c, src.c, n);
    e->gpu->cast_params(e->gpu, dst.g, src.g, n);
    check(e, dst, e->tol, "cast_params n=%zu", n);
    tw_free(e, dst);
    if (e->act == TG_F32) { /* dst == src: nothing happens */
        e->cpu->cast_params(e->cpu, src.c, src.c, n);
        e->gpu->cast_params(e->gpu, src.g, src.g, n);
        check(e, src, TOL_F32, "cast_params_in_place n=%zu", n);
    }
    tw_free(e, src);
}

void cuda_test_download_floats(env *e, size_t n) {
    NEED(e, download_floats);
    twin src = tw_rand(e, ACT, n, -3, 3);
    float *want = tg_malloc(n * sizeof(float), "download"), *got = tg_malloc(n * sizeof(float), "download");
    for (size_t i = 0; i < n; i++) want[i] = got[i] = NAN;
    e->cpu->download_floats(e->cpu, want, src.c, n);
    sync_gpu(e);
    e->gpu->download_floats(e->gpu, got, src.g, n);
    char name[64];
    snprintf(name, sizeof name, "download_floats n=%zu", n);
    compare_floats(e, got, want, n, e->tol, name);
    free(want);
    free(got);
    tw_free(e, src);
}

void cuda_test_sum_squares(env *e, size_t n) {
    NEED(e, sum_squares);
    twin x = tw_rand(e, F32, n, -1, 1);
    double want = e->cpu->sum_squares(e->cpu, x.c, n), got = e->gpu->sum_squares(e->gpu, x.g, n);
    float w = (float)want, g = (float)got;
    double err = fabs(got - want) / (fabs(want) > TINY ? fabs(want) : TINY);
    char name[64], detail[96];
    snprintf(name, sizeof name, "sum_squares n=%zu", n);
    snprintf(detail, sizeof detail, "(cuda %.17g cpu %.17g)", got, want);
    twin_report(e, isfinite(w) && isfinite(g) && want > 0 && err < TOL_F32, err, TOL_F32, name, detail);
    tw_free(e, x);
}

void cuda_test_scale(env *e, size_t n) {
    NEED(e, scale);
    twin x = tw_rand(e, F32, n, -1, 1);
    e->cpu->scale(e->cpu, x.c, 0.3f, n);
    e->gpu->scale(e->gpu, x.g, 0.3f, n);
    check(e, x, TOL_F32, "scale n=%zu", n);
    tw_free(e, x);
}

/* One AdamW step (t = 3) on random state; work is p itself or a separate
 * activation-type buffer. */
void cuda_test_adamw(env *e, size_t n, int work_is_p) {
    NEED(e, adamw);
    const float lr = 1e-2f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    const float bc1 = 1.0f - powf(beta1, 3), bc2 = 1.0f - powf(beta2, 3);
    float *hv = host_rand(e, n, 0, 0.1f); /* second moments are non-negative */
    twin p = tw_rand(e, F32, n, -1, 1), g = tw_rand(e, F32, n, -1, 1), m = tw_rand(e, F32, n, -0.1f, 0.1f);
    twin v = tw_vals(e, F32, hv, n);
    twin work = work_is_p ? p : tw_out(e, ACT, n);
    e->cpu->adamw(e->cpu, p.c, work.c, g.c, m.c, v.c, n, lr, beta1, beta2, eps, wd, bc1, bc2);
    e->gpu->adamw(e->gpu, p.g, work.g, g.g, m.g, v.g, n, lr, beta1, beta2, eps, wd, bc1, bc2);
    const char *tag = work_is_p ? "work_is_p" : "work_separate";
    check(e, p, TOL_F32, "adamw_%s p n=%zu", tag, n);
    check(e, m, TOL_F32, "adamw_%s m n=%zu", tag, n);
    check(e, v, TOL_F32, "adamw_%s v n=%zu", tag, n);
    if (!work_is_p) {
        check(e, work, e->tol, "adamw_%s work n=%zu", tag, n);
        tw_free(e, work);
    }
    tw_free(e, p);
    tw_free(e, g);
    tw_free(e, m);
    tw_free(e, v);
    free(hv);
}
#endif

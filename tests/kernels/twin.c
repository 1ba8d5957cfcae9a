/* The CUDA-against-CPU checks' helpers (tests/kernels/twin.h). */
#include "tests/kernels/twin.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng_core.h"
#include "util/err.h"

/* ---- reporting ---- */

void twin_report(env *e, int ok, double err, double tol, const char *name, const char *detail) {
    if (ok) {
        printf("ok %s %s  err=%.3g\n", tg_dtype_name(e->act), name, err);
        e->passed++;
    } else {
        printf("not ok %s %s - err=%.3g tol=%.0e%s%s\n", tg_dtype_name(e->act), name, err, tol, detail[0] ? " " : "", detail);
        e->failed++;
    }
    fflush(stdout);
}

/* Both tables must have the op; a missing one is a failure, not a skip. */
int need(env *e, const char *op, int in_cpu, int in_gpu) {
    if (in_cpu && in_gpu) return 1;
    char why[96];
    snprintf(why, sizeof why, "(missing from the %s table)", !in_gpu ? "cuda" : "cpu");
    twin_report(e, 0, NAN, 0, op, why);
    return 0;
}

/* Waits for the GPU's queue, so that an asynchronous failure is blamed on
 * the op just run: timer_end_ms waits for its mark on the stream. */
void sync_gpu(env *e) {
    e->gpu->timer_begin(e->gpu);
    (void)e->gpu->timer_end_ms(e->gpu);
}

/* ---- host <-> backend, in either element type ---- */

tg_dtype gpu_type(const env *e, kind k) { return k == ACT ? e->act : TG_F32; }
size_t gpu_elem(const env *e, kind k) { return k == ACT ? tg_dtype_bytes(e->act) : 4; }

void put_floats(tg_o o, tg_dtype t, void *dst, const float *src, size_t n) {
    if (t == TG_F32) {
        o->upload(o, dst, src, n * sizeof(float));
        return;
    }
    uint16_t *h = tg_malloc(n * sizeof(uint16_t), "bf16 staging");
    for (size_t i = 0; i < n; i++) h[i] = tg_f32_to_bf16(src[i]);
    o->upload(o, dst, h, n * sizeof(uint16_t));
    free(h);
}

void get_floats(tg_o o, tg_dtype t, float *dst, const void *src, size_t n) {
    if (t == TG_F32) {
        o->download(o, dst, src, n * sizeof(float));
        return;
    }
    uint16_t *h = tg_malloc(n * sizeof(uint16_t), "bf16 staging");
    o->download(o, h, src, n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) dst[i] = tg_bf16_to_f32(h[i]);
    free(h);
}

/* Fills `bytes` of backend memory with 0xff (NaN in float32 and bf16). */
void poison(tg_o o, void *p, size_t bytes) {
    unsigned char *h = tg_malloc(bytes, "poison");
    memset(h, 0xff, bytes);
    o->upload(o, p, h, bytes);
    free(h);
}

/* ---- twins ---- */

twin tw_alloc(env *e, kind k, size_t n, const char *what) {
    twin t = {e->cpu->alloc(e->cpu, n * 4, what), e->gpu->alloc(e->gpu, n * gpu_elem(e, k), what), n, k};
    return t;
}

/* An output both sides will overwrite: poisoned on both. */
twin tw_out(env *e, kind k, size_t n) {
    twin t = tw_alloc(e, k, n, "test output");
    poison(e->cpu, t.c, n * 4);
    poison(e->gpu, t.g, n * gpu_elem(e, k));
    return t;
}

/* Both sides get h (activation-type values rounded to e->act first). */
twin tw_vals(env *e, kind k, const float *h, size_t n) {
    twin t = tw_alloc(e, k, n, "test input");
    float *v = tg_malloc(n * sizeof(float), "test values");
    for (size_t i = 0; i < n; i++) v[i] = (k == ACT && e->act == TG_BF16) ? tg_bf16_to_f32(tg_f32_to_bf16(h[i])) : h[i];
    put_floats(e->cpu, TG_F32, t.c, v, n);
    put_floats(e->gpu, gpu_type(e, k), t.g, v, n);
    free(v);
    return t;
}

/* n fresh values uniform in [lo, hi). */
float *host_rand(env *e, size_t n, float lo, float hi) {
    float *h = tg_malloc(n * sizeof(float), "random values");
    for (size_t i = 0; i < n; i++) h[i] = lo + (hi - lo) * rng_uniform_core(SEED, e->stream, i);
    e->stream++;
    return h;
}

twin tw_rand(env *e, kind k, size_t n, float lo, float hi) {
    float *h = host_rand(e, n, lo, hi);
    twin t = tw_vals(e, k, h, n);
    free(h);
    return t;
}

twin tw_ints(env *e, const int32_t *h, size_t n) {
    twin t = tw_alloc(e, I32, n, "test ids");
    e->cpu->upload(e->cpu, t.c, h, n * sizeof(int32_t));
    e->gpu->upload(e->gpu, t.g, h, n * sizeof(int32_t));
    return t;
}

/* The CPU side's values of src, as seen by the host. */
float *cpu_values(env *e, twin src) {
    float *h = tg_malloc(src.n * sizeof(float), "reference values");
    get_floats(e->cpu, TG_F32, h, src.c, src.n);
    return h;
}

/* A new twin holding the CPU side's values of src on both sides: the
 * reference's intermediate results (saved statistics, probabilities) fed to
 * the next op, or a copy of an input for an in-place call. */
twin tw_ref(env *e, twin src) {
    float *h = cpu_values(e, src);
    twin t = tw_vals(e, src.k, h, src.n);
    free(h);
    return t;
}

void tw_free(env *e, twin t) {
    if (t.c) e->cpu->free(e->cpu, t.c);
    if (t.g) e->gpu->free(e->gpu, t.g);
}

/* ---- comparison ---- */

/* Relative error of got against want (see the top of the file); *at is the
 * worst element. NaN when either side has a NaN or infinity; -1 when the
 * reference is all zeros. */
double rel_err(const float *got, const float *want, size_t n, size_t *at) {
    double diff = 0.0, ref = 0.0;
    *at = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(want[i])) {
            *at = i;
            return NAN;
        }
        double d = fabs((double)got[i] - (double)want[i]);
        if (d > diff) {
            diff = d;
            *at = i;
        }
        if (fabs((double)want[i]) > ref) ref = fabs((double)want[i]);
    }
    if (ref == 0.0) return -1.0;
    return diff / (ref > TINY ? ref : TINY);
}

void compare_floats(env *e, const float *got, const float *want, size_t n, double tol, const char *name) {
    size_t at;
    double err = rel_err(got, want, n, &at);
    char detail[256];
    if (err == -1.0) {
        snprintf(detail, sizeof detail, "(the CPU reference is all zeros: the check proves nothing)");
        twin_report(e, 0, err, tol, name, detail);
        return;
    }
    snprintf(detail, sizeof detail, "(element %zu of %zu: cuda %.9g cpu %.9g)", at, n, (double)got[at], (double)want[at]);
    twin_report(e, err < tol, err, tol, name, detail);
}

/* Compares the two sides of t after the calls that wrote it. */
void check(env *e, twin t, double tol, const char *fmt, ...) {
    char name[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    sync_gpu(e);
    float *want = cpu_values(e, t), *got = tg_malloc(t.n * sizeof(float), "cuda values");
    get_floats(e->gpu, gpu_type(e, t.k), got, t.g, t.n);
    compare_floats(e, got, want, t.n, tol, name);
    free(want);
    free(got);
}

/* A pass/fail fact that is not a tensor comparison. */
void check_true(env *e, int ok, const char *name, const char *detail) {
    if (ok) {
        printf("ok %s %s  err=0 %s\n", tg_dtype_name(e->act), name, detail);
        e->passed++;
    } else {
        printf("not ok %s %s - err=- tol=- %s\n", tg_dtype_name(e->act), name, detail);
        e->failed++;
    }
    fflush(stdout);
}

/* Whether the backend's kernel scratch holds `bytes`: its 64 MiB always,
 * except under the emulation's EMU_SCRATCH_BYTES (a run that shrinks it to
 * split the chunked kernels finely). */
int scratch_holds(size_t bytes) {
    const char *shrunk = getenv("EMU_SCRATCH_BYTES");
    return !(shrunk && *shrunk) || bytes <= (size_t)strtoull(shrunk, NULL, 0);
}

/* The backend bytes of t's GPU side (the caller frees them). */
void *gpu_bytes(env *e, twin t) {
    const size_t bytes = t.n * gpu_elem(e, t.k);
    void *h = tg_malloc(bytes, "a twin's device bytes");
    e->gpu->download(e->gpu, h, t.g, bytes);
    return h;
}

/* Whether t's GPU side holds the bytes `want` (from gpu_bytes). */
int gpu_holds(env *e, twin t, const void *want) {
    void *got = gpu_bytes(e, t);
    const int same = memcmp(got, want, t.n * gpu_elem(e, t.k)) == 0;
    free(got);
    return same;
}

double bf16_rel_diff(const void *got, const void *want, size_t n) {
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double g = tg_bf16_to_f32(((const uint16_t *)got)[i]), w = tg_bf16_to_f32(((const uint16_t *)want)[i]);
        diff = isfinite(g) ? fmax(diff, fabs(g - w)) : INFINITY;
        scale = fmax(scale, fabs(w));
    }
    return diff / fmax(scale, TINY);
}

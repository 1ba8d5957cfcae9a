/* The CUDA backend against the CPU backend: every op of model/ops.h run on
 * both with the same fresh random inputs (seeded, uniform, never all zeros),
 * with float32 and with bfloat16 activations.
 *
 *   build/test_cuda_kernels [--quick]      --quick skips the large cases
 *
 * Relative error, per output tensor: max_i |cuda_i - cpu_i| divided by
 * max(max_i |cpu_i|, 1e-30). A NaN or infinity on either side fails, and so
 * does a reference that is all zeros (the check would prove nothing).
 * Tolerances (strict <): 1e-5 with fp32 activations, 1e-2 with bf16; float32
 * outputs computed from float32 inputs only (sum_squares, scale, AdamW's
 * p, m, v) are held to 1e-5 in both.
 * With bf16 activations the CPU is given the bf16-rounded inputs (exactly
 * what the GPU holds), so only the CUDA kernel's own rounding is measured.
 * Overwritten outputs are poisoned first (0xff bytes: NaN in float32 and in
 * bf16) on both sides; accumulating outputs start from the same random
 * values on both sides, so accumulate-vs-overwrite mistakes show.
 * Prints "ok   NAME  err=E" or "FAIL NAME err=E tol=T" per check and a last
 * line "N passed, M failed"; exits 1 if any failed, 2 if the CUDA backend
 * cannot be created (no device: the GPU test runner reads that as "no GPU").
 *
 * Every entry of model/ops.h, and the test that runs it:
 *   [x] alloc, free                   all tests
 *   [x] upload, download              test_memory (round trip), all tests
 *   [x] zero                          test_memory (a sub-range; the rest untouched)
 *   [x] timer_begin/timer_end_ms      after every CUDA call (a wait)
 *   [x] mem_peak, peak_tflops         test_memory
 *   [x] destroy                       ops_destroy at the end of each precision
 *   [x] cast_params                   test_cast_params (fp32 dst != src and dst == src, bf16)
 *   [x] download_floats               test_download_floats
 *   [x] encoder_forward/backward      test_encoder (wpe and NULL, dwte/dwpe NULL, vocab_start != 0,
 *                                     tokens in, at the edges of and outside the rank's range, repeats)
 *   [x] position_forward/backward     test_position (row_start 0 and a row shard)
 *   [x] layernorm_forward/backward    test_layernorm
 *   [x] matmul_forward/backward       test_matmul (bias and NULL; dinp NULL, dbias NULL)
 *   [x] lmhead_forward/backward       test_lmhead
 *   [x] attention_forward/backward    test_attention (p = 0 and 0.2 with head0 != 0)
 *   [x] gelu_forward/backward         test_gelu (backward also in place)
 *   [x] bias_residual_add             test_bias_residual (p = 0 and 0.2; out == x, out == res)
 *   [x] dropout                       test_dropout (p = 0 and 0.2; in place)
 *   [x] bias_backward                 test_bias_backward
 *   [x] xent_rowmax/stats/finish      test_xent (padding, vocab_start != 0, targets in and out)
 *   [x] sum_squares                   test_sum_squares
 *   [x] scale                         test_scale
 *   [x] adamw                         test_adamw (fp32: work == p and work != p; bf16: work != p) */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops.h"
#include "model/rng_core.h"
#include "util/dtype.h"
#include "util/err.h"

#define TOL_F32 1e-5
#define TOL_BF16 1e-2
#define TINY 1e-30
#define SEED 20240607u

typedef struct env {
    tg_o cpu, gpu;
    tg_dtype act;      /* the CUDA backend's activation type */
    double tol;        /* for activation-type outputs and outputs computed from them */
    uint64_t stream;   /* next random stream: every input is fresh */
    int quick;
    int passed, failed;
} env;

/* What a buffer holds: the activation type (float32 on the CPU, e->act on
 * the GPU), float32 on both, or int32 token ids. */
typedef enum { ACT, F32, I32 } kind;

/* One logical tensor held by both backends. */
typedef struct twin {
    void *c, *g;
    size_t n;
    kind k;
} twin;

/* ---- reporting ---- */

static void report(env *e, int ok, double err, double tol, const char *name, const char *detail) {
    if (ok) {
        printf("ok   %s %s  err=%.3g\n", tg_dtype_name(e->act), name, err);
        e->passed++;
    } else {
        printf("FAIL %s %s err=%.3g tol=%.0e%s%s\n", tg_dtype_name(e->act), name, err, tol, detail[0] ? " " : "", detail);
        e->failed++;
    }
    fflush(stdout);
}

/* Both tables must have the op; a missing one is a failure, not a skip. */
static int need(env *e, const char *op, int in_cpu, int in_gpu) {
    if (in_cpu && in_gpu) return 1;
    char why[96];
    snprintf(why, sizeof why, "(missing from the %s table)", !in_gpu ? "cuda" : "cpu");
    report(e, 0, NAN, 0, op, why);
    return 0;
}
#define NEED(e, op)                                                      \
    do {                                                                 \
        if (!need((e), #op, (e)->cpu->op != NULL, (e)->gpu->op != NULL)) \
            return;                                                      \
    } while (0)

/* Waits for the GPU's queue, so that an asynchronous failure is blamed on
 * the op just run: timer_end_ms waits for its mark on the stream. */
static void sync_gpu(env *e) {
    e->gpu->timer_begin(e->gpu);
    (void)e->gpu->timer_end_ms(e->gpu);
}

/* ---- host <-> backend, in either element type ---- */

static tg_dtype gpu_type(const env *e, kind k) { return k == ACT ? e->act : TG_F32; }
static size_t gpu_elem(const env *e, kind k) { return k == ACT ? tg_dtype_bytes(e->act) : 4; }

static void put_floats(tg_o o, tg_dtype t, void *dst, const float *src, size_t n) {
    if (t == TG_F32) {
        o->upload(o, dst, src, n * sizeof(float));
        return;
    }
    uint16_t *h = tg_malloc(n * sizeof(uint16_t), "bf16 staging");
    for (size_t i = 0; i < n; i++) h[i] = tg_f32_to_bf16(src[i]);
    o->upload(o, dst, h, n * sizeof(uint16_t));
    free(h);
}

static void get_floats(tg_o o, tg_dtype t, float *dst, const void *src, size_t n) {
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
static void poison(tg_o o, void *p, size_t bytes) {
    unsigned char *h = tg_malloc(bytes, "poison");
    memset(h, 0xff, bytes);
    o->upload(o, p, h, bytes);
    free(h);
}

/* ---- twins ---- */

static twin tw_alloc(env *e, kind k, size_t n, const char *what) {
    twin t = {e->cpu->alloc(e->cpu, n * 4, what), e->gpu->alloc(e->gpu, n * gpu_elem(e, k), what), n, k};
    return t;
}

/* An output both sides will overwrite: poisoned on both. */
static twin tw_out(env *e, kind k, size_t n) {
    twin t = tw_alloc(e, k, n, "test output");
    poison(e->cpu, t.c, n * 4);
    poison(e->gpu, t.g, n * gpu_elem(e, k));
    return t;
}

/* Both sides get h (activation-type values rounded to e->act first). */
static twin tw_vals(env *e, kind k, const float *h, size_t n) {
    twin t = tw_alloc(e, k, n, "test input");
    float *v = tg_malloc(n * sizeof(float), "test values");
    for (size_t i = 0; i < n; i++) v[i] = (k == ACT && e->act == TG_BF16) ? tg_bf16_to_f32(tg_f32_to_bf16(h[i])) : h[i];
    put_floats(e->cpu, TG_F32, t.c, v, n);
    put_floats(e->gpu, gpu_type(e, k), t.g, v, n);
    free(v);
    return t;
}

/* n fresh values uniform in [lo, hi). */
static float *host_rand(env *e, size_t n, float lo, float hi) {
    float *h = tg_malloc(n * sizeof(float), "random values");
    for (size_t i = 0; i < n; i++) h[i] = lo + (hi - lo) * rng_uniform_core(SEED, e->stream, i);
    e->stream++;
    return h;
}

static twin tw_rand(env *e, kind k, size_t n, float lo, float hi) {
    float *h = host_rand(e, n, lo, hi);
    twin t = tw_vals(e, k, h, n);
    free(h);
    return t;
}

static twin tw_ints(env *e, const int32_t *h, size_t n) {
    twin t = tw_alloc(e, I32, n, "test ids");
    e->cpu->upload(e->cpu, t.c, h, n * sizeof(int32_t));
    e->gpu->upload(e->gpu, t.g, h, n * sizeof(int32_t));
    return t;
}

/* The CPU side's values of src, as seen by the host. */
static float *cpu_values(env *e, twin src) {
    float *h = tg_malloc(src.n * sizeof(float), "reference values");
    get_floats(e->cpu, TG_F32, h, src.c, src.n);
    return h;
}

/* A new twin holding the CPU side's values of src on both sides: the
 * reference's intermediate results (saved statistics, probabilities) fed to
 * the next op, or a copy of an input for an in-place call. */
static twin tw_ref(env *e, twin src) {
    float *h = cpu_values(e, src);
    twin t = tw_vals(e, src.k, h, src.n);
    free(h);
    return t;
}

static void tw_free(env *e, twin t) {
    if (t.c) e->cpu->free(e->cpu, t.c);
    if (t.g) e->gpu->free(e->gpu, t.g);
}

/* ---- comparison ---- */

/* Relative error of got against want (see the top of the file); *at is the
 * worst element. NaN when either side has a NaN or infinity; -1 when the
 * reference is all zeros. */
static double rel_err(const float *got, const float *want, size_t n, size_t *at) {
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

static void compare_floats(env *e, const float *got, const float *want, size_t n, double tol, const char *name) {
    size_t at;
    double err = rel_err(got, want, n, &at);
    char detail[256];
    if (err == -1.0) {
        snprintf(detail, sizeof detail, "(the CPU reference is all zeros: the check proves nothing)");
        report(e, 0, err, tol, name, detail);
        return;
    }
    snprintf(detail, sizeof detail, "(element %zu of %zu: cuda %.9g cpu %.9g)", at, n, (double)got[at], (double)want[at]);
    report(e, err < tol, err, tol, name, detail);
}

/* Compares the two sides of t after the calls that wrote it. */
static void check(env *e, twin t, double tol, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void check(env *e, twin t, double tol, const char *fmt, ...) {
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
static void check_true(env *e, int ok, const char *name, const char *detail) {
    if (ok) {
        printf("ok   %s %s  err=0 %s\n", tg_dtype_name(e->act), name, detail);
        e->passed++;
    } else {
        printf("FAIL %s %s err=- tol=- %s\n", tg_dtype_name(e->act), name, detail);
        e->failed++;
    }
    fflush(stdout);
}

/* ---- memory ---- */

static void test_memory(env *e) {
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

static void test_cast_params(env *e, size_t n) {
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

static void test_download_floats(env *e, size_t n) {
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

/* ---- embeddings ---- */

static void test_encoder(env *e, int B, int T, int C, int vocab_start, int vocab_local, int vocab_all) {
    NEED(e, encoder_forward);
    NEED(e, encoder_backward);
    const size_t N = (size_t)B * T;
    int32_t *tok = tg_malloc(N * sizeof(int32_t), "tokens");
    for (size_t i = 0; i < N; i++) tok[i] = (int32_t)(rng_bits_core(SEED, e->stream, i) % (uint64_t)vocab_all);
    e->stream++;
    /* just outside the rank's range on both sides, its first and last rows,
     * and one token repeated (its gradient rows add up) */
    tok[0] = vocab_start - 1;
    tok[1] = vocab_start;
    tok[2] = vocab_start + vocab_local - 1;
    tok[3] = vocab_start + vocab_local;
    tok[4] = tok[5] = tok[N - 1] = vocab_start + vocab_local / 2;
    twin tokens = tw_ints(e, tok, N);
    twin wte = tw_rand(e, ACT, (size_t)vocab_local * C, -1, 1), wpe = tw_rand(e, ACT, (size_t)T * C, -1, 1);
    for (int with_wpe = 1; with_wpe >= 0; with_wpe--) {
        twin out = tw_out(e, ACT, N * C);
        e->cpu->encoder_forward(e->cpu, out.c, tokens.c, wte.c, with_wpe ? wpe.c : NULL, B, T, C, vocab_start, vocab_local);
        e->gpu->encoder_forward(e->gpu, out.g, tokens.g, wte.g, with_wpe ? wpe.g : NULL, B, T, C, vocab_start, vocab_local);
        check(e, out, e->tol, "encoder_forward%s B=%d T=%d C=%d rows [%d,+%d)", with_wpe ? "" : "_no_wpe", B, T, C,
              vocab_start, vocab_local);
        tw_free(e, out);
    }
    twin dout = tw_rand(e, ACT, N * C, -1, 1);
    for (int which = 0; which < 3; which++) { /* both gradients, dwte only, dwpe only */
        const int use_wte = which != 2, use_wpe = which != 1;
        twin dwte = tw_rand(e, F32, (size_t)vocab_local * C, -1, 1), dwpe = tw_rand(e, F32, (size_t)T * C, -1, 1);
        e->cpu->encoder_backward(e->cpu, use_wte ? dwte.c : NULL, use_wpe ? dwpe.c : NULL, dout.c, tokens.c, B, T, C, vocab_start,
                                 vocab_local);
        e->gpu->encoder_backward(e->gpu, use_wte ? dwte.g : NULL, use_wpe ? dwpe.g : NULL, dout.g, tokens.g, B, T, C, vocab_start,
                                 vocab_local);
        const char *tag = which == 0 ? "" : which == 1 ? "_dwpe_null" : "_dwte_null";
        if (use_wte) check(e, dwte, e->tol, "encoder_backward%s dwte B=%d T=%d C=%d rows [%d,+%d)", tag, B, T, C, vocab_start, vocab_local);
        if (use_wpe) check(e, dwpe, e->tol, "encoder_backward%s dwpe B=%d T=%d C=%d", tag, B, T, C);
        tw_free(e, dwte);
        tw_free(e, dwpe);
    }
    tw_free(e, dout);
    tw_free(e, wte);
    tw_free(e, wpe);
    tw_free(e, tokens);
    free(tok);
}

static void test_position(env *e, int row_start, int N, int T, int C) {
    NEED(e, position_forward);
    NEED(e, position_backward);
    twin wpe = tw_rand(e, ACT, (size_t)T * C, -1, 1), out = tw_rand(e, ACT, (size_t)N * C, -1, 1); /* out accumulates */
    e->cpu->position_forward(e->cpu, out.c, wpe.c, row_start, N, T, C);
    e->gpu->position_forward(e->gpu, out.g, wpe.g, row_start, N, T, C);
    check(e, out, e->tol, "position_forward rows [%d,+%d) T=%d C=%d", row_start, N, T, C);
    twin dout = tw_rand(e, ACT, (size_t)N * C, -1, 1), dwpe = tw_rand(e, F32, (size_t)T * C, -1, 1);
    e->cpu->position_backward(e->cpu, dwpe.c, dout.c, row_start, N, T, C);
    e->gpu->position_backward(e->gpu, dwpe.g, dout.g, row_start, N, T, C);
    check(e, dwpe, e->tol, "position_backward rows [%d,+%d) T=%d C=%d", row_start, N, T, C);
    tw_free(e, wpe);
    tw_free(e, out);
    tw_free(e, dout);
    tw_free(e, dwpe);
}

/* ---- LayerNorm ---- */

static void test_layernorm(env *e, int N, int C) {
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
    e->cpu->layernorm_backward(e->cpu, dinp.c, dw.c, db.c, dout.c, inp.c, w.c, mean_r.c, rstd_r.c, N, C);
    e->gpu->layernorm_backward(e->gpu, dinp.g, dw.g, db.g, dout.g, inp.g, w.g, mean_r.g, rstd_r.g, N, C);
    check(e, dinp, e->tol, "layernorm_backward dinp N=%d C=%d", N, C);
    check(e, dw, e->tol, "layernorm_backward dw N=%d C=%d", N, C);
    check(e, db, e->tol, "layernorm_backward db N=%d C=%d", N, C);
    twin all[] = {inp, w, b, out, mean, rstd, mean_r, rstd_r, dout, dinp, dw, db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

/* ---- products ---- */

static void test_matmul(env *e, int N, int C, int OC) {
    NEED(e, matmul_forward);
    NEED(e, matmul_backward);
    twin inp = tw_rand(e, ACT, (size_t)N * C, -1, 1), w = tw_rand(e, ACT, (size_t)C * OC, -1, 1);
    twin bias = tw_rand(e, ACT, OC, -1, 1);
    for (int with_bias = 1; with_bias >= 0; with_bias--) {
        twin out = tw_out(e, ACT, (size_t)N * OC);
        e->cpu->matmul_forward(e->cpu, out.c, inp.c, w.c, with_bias ? bias.c : NULL, N, C, OC);
        e->gpu->matmul_forward(e->gpu, out.g, inp.g, w.g, with_bias ? bias.g : NULL, N, C, OC);
        check(e, out, e->tol, "matmul_forward%s N=%d C=%d OC=%d", with_bias ? "_bias" : "_no_bias", N, C, OC);
        tw_free(e, out);
    }
    twin dout = tw_rand(e, ACT, (size_t)N * OC, -1, 1);
    for (int which = 0; which < 3; which++) { /* everything, dbias NULL, dinp NULL */
        const int use_dinp = which != 2, use_dbias = which != 1;
        twin dinp = tw_out(e, ACT, (size_t)N * C);
        twin dw = tw_rand(e, F32, (size_t)C * OC, -1, 1), dbias = tw_rand(e, F32, OC, -1, 1); /* accumulate */
        e->cpu->matmul_backward(e->cpu, use_dinp ? dinp.c : NULL, dw.c, use_dbias ? dbias.c : NULL, dout.c, inp.c, w.c, N, C, OC);
        e->gpu->matmul_backward(e->gpu, use_dinp ? dinp.g : NULL, dw.g, use_dbias ? dbias.g : NULL, dout.g, inp.g, w.g, N, C, OC);
        const char *tag = which == 0 ? "" : which == 1 ? "_dbias_null" : "_dinp_null";
        if (use_dinp) check(e, dinp, e->tol, "matmul_backward%s dinp N=%d C=%d OC=%d", tag, N, C, OC);
        check(e, dw, e->tol, "matmul_backward%s dw N=%d C=%d OC=%d", tag, N, C, OC);
        if (use_dbias) check(e, dbias, e->tol, "matmul_backward%s dbias N=%d C=%d OC=%d", tag, N, C, OC);
        tw_free(e, dinp);
        tw_free(e, dw);
        tw_free(e, dbias);
    }
    tw_free(e, dout);
    tw_free(e, inp);
    tw_free(e, w);
    tw_free(e, bias);
}

static void test_lmhead(env *e, int N, int C, int V) {
    NEED(e, lmhead_forward);
    NEED(e, lmhead_backward);
    twin x = tw_rand(e, ACT, (size_t)N * C, -1, 1), wte = tw_rand(e, ACT, (size_t)V * C, -1, 1);
    twin logits = tw_out(e, ACT, (size_t)N * V);
    e->cpu->lmhead_forward(e->cpu, logits.c, x.c, wte.c, N, C, V);
    e->gpu->lmhead_forward(e->gpu, logits.g, x.g, wte.g, N, C, V);
    check(e, logits, e->tol, "lmhead_forward N=%d C=%d V=%d", N, C, V);
    twin dlogits = tw_rand(e, ACT, (size_t)N * V, -1, 1), dx = tw_out(e, ACT, (size_t)N * C);
    twin dwte = tw_rand(e, F32, (size_t)V * C, -1, 1); /* accumulates */
    e->cpu->lmhead_backward(e->cpu, dx.c, dwte.c, dlogits.c, x.c, wte.c, N, C, V);
    e->gpu->lmhead_backward(e->gpu, dx.g, dwte.g, dlogits.g, x.g, wte.g, N, C, V);
    check(e, dx, e->tol, "lmhead_backward dx N=%d C=%d V=%d", N, C, V);
    check(e, dwte, e->tol, "lmhead_backward dwte N=%d C=%d V=%d", N, C, V);
    twin all[] = {x, wte, logits, dlogits, dx, dwte};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

/* ---- attention ---- */

static void test_attention(env *e, int B, int T, int NH, int HS, tg_dropout drop) {
    NEED(e, attention_forward);
    NEED(e, attention_backward);
    const size_t n_qkv = (size_t)B * T * 3 * NH * HS, n_out = (size_t)B * T * NH * HS, n_att = (size_t)B * NH * T * T;
    char shape[128];
    snprintf(shape, sizeof shape, "B=%d T=%d NH=%d HS=%d p=%g row0=%llu head0=%d/%d", B, T, NH, HS, (double)drop.p,
             (unsigned long long)drop.row0, drop.head0, drop.heads_total);
    twin qkv = tw_rand(e, ACT, n_qkv, -1, 1);
    twin out = tw_out(e, ACT, n_out), att = tw_out(e, ACT, n_att);
    e->cpu->attention_forward(e->cpu, out.c, att.c, qkv.c, B, T, NH, HS, drop);
    e->gpu->attention_forward(e->gpu, out.g, att.g, qkv.g, B, T, NH, HS, drop);
    check(e, out, e->tol, "attention_forward out %s", shape);
    check(e, att, e->tol, "attention_forward att %s", shape);
    /* backward from the reference's probabilities */
    twin att_r = tw_ref(e, att), dout = tw_rand(e, ACT, n_out, -1, 1), dqkv = tw_out(e, ACT, n_qkv);
    e->cpu->attention_backward(e->cpu, dqkv.c, dout.c, qkv.c, att_r.c, B, T, NH, HS, drop);
    e->gpu->attention_backward(e->gpu, dqkv.g, dout.g, qkv.g, att_r.g, B, T, NH, HS, drop);
    check(e, dqkv, e->tol, "attention_backward dqkv %s", shape);
    twin all[] = {qkv, out, att, att_r, dout, dqkv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

/* ---- element-wise and row ops ---- */

static void test_gelu(env *e, size_t n) {
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

static void test_bias_residual(env *e, int N, int C, tg_dropout drop) {
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

static void test_dropout(env *e, int N, int C, tg_dropout drop) {
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

static void test_bias_backward(env *e, int N, int C) {
    NEED(e, bias_backward);
    twin dout = tw_rand(e, ACT, (size_t)N * C, -1, 1), dbias = tw_rand(e, F32, C, -1, 1); /* accumulates */
    e->cpu->bias_backward(e->cpu, dbias.c, dout.c, N, C);
    e->gpu->bias_backward(e->gpu, dbias.g, dout.g, N, C);
    check(e, dbias, e->tol, "bias_backward N=%d C=%d", N, C);
    tw_free(e, dout);
    tw_free(e, dbias);
}

/* ---- cross-entropy ---- */

/* V local columns of which the first n_real are real; this rank's columns
 * start at vocab_start (0, or at least 5). Targets: inside the range (its
 * first and last real column among them) and outside it, never in the
 * padding columns (no real token is there). */
static void test_xent(env *e, int N, int V, int n_real, int vocab_start) {
    NEED(e, xent_rowmax);
    NEED(e, xent_stats);
    NEED(e, xent_finish);
    char shape[96];
    snprintf(shape, sizeof shape, "N=%d V=%d n_real=%d vocab_start=%d", N, V, n_real, vocab_start);
    float *l = host_rand(e, (size_t)N * V, -4, 4);
    for (int n = 0; n < N; n++)
        for (int v = n_real; v < V; v++) l[(size_t)n * V + v] = 20.0f; /* padding would dominate if counted */
    int32_t *tg = tg_malloc((size_t)N * sizeof(int32_t), "targets");
    for (int n = 0; n < N; n++) {
        uint64_t r = rng_bits_core(SEED, e->stream, (uint64_t)n);
        if (n % 3 == 0) tg[n] = (n % 2 && vocab_start >= 5) ? vocab_start - 1 - (int)(r % 5) : vocab_start + V + (int)(r % 7);
        else tg[n] = vocab_start + (int)(r % (uint64_t)n_real);
    }
    e->stream++;
    tg[1] = vocab_start;
    tg[2] = vocab_start + n_real - 1;
    twin logits = tw_vals(e, ACT, l, (size_t)N * V), targets = tw_ints(e, tg, N);
    twin rowmax = tw_out(e, F32, N);
    e->cpu->xent_rowmax(e->cpu, rowmax.c, logits.c, N, V, n_real);
    e->gpu->xent_rowmax(e->gpu, rowmax.g, logits.g, N, V, n_real);
    check(e, rowmax, e->tol, "xent_rowmax %s", shape);
    /* each pass from the reference's results of the one before */
    twin rowmax_r = tw_ref(e, rowmax), stats = tw_out(e, F32, 2 * (size_t)N);
    e->cpu->xent_stats(e->cpu, stats.c, logits.c, rowmax_r.c, targets.c, N, V, n_real, vocab_start);
    e->gpu->xent_stats(e->gpu, stats.g, logits.g, rowmax_r.g, targets.g, N, V, n_real, vocab_start);
    check(e, stats, e->tol, "xent_stats %s", shape);
    twin stats_r = tw_ref(e, stats), losses = tw_out(e, F32, N);
    const float dloss = 0.37f;
    e->cpu->xent_finish(e->cpu, losses.c, logits.c, rowmax_r.c, stats_r.c, targets.c, N, V, n_real, vocab_start, dloss);
    e->gpu->xent_finish(e->gpu, losses.g, logits.g, rowmax_r.g, stats_r.g, targets.g, N, V, n_real, vocab_start, dloss);
    check(e, losses, e->tol, "xent_finish losses %s", shape);
    check(e, logits, e->tol, "xent_finish dlogits %s", shape);
    twin all[] = {logits, targets, rowmax, rowmax_r, stats, stats_r, losses};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
    free(l);
    free(tg);
}

/* ---- optimizer and norms (float32 buffers) ---- */

static void test_sum_squares(env *e, size_t n) {
    NEED(e, sum_squares);
    twin x = tw_rand(e, F32, n, -1, 1);
    double want = e->cpu->sum_squares(e->cpu, x.c, n), got = e->gpu->sum_squares(e->gpu, x.g, n);
    float w = (float)want, g = (float)got;
    double err = fabs(got - want) / (fabs(want) > TINY ? fabs(want) : TINY);
    char name[64], detail[96];
    snprintf(name, sizeof name, "sum_squares n=%zu", n);
    snprintf(detail, sizeof detail, "(cuda %.17g cpu %.17g)", got, want);
    report(e, isfinite(w) && isfinite(g) && want > 0 && err < TOL_F32, err, TOL_F32, name, detail);
    tw_free(e, x);
}

static void test_scale(env *e, size_t n) {
    NEED(e, scale);
    twin x = tw_rand(e, F32, n, -1, 1);
    e->cpu->scale(e->cpu, x.c, 0.3f, n);
    e->gpu->scale(e->gpu, x.g, 0.3f, n);
    check(e, x, TOL_F32, "scale n=%zu", n);
    tw_free(e, x);
}

/* One AdamW step (t = 3) on random state; work is p itself or a separate
 * activation-type buffer. */
static void test_adamw(env *e, size_t n, int work_is_p) {
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

/* ---- the whole table at one precision ---- */

static void run_all(env *e) {
    /* sizes that are multiples of no tile: B*T = 39 rows, C = 72, 3 heads of 24 */
    const int B = 3, T = 13, N = B * T, C = 72, NH = 3, HS = C / NH;
    const tg_dropout none = {0};
    const tg_dropout rows = {0.2f, 1234, 77, 11, 0, 0};
    const tg_dropout rows_far = {0.2f, 1234, 79, 100000000, 0, 0}; /* element counters past 2^32 */
    const tg_dropout heads = {0.2f, 1234, 78, 5, 1, 5};              /* heads 1..3 of 5 */
    const tg_dropout heads_far = {0.2f, 1234, 83, 20000000, 1, 5};   /* counters past 2^32 */
    const size_t odd = 1001, mid = 100003, big = ((size_t)3 << 20) + 5;

    test_memory(e);
    test_cast_params(e, mid);
    test_download_floats(e, mid);
    test_encoder(e, B, T, C, 50, 97, 200);
    test_position(e, 0, N, T, C);
    test_position(e, 7, 20, T, C);
    test_layernorm(e, N, C);
    test_matmul(e, N, C, 3 * C);
    test_matmul(e, N, C, 4 * C);
    test_matmul(e, N, 4 * C, C);
    test_lmhead(e, N, C, 1000);
    test_attention(e, B, T, NH, HS, none);
    test_attention(e, B, T, NH, HS, heads);
    test_attention(e, B, T, NH, HS, heads_far);
    test_gelu(e, (size_t)N * 4 * C);
    test_gelu(e, odd);
    test_bias_residual(e, N, C, none);
    test_bias_residual(e, N, C, rows);
    test_bias_residual(e, N, C, rows_far);
    test_dropout(e, N, C, none);
    test_dropout(e, N, C, rows);
    test_bias_backward(e, N, C);
    test_bias_backward(e, N, 4 * C);
    test_xent(e, N, 1000, 997, 2000);
    test_xent(e, N, 1000, 1000, 0);
    test_sum_squares(e, odd);
    test_scale(e, mid);
    if (e->act == TG_F32) test_adamw(e, mid, 1);
    test_adamw(e, mid, 0);
    if (e->quick) return;

    /* larger cases: GEMM tiling, many blocks of partial sums, long rows */
    printf("# %s: large cases\n", tg_dtype_name(e->act));
    test_encoder(e, 8, 256, 768, 6288, 6288, 50257);
    test_position(e, 512, 2048, 1024, 768);
    test_layernorm(e, 1024, 768);
    test_layernorm(e, 16384, 768);
    test_matmul(e, 1024, 768, 3 * 768);
    test_matmul(e, 1024, 4 * 768, 768);
    test_lmhead(e, 1024, 768, 5000);
    test_attention(e, 2, 1000, 12, 64, none);
    test_attention(e, 2, 1000, 12, 64, (tg_dropout){0.2f, 1234, 80, 1000000, 12, 48});
    test_gelu(e, big);
    test_bias_residual(e, 1024, 768, (tg_dropout){0.2f, 1234, 81, 3000000, 0, 0});
    test_dropout(e, 1024, 3072, (tg_dropout){0.2f, 1234, 82, 2000000, 0, 0});
    test_bias_backward(e, 16384, 3072);
    test_xent(e, 257, 50304, 50257, 0);
    test_xent(e, 129, 6288, 6241, 44016); /* the last rank of TP = 8 over GPT-2's vocabulary */
    test_sum_squares(e, ((size_t)3 << 22) + 5);
    test_scale(e, big);
    test_cast_params(e, big);
    test_adamw(e, big, 0);
}

int main(int argc, char **argv) {
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else {
            fprintf(stderr, "usage: %s [--quick]   (--quick skips the large cases)\n", argv[0]);
            return 1; /* 2 means "no device" to tests/gpu/run_gpu.sh */
        }
    }
    const tg_dtype precisions[2] = {TG_F32, TG_BF16};
    int passed = 0, failed = 0;
    for (int i = 0; i < 2; i++) {
        tg_err err;
        err.msg[0] = '\0';
        tg_ops *gpu = ops_cuda_create(0, precisions[i], &err);
        if (!gpu) {
            if (i == 0) { /* no usable device at all */
                printf("test_cuda_kernels: cannot create the CUDA backend: %s\n", err.msg);
                return 2;
            }
            printf("FAIL %s ops_cuda_create err=- tol=- (%s)\n", tg_dtype_name(precisions[i]), err.msg);
            failed++;
            continue;
        }
        env e = {ops_cpu(), gpu, precisions[i], precisions[i] == TG_BF16 ? TOL_BF16 : TOL_F32, 1, quick, 0, 0};
        printf("# %s activations on %s\n", tg_dtype_name(e.act), gpu->device);
        if (gpu->act != precisions[i]) {
            char detail[96];
            snprintf(detail, sizeof detail, "(asked for %s, the backend says %s)", tg_dtype_name(precisions[i]),
                     tg_dtype_name(gpu->act));
            check_true(&e, 0, "ops_cuda_create_act", detail);
        }
        run_all(&e);
        ops_destroy(gpu);
        passed += e.passed;
        failed += e.failed;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

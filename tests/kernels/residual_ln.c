/* Kernel family: the residual add fused with the LayerNorm after it (bias_residual_layernorm).
 * CPU: against a double-precision reference, and bitwise against
 * bias_residual_add then layernorm_forward (float32 and the bf16 flavour),
 * with out aliasing x or res as the model calls it. With CUDA (or the
 * emulation, tests/emu) the CUDA op against the CPU one (tests/kernels/twin.h)
 * and bitwise against the CUDA backend's own two unfused ops. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/kernels/check.h"

enum { ALIAS_NONE, ALIAS_OUT_IS_X, ALIAS_OUT_IS_RES, ALIAS_KINDS };
static const char *const ALIAS_NAMES[ALIAS_KINDS] = {"", "_out_is_x", "_out_is_res"};

/* The rows out = dropout(x + bias) + res and their LayerNorm, in double. */
static void residual_ln_ref(const float *x, const float *bias, const float *res, const float *w, const float *b, int N, int C,
                            const tg_dropout *d, double *out, double *ln, double *mean, double *rstd) {
    for (int n = 0; n < N; n++) {
        double *r = out + (size_t)n * C, m = 0, v = 0;
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)n * C + c;
            const double scale = d->p > 0 ? cpu_dropout_scale(d, (d->row0 + (uint64_t)n) * (uint64_t)C + (uint64_t)c) : 1.0;
            r[c] = ((double)x[i] + bias[c]) * scale + res[i];
            m += r[c];
        }
        m /= C;
        for (int c = 0; c < C; c++) v += (r[c] - m) * (r[c] - m);
        const double s = 1.0 / sqrt(v / C + 1e-5);
        for (int c = 0; c < C; c++) ln[(size_t)n * C + c] = (r[c] - m) * s * w[c] + b[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

static void check_reference(tally *t, int N, int C, tg_dropout d) {
    const size_t NC = (size_t)N * C;
    float *x = randf(NC, 120, 1), *bias = randf(C, 121, 1), *res = randf(NC, 122, 2), *w = randf(C, 123, 1);
    float *b = randf(C, 124, 1), *out = poisoned(NC), *ln = poisoned(NC), *mean = poisoned(N), *rstd = poisoned(N);
    for (size_t i = 0; i < NC; i++) res[i] += 0.5f; /* a non-zero mean */
    double *want = malloc(sizeof(double) * NC), *want_ln = malloc(sizeof(double) * NC);
    double *want_mean = malloc(sizeof(double) * N), *want_rstd = malloc(sizeof(double) * N);
    residual_ln_ref(x, bias, res, w, b, N, C, &d, want, want_ln, want_mean, want_rstd);
    cpu_bias_residual_layernorm(NULL, out, ln, mean, rstd, x, bias, res, w, b, N, C, d);
    const char *tag = d.p > 0 ? "dropout" : "plain";
    char name[96];
    snprintf(name, sizeof name, "bias_residual_layernorm_out_%s", tag);
    expect_close(t, name, out, want, NC, 1e-6, 1e-6);
    snprintf(name, sizeof name, "bias_residual_layernorm_ln_%s", tag);
    expect_close(t, name, ln, want_ln, NC, 1e-5, 1e-5);
    snprintf(name, sizeof name, "bias_residual_layernorm_stats_%s", tag);
    size_t at = 0;
    const double worst_m = mismatch(mean, want_mean, (size_t)N, 1e-5, 1e-6, &at);
    const double worst_s = mismatch(rstd, want_rstd, (size_t)N, 1e-5, 1e-6, &at);
    report(t, worst_m <= 1 && worst_s <= 1, name, "mean %.2fx, rstd %.2fx tolerance", worst_m, worst_s);
    free(x); free(bias); free(res); free(w); free(b); free(out); free(ln); free(mean); free(rstd);
    free(want); free(want_ln); free(want_mean); free(want_rstd);
}

/* A fresh buffer of backend o holding h (rounded to its activation type). */
static void *act_buffer(tg_o o, const float *h, size_t n) {
    const size_t eb = tg_dtype_bytes(o->act);
    void *p = o->alloc(o, n * eb, "test buffer");
    if (o->act == TG_F32) {
        o->upload(o, p, h, n * eb);
        return p;
    }
    uint16_t *s = malloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) s[i] = tg_f32_to_bf16(h[i]);
    o->upload(o, p, s, n * eb);
    free(s);
    return p;
}

/* Byte-equal buffers of backend o; *why names the first difference. */
static int same_bytes(tg_o o, const void *a, const void *b, size_t bytes, const char *what, char *why, size_t len) {
    unsigned char *ha = malloc(bytes), *hb = malloc(bytes);
    o->download(o, ha, a, bytes);
    o->download(o, hb, b, bytes);
    size_t i = 0;
    while (i < bytes && ha[i] == hb[i]) i++;
    if (i < bytes) snprintf(why, len, "%s differs at byte %zu of %zu", what, i, bytes);
    free(ha);
    free(hb);
    return i == bytes;
}

/* The fused op of backend o against its bias_residual_add then
 * layernorm_forward, bitwise (out, ln_out, mean, rstd); out aliasing x or
 * res as `alias` says. */
static int fused_is_sequence(tg_o o, int N, int C, tg_dropout d, int alias, char *why, size_t len) {
    const size_t NC = (size_t)N * C, eb = tg_dtype_bytes(o->act);
    float *hx = randf(NC, 130, 1), *hb = randf(C, 131, 1), *hr = randf(NC, 132, 1), *hw = randf(C, 133, 1);
    float *hlb = randf(C, 134, 1), *nan = poisoned(NC);
    const float *out_init = alias == ALIAS_OUT_IS_X ? hx : alias == ALIAS_OUT_IS_RES ? hr : nan;
    void *x = act_buffer(o, hx, NC), *bias = act_buffer(o, hb, C), *res = act_buffer(o, hr, NC), *w = act_buffer(o, hw, C);
    void *b = act_buffer(o, hlb, C), *out_f = act_buffer(o, out_init, NC), *out_s = act_buffer(o, out_init, NC);
    void *ln_f = act_buffer(o, nan, NC), *ln_s = act_buffer(o, nan, NC);
    float *stats = o->alloc(o, 4 * (size_t)N * sizeof(float), "test statistics"); /* mean, rstd: fused, then sequence */
    float *mean_f = stats, *rstd_f = stats + N, *mean_s = stats + 2 * N, *rstd_s = stats + 3 * N;
    o->bias_residual_layernorm(o, out_f, ln_f, mean_f, rstd_f, alias == ALIAS_OUT_IS_X ? out_f : x, bias,
                               alias == ALIAS_OUT_IS_RES ? out_f : res, w, b, N, C, d);
    o->bias_residual_add(o, out_s, alias == ALIAS_OUT_IS_X ? out_s : x, bias, alias == ALIAS_OUT_IS_RES ? out_s : res, N, C, d);
    o->layernorm_forward(o, ln_s, mean_s, rstd_s, out_s, w, b, N, C);
    const int same = same_bytes(o, out_f, out_s, NC * eb, "out", why, len) &&
                     same_bytes(o, ln_f, ln_s, NC * eb, "ln_out", why, len) &&
                     same_bytes(o, mean_f, mean_s, (size_t)N * 4, "mean", why, len) &&
                     same_bytes(o, rstd_f, rstd_s, (size_t)N * 4, "rstd", why, len);
    void *bufs[] = {x, bias, res, w, b, out_f, out_s, ln_f, ln_s, stats};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) o->free(o, bufs[i]);
    free(hx); free(hb); free(hr); free(hw); free(hlb); free(nan);
    return same;
}

void kcheck_residual_layernorm(tally *t) {
    const tg_dropout none = {0}, drop = {0.1f, 7, 43, 5, 0, 0, NULL};
    check_reference(t, 7, 67, none);
    check_reference(t, 7, 67, drop);
    tg_err err;
    tg_ops *bf16 = ops_cpu_bf16_create(&err);
    if (!bf16) {
        report(t, 0, "bias_residual_layernorm_bf16_backend", "%s", err.msg);
        return;
    }
    const tg_o backends[2] = {ops_cpu(), bf16};
    for (int k = 0; k < 2; k++)
        for (int alias = 0; alias < ALIAS_KINDS; alias++)
            for (int p = 0; p < 2; p++) {
                char name[128], why[128] = "";
                snprintf(name, sizeof name, "bias_residual_layernorm_is_sequence_%s%s_%s", tg_dtype_name(backends[k]->act),
                         ALIAS_NAMES[alias], p ? "dropout" : "plain");
                report(t, fused_is_sequence(backends[k], 9, 37, p ? drop : none, alias, why, sizeof why), name, "%s", why);
            }
    ops_destroy(bf16);
}

#ifdef TG_CUDA
/* ---- CUDA against the CPU, and against its own unfused ops ---- */
#include "tests/kernels/twin.h"

/* Element `shift` of a twin's side: the start of a (mis)aligned view. */
static void *cpu_at(twin t, size_t shift) { return (float *)t.c + shift; }
static void *gpu_at(env *e, twin t, size_t shift) { return (char *)t.g + shift * gpu_elem(e, t.k); }

/* The GPU side of t from element shift on, n host floats (the caller frees them). */
static float *gpu_values(env *e, twin t, size_t shift, size_t n) {
    float *h = tg_malloc(n * sizeof(float), "cuda values");
    get_floats(e->gpu, gpu_type(e, t.k), h, gpu_at(e, t, shift), n);
    return h;
}

/* The CUDA side of t against the CPU's, both from element shift on. */
static void check_view(env *e, twin t, size_t shift, size_t n, const char *name) {
    sync_gpu(e);
    float *want = cpu_values(e, t), *got = gpu_values(e, t, shift, n);
    compare_floats(e, got, want + shift, n, e->tol, name);
    free(want);
    free(got);
}

/* The fused result a and the unfused one b on the GPU, bit for bit (as
 * floats: bf16 widens exactly; the poison's NaN would fail check_view). */
static void check_same_bits(env *e, twin a, twin b, size_t shift, size_t n, const char *name) {
    float *fa = gpu_values(e, a, shift, n), *fb = gpu_values(e, b, shift, n);
    size_t i = 0;
    while (i < n && memcmp(&fa[i], &fb[i], sizeof(float)) == 0) i++;
    char detail[160] = "";
    if (i < n)
        snprintf(detail, sizeof detail, "(element %zu of %zu: fused %.9g, unfused %.9g)", i, n, (double)fa[i], (double)fb[i]);
    check_true(e, i == n, name, detail);
    free(fa);
    free(fb);
}

/* An output of the op: poisoned, or a copy of the input it aliases. */
static twin rl_out(env *e, const twin *aliased, size_t n) { return aliased ? tw_ref(e, *aliased) : tw_out(e, ACT, n); }

/* One call of the fused op on both sides and of the two unfused ops on the
 * GPU; activation buffers start at element `shift` (1: misaligned). */
static void rl_case(env *e, int N, int C, tg_dropout drop, size_t shift, int alias) {
    const size_t NC = (size_t)N * C, n = NC + shift;
    char shape[128], name[200];
    snprintf(shape, sizeof shape, "N=%d C=%d p=%g row0=%llu%s", N, C, (double)drop.p, (unsigned long long)drop.row0,
             shift ? " misaligned" : "");
    twin x = tw_rand(e, ACT, n, -1, 1), res = tw_rand(e, ACT, n, -0.5f, 1.5f), bias = tw_rand(e, ACT, C, -1, 1);
    twin w = tw_rand(e, ACT, C, -1, 1), b = tw_rand(e, ACT, C, -1, 1);
    const twin *aliased = alias == ALIAS_OUT_IS_X ? &x : alias == ALIAS_OUT_IS_RES ? &res : NULL;
    twin out = rl_out(e, aliased, n), out_u = rl_out(e, aliased, n); /* fused (both sides), unfused (GPU) */
    twin ln = tw_out(e, ACT, n), ln_u = tw_out(e, ACT, n);
    twin mean = tw_out(e, F32, N), rstd = tw_out(e, F32, N), mean_u = tw_out(e, F32, N), rstd_u = tw_out(e, F32, N);
    const twin xs = alias == ALIAS_OUT_IS_X ? out : x, rs = alias == ALIAS_OUT_IS_RES ? out : res;
    const twin xs_u = alias == ALIAS_OUT_IS_X ? out_u : x, rs_u = alias == ALIAS_OUT_IS_RES ? out_u : res;
    e->cpu->bias_residual_layernorm(e->cpu, cpu_at(out, shift), cpu_at(ln, shift), mean.c, rstd.c, cpu_at(xs, shift), bias.c,
                                    cpu_at(rs, shift), w.c, b.c, N, C, drop);
    e->gpu->bias_residual_layernorm(e->gpu, gpu_at(e, out, shift), gpu_at(e, ln, shift), mean.g, rstd.g, gpu_at(e, xs, shift),
                                    bias.g, gpu_at(e, rs, shift), w.g, b.g, N, C, drop);
    e->gpu->bias_residual_add(e->gpu, gpu_at(e, out_u, shift), gpu_at(e, xs_u, shift), bias.g, gpu_at(e, rs_u, shift), N, C,
                              drop);
    e->gpu->layernorm_forward(e->gpu, gpu_at(e, ln_u, shift), mean_u.g, rstd_u.g, gpu_at(e, out_u, shift), w.g, b.g, N, C);
    const twin got[4] = {out, ln, mean, rstd}, unfused[4] = {out_u, ln_u, mean_u, rstd_u};
    const char *const what[4] = {"out", "ln_out", "mean", "rstd"};
    for (int k = 0; k < 4; k++) {
        const size_t at = k < 2 ? shift : 0, len = k < 2 ? NC : (size_t)N;
        snprintf(name, sizeof name, "bias_residual_layernorm%s %s %s", ALIAS_NAMES[alias], what[k], shape);
        check_view(e, got[k], at, len, name);
        snprintf(name, sizeof name, "bias_residual_layernorm%s_is_unfused %s %s", ALIAS_NAMES[alias], what[k], shape);
        check_same_bits(e, got[k], unfused[k], at, len, name);
    }
    twin all[] = {x, res, bias, w, b, out, out_u, ln, ln_u, mean, rstd, mean_u, rstd_u};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

void cuda_test_residual_layernorm(env *e, int N, int C, tg_dropout drop, int misaligned) {
    NEED(e, bias_residual_layernorm);
    NEED(e, bias_residual_add);
    NEED(e, layernorm_forward);
    for (int alias = 0; alias < ALIAS_KINDS; alias++) rl_case(e, N, C, drop, misaligned ? 1 : 0, alias);
}
#endif

/* Kernel tests: every CPU kernel against a naive double-precision version on
 * random inputs (outputs poisoned with NaN first, sizes that are not multiples
 * of any tile), and every backward kernel against central finite differences
 * of the double-precision forward. Prints "ok NAME" / "not ok NAME - why". */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/cpu/gemm.h"
#include "model/cpu/kernels.h"
#include "model/rng.h"

typedef struct { int failed, passed; } tally;

static void report(tally *t, int ok, const char *name, const char *fmt, ...) {
    if (ok) {
        printf("ok %s\n", name);
        t->passed++;
        return;
    }
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    printf("not ok %s - %s\n", name, why);
    t->failed++;
}

/* ---- helpers ---- */
static float *randf(size_t n, uint64_t stream, float scale) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(7, stream, i) - 1.0f);
    return x;
}
static double *to_d(const float *x, size_t n) {
    double *d = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}
static float *poisoned(size_t n) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}
/* Largest |got - want| / (atol + rtol*|want|); <= 1 passes. NaN fails. */
static double mismatch(const float *got, const double *want, size_t n, double rtol, double atol, size_t *where) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)got[i] - want[i]) / (atol + rtol * fabs(want[i]));
        if (!(r <= worst)) { worst = isnan(r) ? INFINITY : r; *where = i; }
    }
    return worst;
}
static void expect_close(tally *t, const char *name, const float *got, const double *want, size_t n, double rtol, double atol) {
    size_t at = 0;
    double m = mismatch(got, want, n, rtol, atol, &at);
    report(t, m <= 1.0, name, "element %zu: got %.9g want %.9g (%.2fx tolerance)", at, got[at], want[at], m);
}

/* ---- gemm ---- */
static void test_gemm_kernel(tally *t, const char *kernel) {
    const int shapes[][3] = {{37, 53, 300}, {6, 32, 1}, {1, 4100, 17}, {129, 70, 513}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++) {
                    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    float *A = randf((size_t)M * K, 1, 1), *B = randf((size_t)K * N, 2, 1);
                    float *C = beta ? randf((size_t)M * N, 3, 1) : poisoned((size_t)M * N);
                    double *want = malloc(sizeof(double) * M * N);
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            double acc = beta ? C[(size_t)i * N + j] : 0.0;
                            for (int k = 0; k < K; k++)
                                acc += (double)(ta ? A[(size_t)k * M + i] : A[(size_t)i * K + k]) *
                                       (tb ? B[(size_t)j * K + k] : B[(size_t)k * N + j]);
                            want[(size_t)i * N + j] = acc;
                        }
                    const char *ran = cpu_gemm_with(kernel, ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, (float)beta, C, N);
                    char name[96];
                    snprintf(name, sizeof name, "gemm_%s_%dx%dx%d_t%d%d_beta%d", ran, M, N, K, ta, tb, beta);
                    expect_close(t, name, C, want, (size_t)M * N, 1e-5, 1e-5 * sqrt(K));
                    free(A); free(B); free(C); free(want);
                }
}

/* Every micro-kernel this CPU can run (a kernel it cannot run falls back to
 * one already covered, so its cases are skipped rather than repeated). */
static void test_gemm(tally *t) {
    const char *kernels[] = {"avx512", "avx2", "generic"};
    for (int i = 0; i < 3; i++) {
        float a = 1, b = 1, c;
        if (strcmp(cpu_gemm_with(kernels[i], false, false, 1, 1, 1, &a, 1, &b, 1, 0.0f, &c, 1), kernels[i]) != 0) {
            printf("# gemm kernel %s: not supported by this CPU, not tested\n", kernels[i]);
            continue;
        }
        test_gemm_kernel(t, kernels[i]);
    }
}

/* ---- finite differences: d/dx of sum(f(x) * R) in double ---- */
typedef void (*fwd_d)(const double *x, double *y, void *ctx);
static double *fd_grad(fwd_d f, void *ctx, const double *x0, size_t nx, const double *R, size_t ny, double h) {
    double *x = malloc(nx * sizeof(double)), *y = malloc(ny * sizeof(double)), *g = malloc(nx * sizeof(double));
    memcpy(x, x0, nx * sizeof(double));
    for (size_t i = 0; i < nx; i++) {
        double keep = x[i], lp = 0, lm = 0;
        x[i] = keep + h;
        f(x, y, ctx);
        for (size_t j = 0; j < ny; j++) lp += y[j] * R[j];
        x[i] = keep - h;
        f(x, y, ctx);
        for (size_t j = 0; j < ny; j++) lm += y[j] * R[j];
        x[i] = keep;
        g[i] = (lp - lm) / (2 * h);
    }
    free(x); free(y);
    return g;
}

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
static void test_layernorm(tally *t) {
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
    cpu_layernorm_backward(NULL, dx, dw, db, R, x, w, mean, rstd, N, C);
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

/* ---- matmul (with bias) ---- */
typedef struct { int N, C, OC; const double *x, *w, *b; int wrt; } mm_ctx;
static void mm_ref(const double *x, const double *w, const double *b, double *y, int N, int C, int OC) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double acc = b ? b[o] : 0;
            for (int c = 0; c < C; c++) acc += x[n * C + c] * w[c * OC + o];
            y[n * OC + o] = acc;
        }
}
static void mm_fd(const double *p, double *y, void *vctx) {
    mm_ctx *k = vctx;
    mm_ref(k->wrt == 0 ? p : k->x, k->wrt == 1 ? p : k->w, k->wrt == 2 ? p : k->b, y, k->N, k->C, k->OC);
}
static void test_matmul(tally *t) {
    const int N = 13, C = 29, OC = 41;
    float *x = randf(N * C, 20, 1), *w = randf(C * OC, 21, 1), *b = randf(OC, 22, 1), *R = randf(N * OC, 23, 1);
    double *xd = to_d(x, N * C), *wd = to_d(w, C * OC), *bd = to_d(b, OC), *Rd = to_d(R, N * OC);
    double *want = malloc(sizeof(double) * N * OC);
    mm_ref(xd, wd, bd, want, N, C, OC);
    float *out = poisoned(N * OC);
    cpu_matmul_forward(NULL, out, x, w, b, N, C, OC);
    expect_close(t, "matmul_forward_bias", out, want, N * OC, 1e-5, 1e-5);
    mm_ref(xd, wd, NULL, want, N, C, OC);
    free(out);
    out = poisoned(N * OC);
    cpu_matmul_forward(NULL, out, x, w, NULL, N, C, OC);
    expect_close(t, "matmul_forward_nobias", out, want, N * OC, 1e-5, 1e-5);
    float *dx = poisoned(N * C), *dw = randf(C * OC, 24, 1), *db = randf(OC, 25, 1);
    double *dw0 = to_d(dw, C * OC), *db0 = to_d(db, OC);
    cpu_matmul_backward(NULL, dx, dw, db, R, x, w, N, C, OC);
    mm_ctx k = {N, C, OC, xd, wd, bd, 0};
    double *g = fd_grad(mm_fd, &k, xd, N * C, Rd, N * OC, 1e-4);
    expect_close(t, "matmul_backward_dinp_fd", dx, g, N * C, 1e-5, 1e-5);
    free(g);
    k.wrt = 1;
    g = fd_grad(mm_fd, &k, wd, C * OC, Rd, N * OC, 1e-4);
    for (int i = 0; i < C * OC; i++) g[i] += dw0[i];
    expect_close(t, "matmul_backward_dw_fd", dw, g, C * OC, 1e-5, 1e-5);
    free(g);
    k.wrt = 2;
    g = fd_grad(mm_fd, &k, bd, OC, Rd, N * OC, 1e-4);
    for (int i = 0; i < OC; i++) g[i] += db0[i];
    expect_close(t, "matmul_backward_dbias_fd", db, g, OC, 1e-5, 1e-5);
    free(g);
    free(x); free(w); free(b); free(R); free(xd); free(wd); free(bd); free(Rd); free(want); free(out); free(dx);
    free(dw); free(db); free(dw0); free(db0);
}

/* ---- LM head (tied) ---- */
typedef struct { int N, C, V; const double *x, *wte; int wrt; } lm_ctx;
static void lm_ref(const double *x, const double *wte, double *y, int N, int C, int V) {
    for (int n = 0; n < N; n++)
        for (int v = 0; v < V; v++) {
            double acc = 0;
            for (int c = 0; c < C; c++) acc += x[n * C + c] * wte[v * C + c];
            y[n * V + v] = acc;
        }
}
static void lm_fd(const double *p, double *y, void *vctx) {
    lm_ctx *k = vctx;
    lm_ref(k->wrt == 0 ? p : k->x, k->wrt == 1 ? p : k->wte, y, k->N, k->C, k->V);
}
static void test_lmhead(tally *t) {
    const int N = 11, C = 19, V = 45;
    float *x = randf(N * C, 30, 1), *wte = randf(V * C, 31, 1), *R = randf(N * V, 32, 1);
    double *xd = to_d(x, N * C), *wd = to_d(wte, V * C), *Rd = to_d(R, N * V), *want = malloc(sizeof(double) * N * V);
    lm_ref(xd, wd, want, N, C, V);
    float *out = poisoned(N * V);
    cpu_lmhead_forward(NULL, out, x, wte, N, C, V);
    expect_close(t, "lmhead_forward", out, want, N * V, 1e-5, 1e-5);
    float *dx = poisoned(N * C), *dwte = randf(V * C, 33, 1);
    double *dw0 = to_d(dwte, V * C);
    cpu_lmhead_backward(NULL, dx, dwte, R, x, wte, N, C, V);
    lm_ctx k = {N, C, V, xd, wd, 0};
    double *g = fd_grad(lm_fd, &k, xd, N * C, Rd, N * V, 1e-4);
    expect_close(t, "lmhead_backward_dx_fd", dx, g, N * C, 1e-5, 1e-5);
    free(g);
    k.wrt = 1;
    g = fd_grad(lm_fd, &k, wd, V * C, Rd, N * V, 1e-4);
    for (int i = 0; i < V * C; i++) g[i] += dw0[i];
    expect_close(t, "lmhead_backward_dwte_fd", dwte, g, V * C, 1e-5, 1e-5);
    free(g);
    free(x); free(wte); free(R); free(xd); free(wd); free(Rd); free(want); free(out); free(dx); free(dwte); free(dw0);
}

/* ---- attention ---- */
typedef struct { int B, T, NH, HS; tg_dropout drop; } att_ctx;
static void att_ref(const double *qkv, double *out, void *vctx) {
    att_ctx *k = vctx;
    const int B = k->B, T = k->T, NH = k->NH, HS = k->HS, Cl = NH * HS, C3 = 3 * Cl;
    double *s = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    double d = 0;
                    for (int i = 0; i < HS; i++)
                        d += qkv[(b * T + t) * C3 + h * HS + i] * qkv[(b * T + u) * C3 + Cl + h * HS + i];
                    s[u] = d / sqrt((double)HS);
                    mx = fmax(mx, s[u]);
                }
                for (int u = 0; u <= t; u++) sum += (s[u] = exp(s[u] - mx));
                for (int i = 0; i < HS; i++) {
                    double acc = 0;
                    for (int u = 0; u <= t; u++) {
                        double keep = 1.0;
                        if (k->drop.p > 0) {
                            uint64_t seq = k->drop.row0 + (uint64_t)b, head = (uint64_t)(k->drop.head0 + h);
                            keep = cpu_dropout_scale(&k->drop, ((seq * (uint64_t)k->drop.heads_total + head) * (uint64_t)T + (uint64_t)t) * (uint64_t)T + (uint64_t)u);
                        }
                        acc += s[u] / sum * keep * qkv[(b * T + u) * C3 + 2 * Cl + h * HS + i];
                    }
                    out[(b * T + t) * Cl + h * HS + i] = acc;
                }
            }
    free(s);
}
static void test_attention_with(tally *t, tg_dropout drop, const char *fwd_name, const char *bwd_name) {
    att_ctx k = {2, 13, 3, 5, drop};
    const int n_in = k.B * k.T * 3 * k.NH * k.HS, n_out = k.B * k.T * k.NH * k.HS;
    float *qkv = randf(n_in, 40, 1.5f), *R = randf(n_out, 41, 1);
    double *qd = to_d(qkv, n_in), *Rd = to_d(R, n_out), *want = malloc(sizeof(double) * n_out);
    att_ref(qd, want, &k);
    float *out = poisoned(n_out), *att = poisoned((size_t)k.B * k.NH * k.T * k.T);
    cpu_attention_forward(NULL, out, att, qkv, k.B, k.T, k.NH, k.HS, drop);
    expect_close(t, fwd_name, out, want, n_out, 1e-5, 1e-6);
    float *dqkv = poisoned(n_in);
    cpu_attention_backward(NULL, dqkv, R, qkv, att, k.B, k.T, k.NH, k.HS, drop);
    double *g = fd_grad(att_ref, &k, qd, n_in, Rd, n_out, 1e-5);
    expect_close(t, bwd_name, dqkv, g, n_in, 1e-4, 1e-5);
    free(g); free(qkv); free(R); free(qd); free(Rd); free(want); free(out); free(att); free(dqkv);
}

static void test_attention(tally *t) {
    test_attention_with(t, (tg_dropout){0}, "attention_forward", "attention_backward_fd");
    /* heads 2..4 of 7 of sequences 5.. : a TP rank's slice of the masks */
    tg_dropout drop = {0.3f, 99, 12345, 5, 2, 7};
    test_attention_with(t, drop, "attention_forward_dropout", "attention_backward_dropout_fd");
}

/* Dropout masks: the kept fraction is 1-p, kept values scaled by 1/(1-p),
 * the same mask in the residual site, the plain kernel and its backward. */
static void test_dropout(tally *t) {
    const tg_dropout d = {0.1f, 7, 42, 1000, 0, 0};
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
    free(ones); free(out); free(x); free(bias); free(res); free(want);
}

/* ---- GELU ---- */
static void gelu_ref(const double *x, double *y, void *vctx) {
    size_t n = *(size_t *)vctx;
    for (size_t i = 0; i < n; i++) y[i] = 0.5 * x[i] * (1 + tanh(sqrt(2 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
}
static void test_gelu(tally *t) {
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

/* ---- encoder ---- */
static void test_encoder(tally *t) {
    const int B = 2, T = 9, C = 7, V = 23, start = 5, Vl = 10; /* this rank owns rows [5, 15) */
    int32_t tokens[B * T];
    for (int i = 0; i < B * T; i++) tokens[i] = (int32_t)(rng_bits(3, 60, i) % V);
    tokens[3] = tokens[4] = 7; /* a repeated token accumulates twice */
    float *wte = randf(Vl * C, 61, 1), *wpe = randf(T * C, 62, 1), *out = poisoned(B * T * C);
    double *want = malloc(sizeof(double) * B * T * C);
    for (int n = 0; n < B * T; n++)
        for (int c = 0; c < C; c++) {
            int l = tokens[n] - start;
            want[n * C + c] = (l >= 0 && l < Vl ? wte[l * C + c] : 0.0) + wpe[(n % T) * C + c];
        }
    cpu_encoder_forward(NULL, out, tokens, wte, wpe, B, T, C, start, Vl);
    expect_close(t, "encoder_forward_vocab_parallel", out, want, B * T * C, 1e-6, 1e-7);
    float *dout = randf(B * T * C, 63, 1), *dwte = randf(Vl * C, 64, 1), *dwpe = randf(T * C, 65, 1);
    double *wte_want = to_d(dwte, Vl * C), *wpe_want = to_d(dwpe, T * C);
    for (int n = 0; n < B * T; n++)
        for (int c = 0; c < C; c++) {
            int l = tokens[n] - start;
            if (l >= 0 && l < Vl) wte_want[l * C + c] += dout[n * C + c];
            wpe_want[(n % T) * C + c] += dout[n * C + c];
        }
    cpu_encoder_backward(NULL, dwte, dwpe, dout, tokens, B, T, C, start, Vl);
    expect_close(t, "encoder_backward_dwte", dwte, wte_want, Vl * C, 1e-5, 1e-6);
    expect_close(t, "encoder_backward_dwpe", dwpe, wpe_want, T * C, 1e-5, 1e-6);
    free(wte); free(wpe); free(out); free(want); free(dout); free(dwte); free(dwpe); free(wte_want); free(wpe_want);
}

/* ---- cross-entropy over a padded vocabulary ---- */
typedef struct { int N, V, n_real; const int32_t *tg; } xe_ctx;
static void xe_ref(const double *l, double *loss, void *vctx) {
    xe_ctx *k = vctx;
    for (int n = 0; n < k->N; n++) {
        double mx = -INFINITY, s = 0;
        for (int v = 0; v < k->n_real; v++) mx = fmax(mx, l[n * k->V + v]);
        for (int v = 0; v < k->n_real; v++) s += exp(l[n * k->V + v] - mx);
        loss[n] = log(s) + mx - l[n * k->V + k->tg[n]];
    }
}
static void test_xent(tally *t) {
    const int N = 9, V = 40, n_real = 33;
    int32_t tg[N];
    for (int n = 0; n < N; n++) tg[n] = (int32_t)(rng_bits(3, 70, n) % n_real);
    float *logits = randf(N * V, 71, 5), *R = randf(N, 72, 1);
    for (int n = 0; n < N; n++)
        for (int v = n_real; v < V; v++) logits[n * V + v] = 100.0f; /* padding must not count */
    double *ld = to_d(logits, N * V), *Rd = malloc(sizeof(double) * N), want[N];
    xe_ctx k = {N, V, n_real, tg};
    xe_ref(ld, want, &k);
    float *rowmax = poisoned(N), *stats = poisoned(2 * N), *losses = poisoned(N);
    cpu_xent_rowmax(NULL, rowmax, logits, N, V, n_real);
    cpu_xent_stats(NULL, stats, logits, rowmax, tg, N, V, n_real, 0);
    const float dloss = 0.37f;
    cpu_xent_finish(NULL, losses, logits, rowmax, stats, tg, N, V, n_real, 0, dloss);
    expect_close(t, "xent_losses", losses, want, N, 1e-5, 1e-6);
    for (int n = 0; n < N; n++) Rd[n] = dloss;
    double *g = fd_grad(xe_ref, &k, ld, N * V, Rd, N, 1e-5);
    expect_close(t, "xent_dlogits_fd_padding_zero", logits, g, N * V, 1e-4, 1e-6);
    free(logits); free(R); free(ld); free(Rd); free(rowmax); free(stats); free(losses); free(g);
}

/* ---- vector ops and AdamW ---- */
static void test_vector(tally *t) {
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

static void test_row_ops(tally *t) {
    const int N = 23, C = 13, T = 7, row_start = 5;
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
    cpu_bias_backward(NULL, db, x, N, C);
    expect_close(t, "bias_backward", db, dbw, C, 1e-5, 1e-6);
    float *wpe = randf(T * C, 104, 1), *acc = randf(N * C, 105, 1), *dwpe = randf(T * C, 106, 1);
    double *pw = to_d(acc, N * C), *dw = to_d(dwpe, T * C);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            int p = (row_start + n) % T;
            pw[n * C + c] += wpe[p * C + c];
            dw[p * C + c] += x[n * C + c];
        }
    cpu_position_forward(NULL, acc, wpe, row_start, N, T, C);
    expect_close(t, "position_forward_row_shard", acc, pw, N * C, 1e-6, 1e-7);
    cpu_position_backward(NULL, dwpe, x, row_start, N, T, C);
    expect_close(t, "position_backward_row_shard", dwpe, dw, T * C, 1e-5, 1e-6);
    free(x); free(bias); free(res); free(out); free(want); free(db); free(dbw); free(wpe); free(acc); free(dwpe);
    free(pw); free(dw);
}

static void test_adamw(tally *t) {
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

int main(void) {
    tally t = {0, 0};
    test_gemm(&t);
    test_layernorm(&t);
    test_matmul(&t);
    test_lmhead(&t);
    test_attention(&t);
    test_gelu(&t);
    test_encoder(&t);
    test_xent(&t);
    test_vector(&t);
    test_row_ops(&t);
    test_dropout(&t);
    test_adamw(&t);
    fprintf(stderr, "test_kernels: %d passed, %d failed\n", t.passed, t.failed);
    return t.failed ? 1 : 0;
}

/* Kernel family: vocab-parallel cross-entropy (xent_*).
 * CPU: each kernel against a double-precision reference and its backward
 * against finite differences (tests/kernels/check.h); with CUDA (or the
 * emulation, tests/emu) also the CUDA backend against the CPU one
 * (tests/kernels/twin.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"
#include "tests/kernels/check.h"

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
void kcheck_xent(tally *t) {
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
    /* the fused form (TP = 1): the same arithmetic, so the same bits */
    float *fused = randf(N * V, 71, 5), *fused_losses = poisoned(N);
    for (int n = 0; n < N; n++)
        for (int v = n_real; v < V; v++) fused[n * V + v] = 100.0f;
    cpu_xent_fused(NULL, fused_losses, fused, tg, N, V, n_real, dloss);
    report(t, memcmp(fused_losses, losses, N * sizeof(float)) == 0 && memcmp(fused, logits, (size_t)N * V * sizeof(float)) == 0,
           "xent_fused_equals_three_passes", "losses or gradients differ");
    free(logits); free(R); free(ld); free(Rd); free(rowmax); free(stats); free(losses); free(g); free(fused);
    free(fused_losses);
}

#ifdef TG_CUDA
/* ---- CUDA against the CPU ---- */
#include "util/rng_core.h"
#include "tests/kernels/twin.h"
#include "util/err.h"

/* V local columns of which the first n_real are real; this rank's columns
 * start at vocab_start (0, or at least 5). Targets: inside the range (its
 * first and last real column among them) and outside it, never in the
 * padding columns (no real token is there). */
void cuda_test_xent(env *e, int N, int V, int n_real, int vocab_start) {
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

/* The fused form (TP = 1: every target a real column) against the CPU's. */
void cuda_test_xent_fused(env *e, int N, int V, int n_real) {
    NEED(e, xent_fused);
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d V=%d n_real=%d", N, V, n_real);
    float *l = host_rand(e, (size_t)N * V, -4, 4);
    for (int n = 0; n < N; n++)
        for (int v = n_real; v < V; v++) l[(size_t)n * V + v] = 20.0f; /* padding would dominate if counted */
    int32_t *tg = tg_malloc((size_t)N * sizeof(int32_t), "targets");
    for (int n = 0; n < N; n++) tg[n] = (int32_t)(rng_bits_core(SEED, e->stream, (uint64_t)n) % (uint64_t)n_real);
    e->stream++;
    tg[0] = 0;
    tg[N - 1] = n_real - 1;
    twin logits = tw_vals(e, ACT, l, (size_t)N * V), targets = tw_ints(e, tg, N), losses = tw_out(e, F32, N);
    e->cpu->xent_fused(e->cpu, losses.c, logits.c, targets.c, N, V, n_real, 0.37f);
    e->gpu->xent_fused(e->gpu, losses.g, logits.g, targets.g, N, V, n_real, 0.37f);
    check(e, losses, e->tol, "xent_fused losses %s", shape);
    check(e, logits, e->tol, "xent_fused dlogits %s", shape);
    tw_free(e, logits);
    tw_free(e, targets);
    tw_free(e, losses);
    free(l);
    free(tg);
}
#endif

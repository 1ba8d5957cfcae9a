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
    float *rowmax = poisoned(N), *local_max = poisoned(N), *stats = poisoned(2 * N), *losses = poisoned(N);
    cpu_xent_partial(NULL, rowmax, local_max, stats, logits, tg, N, V, n_real, 0);
    cpu_xent_rescale(NULL, stats, local_max, rowmax, N); /* one rank: rowmax is its own */
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
    free(logits); free(R); free(ld); free(Rd); free(rowmax); free(local_max); free(stats); free(losses); free(g); free(fused);
    free(fused_losses);
}

/* The vocabulary split over four ranks as a TP group splits it (the
 * group's reductions done here by hand): the partial statistics, the max
 * reduced, the sums rescaled and reduced, then each rank's finish. The
 * losses and the gradients equal the reference over the whole row; the
 * last rank holds padding only (its sum stays 0, its max is -inf), and the
 * padding's large logits must count nowhere. */
void kcheck_xent_split(tally *t) {
    enum { N = 7, R = 4, V = 16 }; /* 64 columns, rank r holding [16r, 16r + 16); the first 37 are real */
    const int n_real_all = 37, n_real[R] = {16, 16, 5, 0};
    int32_t tg[N];
    for (int n = 0; n < N; n++) tg[n] = (int32_t)(rng_bits(3, 90, n) % n_real_all);
    tg[0] = 0;
    tg[1] = n_real_all - 1;
    float *full = randf(N * R * V, 91, 6);
    for (int n = 0; n < N; n++)
        for (int v = n_real_all; v < R * V; v++) full[n * R * V + v] = 50.0f;
    double *fd = to_d(full, N * R * V), want[N];
    xe_ctx k = {N, R * V, n_real_all, tg};
    xe_ref(fd, want, &k);
    float *shard[R], rowmax[R][N], local_max[R][N], stats[R][2 * N], losses[R][N];
    for (int r = 0; r < R; r++) {
        shard[r] = malloc(sizeof(float) * N * V);
        for (int n = 0; n < N; n++) memcpy(shard[r] + n * V, full + (size_t)n * R * V + r * V, sizeof(float) * V);
        cpu_xent_partial(NULL, rowmax[r], local_max[r], stats[r], shard[r], tg, N, V, n_real[r], r * V);
    }
    bool empty_ok = true;
    for (int n = 0; n < N; n++)
        empty_ok = empty_ok && rowmax[R - 1][n] == -INFINITY && stats[R - 1][2 * n] == 0 && stats[R - 1][2 * n + 1] == 0;
    float gmax[N], gstats[2 * N] = {0};
    for (int n = 0; n < N; n++) {
        gmax[n] = -INFINITY;
        for (int r = 0; r < R; r++) gmax[n] = fmaxf(gmax[n], rowmax[r][n]);
    }
    for (int r = 0; r < R; r++) {
        cpu_xent_rescale(NULL, stats[r], local_max[r], gmax, N);
        for (int i = 0; i < 2 * N; i++) gstats[i] += stats[r][i];
    }
    const float dloss = 0.5f;
    for (int r = 0; r < R; r++) cpu_xent_finish(NULL, losses[r], shard[r], gmax, gstats, tg, N, V, n_real[r], r * V, dloss);
    for (int r = 1; r < R; r++) empty_ok = empty_ok && memcmp(losses[r], losses[0], sizeof losses[0]) == 0;
    report(t, empty_ok, "xent_split_ranks_agree_and_empty_rank", "a rank's losses differ, or the padding-only rank counted");
    expect_close(t, "xent_split_losses", losses[0], want, N, 1e-5, 1e-6);
    double ones[N];
    for (int n = 0; n < N; n++) ones[n] = dloss;
    double *g = fd_grad(xe_ref, &k, fd, N * R * V, ones, N, 1e-5);
    float *grad = malloc(sizeof(float) * N * R * V);
    for (int r = 0; r < R; r++)
        for (int n = 0; n < N; n++) memcpy(grad + (size_t)n * R * V + r * V, shard[r] + n * V, sizeof(float) * V);
    expect_close(t, "xent_split_dlogits_fd", grad, g, N * R * V, 1e-4, 1e-6);
    for (int r = 0; r < R; r++) free(shard[r]);
    free(full); free(fd); free(g); free(grad);
}

#ifdef TG_CUDA
/* ---- CUDA against the CPU ---- */
#include "util/rng_core.h"
#include "tests/kernels/twin.h"
#include "util/err.h"

/* dlogits away from the targets (those of this rank's columns, from
 * vocab_start), against the largest of those: the targets' entries (near
 * -dloss) set the scale of check()'s error, and would hide an error
 * elsewhere a hundred times the size of those gradients. */
static void check_off_target(env *e, twin logits, const int32_t *tg, int N, int V, int vocab_start, const char *what,
                             const char *shape) {
    sync_gpu(e);
    float *want = cpu_values(e, logits), *got = tg_malloc(logits.n * sizeof(float), "cuda values");
    get_floats(e->gpu, gpu_type(e, logits.k), got, logits.g, logits.n);
    for (int n = 0; n < N; n++) {
        const int local = tg[n] - vocab_start;
        if (local >= 0 && local < V) got[(size_t)n * V + local] = want[(size_t)n * V + local] = 0.0f;
    }
    char name[200];
    snprintf(name, sizeof name, "%s dlogits off the targets %s", what, shape);
    compare_floats(e, got, want, logits.n, e->tol, name);
    free(want);
    free(got);
}

/* V local columns of which the first n_real are real; this rank's columns
 * start at vocab_start (0, or at least 5). Targets: inside the range (its
 * first and last real column among them) and outside it, never in the
 * padding columns (no real token is there). */
void cuda_test_xent(env *e, int N, int V, int n_real, int vocab_start) {
    NEED(e, xent_partial);
    NEED(e, xent_rescale);
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
    twin rowmax = tw_out(e, F32, N), local_max = tw_out(e, F32, N), stats = tw_out(e, F32, 2 * (size_t)N);
    e->cpu->xent_partial(e->cpu, rowmax.c, local_max.c, stats.c, logits.c, targets.c, N, V, n_real, vocab_start);
    e->gpu->xent_partial(e->gpu, rowmax.g, local_max.g, stats.g, logits.g, targets.g, N, V, n_real, vocab_start);
    check(e, rowmax, e->tol, "xent_partial rowmax %s", shape);
    check(e, local_max, e->tol, "xent_partial local_max %s", shape);
    check(e, stats, e->tol, "xent_partial stats %s", shape);
    /* each pass from the reference's results of the one before; the group's
     * max stands in as the local one plus a row-dependent amount (0 for some) */
    float *group_max = cpu_values(e, local_max);
    for (int n = 0; n < N; n++) group_max[n] += (float)(n % 3) * 0.75f;
    twin gmax = tw_vals(e, F32, group_max, N), local_r = tw_ref(e, local_max), stats_r = tw_ref(e, stats);
    e->cpu->xent_rescale(e->cpu, stats_r.c, local_r.c, gmax.c, N);
    e->gpu->xent_rescale(e->gpu, stats_r.g, local_r.g, gmax.g, N);
    check(e, stats_r, e->tol, "xent_rescale %s", shape);
    twin rowmax_r = tw_ref(e, rowmax), rescaled_r = tw_ref(e, stats_r), losses = tw_out(e, F32, N);
    const float dloss = 0.37f;
    e->cpu->xent_finish(e->cpu, losses.c, logits.c, rowmax_r.c, rescaled_r.c, targets.c, N, V, n_real, vocab_start, dloss);
    e->gpu->xent_finish(e->gpu, losses.g, logits.g, rowmax_r.g, rescaled_r.g, targets.g, N, V, n_real, vocab_start, dloss);
    check(e, losses, e->tol, "xent_finish losses %s", shape);
    check(e, logits, e->tol, "xent_finish dlogits %s", shape);
    check_off_target(e, logits, tg, N, V, vocab_start, "xent_finish", shape);
    twin all[] = {logits, targets, rowmax, local_max, stats, gmax, local_r, stats_r, rowmax_r, rescaled_r, losses};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
    free(group_max);
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
    check_off_target(e, logits, tg, N, V, 0, "xent_fused", shape);
    tw_free(e, logits);
    tw_free(e, targets);
    tw_free(e, losses);
    free(l);
    free(tg);
}
#endif

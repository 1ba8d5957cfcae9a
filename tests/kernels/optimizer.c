/* Kernel family: the optimizer's ops (loss and norm scalars, AdamW over spans); on CUDA also memory, cast_params,
 * download_floats.
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
#include "util/rng.h"

/* ---- the step's scalars and AdamW over spans ---- */

/* The spans the optimizer checks use, scaled by k: a per-layer kind (3
 * tensors, gaps between them), a tensor without weight decay, and a last
 * tensor. Offsets outside every tensor are gaps that no op may read or
 * write. Windowed, as ZeRO's (kernels/ops.h): the first span's window
 * repeats every 50k elements, so one tensor lies in one period, one in
 * two, and one ends in the window's middle; the others are cut at both
 * ends, and the moments are packed. Else every offset, moments unpacked. */
tg_spans test_spans(size_t k, bool windowed, size_t *len, size_t *moments) {
    tg_spans s = {3, {{0}}};
    s.span[0] = (tg_span){5 * k, 40 * k, 33 * k, 3, 1, tg_window_whole()};
    s.span[1] = (tg_span){130 * k, 0, 1000 * k, 1, 0, tg_window_whole()};
    s.span[2] = (tg_span){1200 * k, 0, 150 * k, 1, 1, tg_window_whole()};
    *len = *moments = 1400 * k;
    if (windowed) {
        s.span[0].win = (tg_window){0, 50 * k, 12 * k, 37 * k, 0};        /* 3 periods of 25k */
        s.span[1].win = (tg_window){130 * k, 1000 * k, 100 * k, 900 * k, 75 * k};
        s.span[2].win = (tg_window){1200 * k, 150 * k, 30 * k, 150 * k, 875 * k};
        *moments = 995 * k;
    }
    return s;
}

bool span_moment(const tg_spans *s, size_t i, size_t *moment) {
    for (int k = 0; k < s->n; k++) {
        const tg_span *sp = &s->span[k];
        const tg_window *w = &sp->win;
        for (int c = 0; c < sp->count; c++) {
            const size_t b = sp->begin + (size_t)c * sp->stride;
            if (i < b || i >= b + sp->numel) continue;
            const size_t period = (i - w->origin) / w->period, q = (i - w->origin) % w->period;
            if (q < w->lo || q >= w->hi) return false;
            if (moment) *moment = w->moment + period * (w->hi - w->lo) + (q - w->lo);
            return true;
        }
    }
    return false;
}

static void check_loss(tally *t) {
    const int N = 1001;
    float *a = randf(N, 81, 5), *b = randf(N, 82, 5);
    tg_step_stats s = {0};
    cpu_loss_accumulate(NULL, &s, a, N);
    cpu_loss_accumulate(NULL, &s, b, N);
    double sa = 0, sb = 0;
    for (int i = 0; i < N; i++) sa += a[i], sb += b[i];
    const double acc = (double)(float)(sa / N) + (double)(float)(sb / N);
    report(t, s.loss_acc == acc, "loss_accumulate", "got %.17g want %.17g", s.loss_acc, acc);
    cpu_loss_finish(NULL, &s, 2, 4.0f);
    const float want = (float)(acc / 2) / 4.0f;
    report(t, s.loss == want && s.loss_acc == 0.0, "loss_finish", "loss %.9g want %.9g, acc %g after", s.loss, want, s.loss_acc);
    free(a);
    free(b);
}

static void check_sumsq(tally *t) {
    for (int windowed = 0; windowed < 2; windowed++) {
        size_t n, w;
        const tg_spans sp = test_spans(1, windowed, &n, &w);
        float *g = randf(n, 83 + windowed, 1);
        double want = 0;
        for (size_t i = 0; i < n; i++) {
            if (in_spans(&sp, i)) want += (double)g[i] * g[i];
            else g[i] = 1e3f; /* a gap: counting it would show */
        }
        tg_step_stats s = {0}, without = {0};
        cpu_grad_sumsq(NULL, &s, g, &sp, 1);
        const double exact = exact_sumsq_value(s.sumsq_pieces);
        report(t, fabs(s.sumsq - want) <= 1e-12 * want && fabs(exact - want) <= 1e-12 * want,
               windowed ? "grad_sumsq_window" : "grad_sumsq", "got %.17g (exact %.17g) want %.17g", s.sumsq, exact, want);
        cpu_grad_sumsq(NULL, &without, g, &sp, 0); /* no exact sum asked for: the same double, pieces NaN */
        report(t, without.sumsq == s.sumsq && isnan(exact_sumsq_value(without.sumsq_pieces)),
               windowed ? "grad_sumsq_window_without_exact" : "grad_sumsq_without_exact", "got %.17g and %g, want %.17g and NaN",
               without.sumsq, exact_sumsq_value(without.sumsq_pieces), s.sumsq);
        free(g);
    }
}

/* exact_sumsq_add_int (the GPU's) against exact_sumsq_add: every biased exponent 0 .. 255 with
 * 512 random significands and signs each, plus the boundaries (2^-48 and the float below it, 2^48
 * and the float below it, 0, the subnormals' ends, infinity, NaN): each value alone (same words and
 * flags), and all of them summed in one order into one sum each; then carries through every word:
 * 2^16 of the largest finite square that adds (|v| just below 2^48, a square just below 2^192). */
static int same_exact(const exact_sumsq *a, const exact_sumsq *b) { return memcmp(a, b, sizeof *a) == 0; }

static void check_exact_sumsq_int(tally *t) {
    const uint32_t edges[] = {0x27800000u, 0x277fffffu, 0x57800000u, 0x577fffffu, 0u, 1u, 0x007fffffu, 0x00800000u,
                              0x7f800000u, 0x7fc00000u, 0x7f800001u, 0x3f800000u};
    exact_sumsq all_ref = {{0}, 0}, all_int = {{0}, 0};
    long bad = 0, n = 0;
    uint32_t first_bad = 0;
    for (uint32_t i = 0; i < 256 * 512 + sizeof edges / sizeof edges[0]; i++) {
        uint32_t bits = i < 256 * 512 ? (i / 512) << 23 | (uint32_t)(rng_bits(11, 5, i) & 0x807fffffu)
                                      : edges[i - 256 * 512];
        for (int sign = 0; sign < 2; sign++, n++) {
            bits ^= sign ? 0x80000000u : 0u;
            float v;
            memcpy(&v, &bits, sizeof v);
            exact_sumsq one_ref = {{0}, 0}, one_int = {{0}, 0};
            exact_sumsq_add(&one_ref, v);
            exact_sumsq_add_int(&one_int, v);
            exact_sumsq_add(&all_ref, v);
            exact_sumsq_add_int(&all_int, v);
            if (!same_exact(&one_ref, &one_int) && bad++ == 0) first_bad = bits;
        }
    }
    report(t, bad == 0 && same_exact(&all_ref, &all_int), "exact_sumsq_int_equals_double_every_exponent",
           "%ld of %ld values differ alone (first bits 0x%08x); the sums %s", bad, n, first_bad,
           same_exact(&all_ref, &all_int) ? "agree" : "differ");
    /* the sum holds some flags by now: carries on clean ones */
    exact_sumsq big_ref = {{0}, 0}, big_int = {{0}, 0};
    const uint32_t top_bits = 0x577fffffu;
    float top;
    memcpy(&top, &top_bits, sizeof top);
    for (int i = 0; i < 1 << 16; i++) exact_sumsq_add(&big_ref, top), exact_sumsq_add_int(&big_int, top);
    report(t, same_exact(&big_ref, &big_int) && big_ref.w[3] != 0 && big_ref.flags == 0, "exact_sumsq_int_carries_into_the_top_word",
           "words %016llx %016llx %016llx %016llx against %016llx %016llx %016llx %016llx", (unsigned long long)big_int.w[3],
           (unsigned long long)big_int.w[2], (unsigned long long)big_int.w[1], (unsigned long long)big_int.w[0],
           (unsigned long long)big_ref.w[3], (unsigned long long)big_ref.w[2], (unsigned long long)big_ref.w[1],
           (unsigned long long)big_ref.w[0]);
}

/* The global norm of n gradients split among `ranks` as ZeRO splits them:
 * `regions` equal regions, rank r holding chunk r of each. Each rank's
 * grad_sumsq, its pieces summed over the ranks in float as the all-reduce
 * does (in rank order, or reversed), then grad_clip_factor (reduced). */
static double split_norm(const float *g, size_t n, int ranks, int regions, bool reversed) {
    const size_t region = n / (size_t)regions, chunk = region / (size_t)ranks;
    tg_step_stats sum = {0};
    for (int k = 0; k < ranks; k++) {
        const int r = reversed ? ranks - 1 - k : k;
        tg_spans sp = {.n = regions};
        for (int i = 0; i < regions; i++)
            sp.span[i] = (tg_span){(size_t)i * region + (size_t)r * chunk, chunk, chunk, 1, true, tg_window_whole()};
        tg_step_stats s = {0};
        cpu_grad_sumsq(NULL, &s, g, &sp, 1);
        for (int i = 0; i < EXACT_SUMSQ_PIECES; i++) sum.sumsq_pieces[i] += s.sumsq_pieces[i];
    }
    cpu_grad_clip_factor(NULL, &sum, 1, 1.0);
    return sum.norm;
}

/* The norm does not depend on the split (ZeRO's shards follow the
 * gradient buckets: bucketed and unbucketed runs must agree, issue 36),
 * and is the sum of squares' root to 1e-12. */
static void check_sumsq_split(tally *t) {
    const int layouts[][2] = {{2, 1}, {2, 2}, {2, 4}, {2, 8}, {3, 4}, {3, 8}, {4, 2}, {4, 6}};
    const size_t n = 24000; /* divides among every layout's ranks and regions */
    for (int seed = 0; seed < 4; seed++) {
        float *g = randf(n, 97 + seed, 1);
        double want = 0;
        for (size_t i = 0; i < n; i++) { /* magnitudes over 2^-24 .. 2^18: many bits to round */
            g[i] = ldexpf(g[i], (int)((i * 7 + (size_t)seed) % 43) - 24);
            want += (double)g[i] * g[i];
        }
        want = sqrt(want);
        const double first = split_norm(g, n, 2, 1, false);
        int differ = 0;
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
            for (int rev = 0; rev < 2; rev++) differ += split_norm(g, n, layouts[l][0], layouts[l][1], rev) != first;
        char name[48];
        snprintf(name, sizeof name, "grad_norm_split_free_%d", seed);
        report(t, differ == 0 && fabs(first - want) <= 1e-12 * want, name, "%d of 16 splits differ from %.17g; want %.17g",
               differ, first, want);
        free(g);
    }
}

/* s's exact sum of squares (the reduced one) set to root * root. */
static void set_exact_sumsq(tg_step_stats *s, float root) {
    exact_sumsq x = {{0}, 0};
    exact_sumsq_add(&x, root);
    exact_sumsq_pieces(&x, s->sumsq_pieces);
}

/* grad_clip_factor on given sums (the exact one root^2) and loss: norm,
 * finite and clip. */
static void check_clip_case(tally *t, const char *name, double sumsq, float root, int reduced, float loss, double max_norm,
                            double norm, int finite, float clip) {
    tg_step_stats s = {0};
    s.sumsq = sumsq;
    set_exact_sumsq(&s, root);
    s.loss = loss;
    cpu_grad_clip_factor(NULL, &s, reduced, max_norm);
    const bool same_norm = s.norm == norm || (isnan(s.norm) && isnan(norm));
    report(t, same_norm && s.finite == finite && s.clip == clip, name, "norm %.17g finite %d clip %.9g; want %.17g %d %.9g",
           s.norm, s.finite, s.clip, norm, finite, clip);
}

static void check_clip(tally *t) {
    check_clip_case(t, "grad_clip_factor_clips", 4.0, 9.0f, 0, 1.5f, 1.0, 2.0, 1, (float)(1.0 / (2.0 + 1e-6)));
    check_clip_case(t, "grad_clip_factor_reduced_sum", 99.0, 4.0f, 1, 1.5f, 1.0, 4.0, 1, (float)(1.0 / (4.0 + 1e-6)));
    check_clip_case(t, "grad_clip_factor_below_max", 4.0, 2.0f, 0, 1.5f, 10.0, 2.0, 1, 1.0f);
    check_clip_case(t, "grad_clip_factor_no_clipping", 4.0, 2.0f, 0, 1.5f, 0.0, 2.0, 1, 1.0f);
    check_clip_case(t, "grad_clip_factor_nan_loss", 4.0, 2.0f, 0, NAN, 1.0, 2.0, 0, (float)(1.0 / (2.0 + 1e-6)));
    check_clip_case(t, "grad_clip_factor_inf_norm", INFINITY, INFINITY, 0, 1.5f, 1.0, INFINITY, 0, 0.0f);
    /* the exact sum's flags: a NaN gradient, and a square past its range (|g| >= 2^48) */
    check_clip_case(t, "grad_clip_factor_reduced_nan", 4.0, NAN, 1, 1.5f, 1.0, NAN, 0, 1.0f);
    check_clip_case(t, "grad_clip_factor_reduced_overflow", 4.0, 0x1p48f, 1, 1.5f, 1.0, INFINITY, 0, 0.0f);
}

void kcheck_step_stats(tally *t) {
    check_loss(t);
    check_sumsq(t);
    check_exact_sumsq_int(t);
    check_sumsq_split(t);
    check_clip(t);
}

/* torch.optim.AdamW written out in double on one element. */
static void adamw_reference(double *p, double *m, double *v, double g, double lr, double b1, double b2, double eps, double wd,
                            int step) {
    const double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
    const double pi = *p * (1 - lr * wd);
    *m = b1 * *m + (1 - b1) * g;
    *v = b2 * *v + (1 - b2) * g * g;
    *p = pi - lr / bc1 * *m / (sqrt(*v) / sqrt(bc2) + eps);
}

/* Moment indices of the test spans that no element owns: marked in a
 * bitmap from span_moment over the whole buffer. */
static bool *moments_used(const tg_spans *sp, size_t n, size_t w) {
    bool *used = calloc(w, sizeof *used);
    for (size_t i = 0; i < n; i++) {
        size_t k;
        if (span_moment(sp, i, &k)) used[k] = true;
    }
    return used;
}

/* The master weights as AdamW indexes them beside a working copy: packed
 * as the moments (p's element i at its moment); NaN at unused moments. */
static float *pack_master(const tg_spans *sp, const float *p, size_t n, size_t w) {
    float *packed = malloc(w * sizeof(float));
    for (size_t k = 0; k < w; k++) packed[k] = NAN;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        if (span_moment(sp, i, &k)) packed[k] = p[i];
    }
    return packed;
}

/* Elements written outside the spans (p, or work: the buffer's gaps) or at
 * unused moments (m, v, and a packed master): each must still be NaN. Zeroes
 * them on both sides, so that expect_close compares the rest. */
static size_t clear_gaps(const tg_spans *sp, const bool *used, size_t n, size_t w, float *layout, double *layout_want,
                         float *m, double *mw, float *v, double *vw) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!in_spans(sp, i)) {
            bad += !isnan(layout[i]);
            layout[i] = 0.0f, layout_want[i] = 0.0;
        }
    for (size_t i = 0; i < w; i++)
        if (!used[i]) {
            bad += !isnan(m[i]) + !isnan(v[i]);
            m[i] = v[i] = 0.0f, mw[i] = vw[i] = 0.0;
        }
    return bad;
}

/* AdamW over the windowed test spans with clip factor 0.5 against the
 * reference; gaps of the buffer and of the packed moments keep their bits;
 * with finite = 0 nothing changes. packed: the float32 master is packed as
 * the moments (ZeRO) beside a separate working copy, else the working
 * weights are the master. */
static void adamw_case(tally *t, bool packed) {
    size_t n, w;
    const tg_spans sp = test_spans(1, true, &n, &w);
    bool *used = moments_used(&sp, n, w);
    float *p = randf(n, 90, 1), *g = randf(n, 91, 1), *m = randf(w, 92, 0.1f), *v = randf(w, 93, 0.1f);
    for (size_t i = 0; i < w; i++) v[i] = fabsf(v[i]);
    for (size_t i = 0; i < n; i++)
        if (!in_spans(&sp, i)) p[i] = g[i] = NAN;
    for (size_t i = 0; i < w; i++)
        if (!used[i]) m[i] = v[i] = NAN;
    double *pw = to_d(p, n), *mw = to_d(m, w), *vw = to_d(v, w);
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    const int step = 3;
    const tg_adamw_args a = {(float)b1, (float)b2, (float)eps, (float)wd};
    for (size_t i = 0; i < n; i++) {
        size_t k;
        if (!span_moment(&sp, i, &k)) continue;
        const bool decay = !(i >= sp.span[1].begin && i < sp.span[1].begin + sp.span[1].numel);
        adamw_reference(&pw[i], &mw[k], &vw[k], (double)(g[i] * 0.5f), lr, b1, b2, eps, decay ? wd : 0, step);
    }
    /* master: what AdamW gets as p; work: the layout it writes (p itself unless packed). */
    float *master = packed ? pack_master(&sp, p, n, w) : p, *work = p;
    const size_t master_n = packed ? w : n;
    float *master0 = malloc(master_n * sizeof(float)), *m0 = malloc(w * sizeof(float));
    memcpy(master0, master, master_n * sizeof(float));
    memcpy(m0, m, w * sizeof(float));
    tg_step_stats s = {0};
    s.clip = 0.5f;
    s.finite = 0;
    s.in = (tg_step_inputs){(float)lr, (float)(1 - pow(b1, step)), (float)(1 - pow(b2, step)), (uint64_t)step};
    const char *tag = packed ? "adamw_packed_master" : "adamw";
    char name[64];
    cpu_adamw(NULL, master, work, g, m, v, &sp, &a, &s);
    snprintf(name, sizeof name, "%s_not_finite_changes_nothing", tag);
    report(t, memcmp(master, master0, master_n * sizeof(float)) == 0 && memcmp(m, m0, w * sizeof(float)) == 0, name,
           "the parameters or moments changed");
    s.finite = 1;
    cpu_adamw(NULL, master, work, g, m, v, &sp, &a, &s);
    if (packed) { /* the packed master against the reference, moment by moment */
        double *master_want = malloc(w * sizeof(double));
        for (size_t k = 0; k < w; k++) master_want[k] = used[k] ? NAN : 0.0;
        for (size_t i = 0; i < n; i++) {
            size_t k;
            if (span_moment(&sp, i, &k)) master_want[k] = pw[i];
        }
        size_t bad = 0;
        for (size_t k = 0; k < w; k++)
            if (!used[k]) bad += !isnan(master[k]), master[k] = 0.0f;
        snprintf(name, sizeof name, "%s_leaves_unused", tag);
        report(t, bad == 0, name, "%zu unused master elements written", bad);
        snprintf(name, sizeof name, "%s_master", tag);
        expect_close(t, name, master, master_want, w, 1e-5, 1e-6);
        free(master_want);
    }
    /* NaN where the reference is NaN (the gaps) passes only if both are NaN:
     * expect_close fails on NaN, so compare the tensors' elements alone. */
    const size_t bad_gaps = clear_gaps(&sp, used, n, w, work, pw, m, mw, v, vw);
    snprintf(name, sizeof name, "%s_leaves_gaps", tag);
    report(t, bad_gaps == 0, name, "%zu gap elements written", bad_gaps);
    snprintf(name, sizeof name, "%s_params", tag);
    expect_close(t, name, work, pw, n, 1e-5, 1e-6);
    snprintf(name, sizeof name, "%s_exp_avg", tag);
    expect_close(t, name, m, mw, w, 1e-5, 1e-7);
    snprintf(name, sizeof name, "%s_exp_avg_sq", tag);
    expect_close(t, name, v, vw, w, 1e-5, 1e-7);
    if (packed) free(master);
    free(p); free(g); free(m); free(v); free(pw); free(mw); free(vw); free(master0); free(m0); free(used);
}

void kcheck_adamw(tally *t) {
    adamw_case(t, false);
    adamw_case(t, true);
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

    /* uploads may return before their copy runs, yet the caller may refill
     * its source at once: more uploads in a row than the backend has
     * pinned slots, each source overwritten right after, all arrive */
    {
        enum { COUNT = 9, LEN = 1000 };
        int32_t host[LEN], got[LEN];
        void *bufs[COUNT];
        for (int b = 0; b < COUNT; b++) {
            bufs[b] = g->alloc(g, sizeof host, "upload");
            for (int i = 0; i < LEN; i++) host[i] = b * LEN + i;
            g->upload(g, bufs[b], host, sizeof host);
            memset(host, 0xab, sizeof host);
        }
        int bad = 0;
        for (int b = 0; b < COUNT; b++) {
            g->download(g, got, bufs[b], sizeof got);
            for (int i = 0; i < LEN; i++) bad += got[i] != b * LEN + i;
            g->free(g, bufs[b]);
        }
        char detail[64];
        snprintf(detail, sizeof detail, "(%d of %d values wrong)", bad, COUNT * LEN);
        check_true(e, bad == 0, "uploads_in_a_row_with_the_source_reused", detail);
    }

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

/* The step's scalars on both sides: host memory on the CPU, device
 * memory (uploaded from `init`) on the GPU. */
typedef struct {
    tg_step_stats *c, *g;
} stats_twin;

static stats_twin stats_new(env *e, const tg_step_stats *init) {
    stats_twin s = {e->cpu->alloc(e->cpu, sizeof *s.c, "stats"), e->gpu->alloc(e->gpu, sizeof *s.g, "stats")};
    *s.c = *init;
    e->gpu->upload(e->gpu, s.g, init, sizeof *init);
    return s;
}

static tg_step_stats stats_of_gpu(env *e, stats_twin s) {
    tg_step_stats h;
    sync_gpu(e);
    e->gpu->download(e->gpu, &h, s.g, sizeof h);
    return h;
}

static void stats_free(env *e, stats_twin s) {
    e->cpu->free(e->cpu, s.c);
    e->gpu->free(e->gpu, s.g);
}

/* |got - want| / |want| below tol, both finite (want != 0). */
static void scalar_report(env *e, double got, double want, double tol, const char *name) {
    const double err = fabs(got - want) / (fabs(want) > TINY ? fabs(want) : TINY);
    char detail[96];
    snprintf(detail, sizeof detail, "(cuda %.17g cpu %.17g)", got, want);
    twin_report(e, isfinite(got) && isfinite(want) && want != 0 && err < tol, err, tol, name, detail);
}

/* Two micro-batches of N rows, then the mean over them and 2 DP ranks. */
void cuda_test_loss(env *e, int N) {
    NEED(e, loss_accumulate);
    NEED(e, loss_finish);
    const tg_step_stats zero = {0};
    stats_twin s = stats_new(e, &zero);
    for (int m = 0; m < 2; m++) {
        twin l = tw_rand(e, F32, (size_t)N, 0, 11);
        e->cpu->loss_accumulate(e->cpu, s.c, l.c, N);
        e->gpu->loss_accumulate(e->gpu, s.g, l.g, N);
        tw_free(e, l);
    }
    char name[64];
    tg_step_stats g = stats_of_gpu(e, s);
    snprintf(name, sizeof name, "loss_accumulate N=%d", N);
    scalar_report(e, g.loss_acc, s.c->loss_acc, TOL_F32, name);
    e->cpu->loss_finish(e->cpu, s.c, 2, 2.0f);
    e->gpu->loss_finish(e->gpu, s.g, 2, 2.0f);
    g = stats_of_gpu(e, s);
    snprintf(name, sizeof name, "loss_finish N=%d", N);
    scalar_report(e, g.loss, s.c->loss, TOL_F32, name);
    check_true(e, g.loss_acc == 0.0, "loss_finish_resets_the_sum", "");
    stats_free(e, s);
}

/* Random values on the spans' tensors, `gap` everywhere else. */
static float *span_values(env *e, const tg_spans *sp, size_t n, float lo, float hi, float gap) {
    float *h = host_rand(e, n, lo, hi);
    for (size_t i = 0; i < n; i++)
        if (!in_spans(sp, i)) h[i] = gap;
    return h;
}

void cuda_test_grad_sumsq(env *e, size_t k, bool windowed) {
    NEED(e, grad_sumsq);
    size_t n, moments;
    const tg_spans sp = test_spans(k, windowed, &n, &moments);
    (void)moments; /* the sum reads no moments */
    float *h = span_values(e, &sp, n, -1, 1, 1e3f); /* a counted gap would show */
    twin x = tw_vals(e, F32, h, n);
    const tg_step_stats zero = {0};
    stats_twin s = stats_new(e, &zero);
    e->cpu->grad_sumsq(e->cpu, s.c, x.c, &sp, 1);
    e->gpu->grad_sumsq(e->gpu, s.g, x.g, &sp, 1);
    const tg_step_stats g = stats_of_gpu(e, s);
    char name[64];
    snprintf(name, sizeof name, "grad_sumsq k=%zu%s", k, windowed ? " window" : "");
    scalar_report(e, g.sumsq, s.c->sumsq, 1e-12, name);
    check_true(e, memcmp(g.sumsq_pieces, s.c->sumsq_pieces, sizeof g.sumsq_pieces) == 0, "grad_sumsq_exact_equals_cpu",
               "(the exact sum's pieces, CUDA against CPU, bit for bit)");
    /* without the exact sum (one rank holding every gradient): the same double sum on each side,
     * and pieces whose value is NaN, so that a norm taken from them by mistake is not finite */
    stats_twin t = stats_new(e, &zero);
    e->cpu->grad_sumsq(e->cpu, t.c, x.c, &sp, 0);
    e->gpu->grad_sumsq(e->gpu, t.g, x.g, &sp, 0);
    const tg_step_stats h0 = stats_of_gpu(e, t);
    char detail[320];
    snprintf(detail, sizeof detail, "cuda %.17g (with the exact sum %.17g), cpu %.17g (%.17g); values of the pieces %g, %g", h0.sumsq,
             g.sumsq, t.c->sumsq, s.c->sumsq, exact_sumsq_value(h0.sumsq_pieces), exact_sumsq_value(t.c->sumsq_pieces));
    check_true(e, h0.sumsq == g.sumsq && t.c->sumsq == s.c->sumsq && isnan(exact_sumsq_value(h0.sumsq_pieces)) &&
                      isnan(exact_sumsq_value(t.c->sumsq_pieces)),
               "grad_sumsq_without_exact_same_double_pieces_nan", detail);
    stats_free(e, t);
    stats_free(e, s);
    tw_free(e, x);
    free(h);
}

/* The clip factor's scalar arithmetic: the same bits on both sides. */
void cuda_test_clip_factor(env *e) {
    NEED(e, grad_clip_factor);
    const struct { double sumsq; float root, loss; int reduced; double max_norm; } cases[] = { /* root: of the exact sum */
        {4.0, 9.0f, 1.5f, 0, 1.0}, {99.0, 4.0f, 1.5f, 1, 1.0}, {4.0, 2.0f, 1.5f, 0, 10.0},  {0.7, 0.7f, 1.5f, 1, 0.0},
        {4.0, 2.0f, NAN, 0, 1.0},  {INFINITY, 1.0f, 1.5f, 0, 1.0}, {4.0, 0.3f, 1.5f, 1, 1.0}, {4.0, NAN, 1.5f, 1, 1.0},
        {4.0, 0x1p48f, 1.5f, 1, 1.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_step_stats init = {0};
        init.sumsq = cases[i].sumsq;
        exact_sumsq x = {{0}, 0};
        exact_sumsq_add(&x, cases[i].root);
        exact_sumsq_pieces(&x, init.sumsq_pieces);
        init.loss = cases[i].loss;
        stats_twin s = stats_new(e, &init);
        e->cpu->grad_clip_factor(e->cpu, s.c, cases[i].reduced, cases[i].max_norm);
        e->gpu->grad_clip_factor(e->gpu, s.g, cases[i].reduced, cases[i].max_norm);
        const tg_step_stats g = stats_of_gpu(e, s), *c = s.c;
        const bool same = (g.norm == c->norm || (isnan(g.norm) && isnan(c->norm))) && g.clip == c->clip &&
                          g.finite == c->finite;
        char name[64], detail[160];
        snprintf(name, sizeof name, "grad_clip_factor case %zu", i);
        snprintf(detail, sizeof detail, "(cuda norm %.17g clip %.9g finite %d; cpu %.17g %.9g %d)", g.norm, g.clip, g.finite,
                 c->norm, c->clip, c->finite);
        check_true(e, same, name, detail);
        stats_free(e, s);
    }
}

/* A float32 twin holds the same bits on both sides (the kernel follows the
 * CPU's rounding step by step): the count of elements that differ. */
static void check_same_bits(env *e, twin t, const char *name) {
    sync_gpu(e);
    float *want = cpu_values(e, t), *got = tg_malloc(t.n * sizeof(float), "cuda values");
    get_floats(e->gpu, TG_F32, got, t.g, t.n);
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < t.n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && differ++ == 0) first = i;
    char detail[160];
    if (differ)
        snprintf(detail, sizeof detail, "(%zu of %zu elements differ; first at %zu: cuda %.9g, cpu %.9g)", differ, t.n, first,
                 got[first], want[first]);
    else
        snprintf(detail, sizeof detail, "(all %zu elements)", t.n);
    check_true(e, differ == 0, name, detail);
    free(want);
    free(got);
}

/* One AdamW step (t = 3) over the windowed test spans scaled by k, with
 * clip factor 0.5: first with finite = 0 (nothing may change), then 1.
 * Gaps hold 7 on both sides and must keep it. work is p itself, or a
 * separate activation-type buffer beside a float32 master packed as the
 * moments (ZeRO's). */
void cuda_test_adamw(env *e, size_t k, int work_is_p) {
    NEED(e, adamw);
    size_t n, w;
    const tg_spans sp = test_spans(k, true, &n, &w);
    const tg_adamw_args a = {0.9f, 0.95f, 1e-8f, 0.1f};
    float *hp = span_values(e, &sp, n, -1, 1, 7.0f), *hg = span_values(e, &sp, n, -1, 1, 7.0f);
    float *hm = host_rand(e, w, -0.1f, 0.1f), *hv = host_rand(e, w, 0, 0.1f); /* second moments are non-negative */
    float *hmaster = work_is_p ? NULL : host_rand(e, w, -1, 1);
    twin g = tw_vals(e, F32, hg, n), m = tw_vals(e, F32, hm, w), v = tw_vals(e, F32, hv, w);
    twin work = tw_vals(e, work_is_p ? F32 : ACT, hp, n);
    twin p = work_is_p ? work : tw_vals(e, F32, hmaster, w);
    tg_step_stats init = {0};
    init.clip = 0.5f;
    init.in = (tg_step_inputs){1e-2f, 1.0f - powf(0.9f, 3), 1.0f - powf(0.95f, 3), 3};
    const char *tag = work_is_p ? "work_is_p" : "work_separate";
    for (int finite = 0; finite < 2; finite++) {
        init.finite = finite;
        stats_twin s = stats_new(e, &init);
        e->cpu->adamw(e->cpu, p.c, work.c, g.c, m.c, v.c, &sp, &a, s.c);
        e->gpu->adamw(e->gpu, p.g, work.g, g.g, m.g, v.g, &sp, &a, s.g);
        const char *when = finite ? "" : "_not_finite";
        check(e, p, TOL_F32, "adamw_%s%s p k=%zu", tag, when, k);
        check(e, m, TOL_F32, "adamw_%s%s m k=%zu", tag, when, k);
        check(e, v, TOL_F32, "adamw_%s%s v k=%zu", tag, when, k);
        if (!work_is_p) check(e, work, e->tol, "adamw_%s%s work k=%zu", tag, when, k);
        char name[96];
        const twin f32[3] = {p, m, v};
        const char *which[3] = {"p", "m", "v"};
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "adamw_%s%s %s k=%zu same bits", tag, when, which[i], k);
            check_same_bits(e, f32[i], name);
        }
        stats_free(e, s);
    }
    float *gw = tg_malloc(n * sizeof(float), "adamw work");
    get_floats(e->gpu, work_is_p ? TG_F32 : e->act, gw, work.g, n);
    size_t changed = 0, gaps_changed = 0;
    for (size_t i = 0; i < n; i++) {
        changed += gw[i] != hp[i];
        gaps_changed += !in_spans(&sp, i) && gw[i] != 7.0f;
    }
    char detail[96];
    snprintf(detail, sizeof detail, "(%zu of %zu changed, %zu of them gaps)", changed, n, gaps_changed);
    check_true(e, changed > 0 && gaps_changed == 0, work_is_p ? "adamw_updates_tensors_not_gaps" : "adamw_work_updates_tensors_not_gaps", detail);
    if (!work_is_p) tw_free(e, p);
    tw_free(e, work);
    tw_free(e, g);
    tw_free(e, m);
    tw_free(e, v);
    free(hp); free(hg); free(hm); free(hv); free(hmaster); free(gw);
}
#endif

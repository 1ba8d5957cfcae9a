/* tests/gpu/block_profile.h's sums. */
#include "tests/gpu/block_profile.h"

#include <stdlib.h>
#include <string.h>

/* A record's last compute part (1 ..): its end by the SM's clock and by
 * %globaltimer, and its cycles. */
static uint64_t rec_end_cycles(const cuda_block_profile *r) {
    uint64_t end = 0;
    for (int p = 1; p < CUDA_PROFILE_PARTS; p++)
        if (r->end_cycles[p] > end) end = r->end_cycles[p];
    return end;
}
static uint64_t rec_end_ns(const cuda_block_profile *r) {
    uint64_t end = 0;
    for (int p = 1; p < CUDA_PROFILE_PARTS; p++)
        if (r->end_ns[p] > end) end = r->end_ns[p];
    return end;
}

static double part_total(const cuda_block_profile *r, int part) {
    double c = 0.0;
    for (int k = 0; k < CUDA_PROFILE_PHASES; k++) c += r->cycles[part][k];
    return c;
}

static double rec_cycles(const cuda_block_profile *r) {
    double most = 0.0;
    for (int p = 1; p < CUDA_PROFILE_PARTS; p++) {
        const double c = part_total(r, p);
        if (c > most) most = c;
    }
    return most;
}

/* Whether the block wrote its start and every compute part's end. */
static int rec_written(const cuda_block_profile *r) {
    if (r->start_ns == 0) return 0;
    for (int p = 1; p < CUDA_PROFILE_PARTS; p++)
        if (r->end_ns[p] < r->start_ns || r->end_ns[p] == 0 || r->end_cycles[p] < r->start_cycles) return 0;
    return 1;
}

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double median_sorted(const uint64_t *v, int n) {
    return n == 0 ? 0.0 : n % 2 ? (double)v[n / 2] : 0.5 * ((double)v[n / 2 - 1] + (double)v[n / 2]);
}

/* Blocks in (smid, start cycles) order. */
static int cmp_sm_start(const void *a, const void *b) {
    const cuda_block_profile *x = *(const cuda_block_profile *const *)a, *y = *(const cuda_block_profile *const *)b;
    if (x->smid != y->smid) return (x->smid > y->smid) - (x->smid < y->smid);
    return (x->start_cycles > y->start_cycles) - (x->start_cycles < y->start_cycles);
}

/* By each SM's clock over the n written records at w: the SMs, how much
 * of each one's time from its first block's start to its last's end a
 * block held it, and the median gap between consecutive blocks on one. */
static void sm_occupancy(const cuda_block_profile **w, int n, block_profile_sum *sum) {
    qsort(w, (size_t)n, sizeof *w, cmp_sm_start);
    uint64_t *gaps = malloc((size_t)(n > 0 ? n : 1) * sizeof *gaps);
    double busy = 0.0, window = 0.0;
    uint64_t first = 0, last = 0;
    int g = 0;
    for (int i = 0; i < n; i++) {
        const uint64_t start = w[i]->start_cycles, end = rec_end_cycles(w[i]);
        if (i == 0 || w[i]->smid != w[i - 1]->smid) { /* an SM's first block */
            if (i > 0) window += (double)(last - first);
            sum->sms++;
            first = start, last = end;
        } else {
            const uint64_t before = rec_end_cycles(w[i - 1]);
            gaps[g++] = start > before ? start - before : 0;
            last = end > last ? end : last;
        }
        busy += (double)(end - start);
    }
    if (n > 0) window += (double)(last - first);
    qsort(gaps, (size_t)g, sizeof *gaps, cmp_u64);
    sum->gap_cycles = median_sorted(gaps, g);
    sum->held = window > 0 ? busy / window : 0.0;
    free(gaps);
}

/* %globaltimer over the n written records: the span from the first start
 * to the last end, and the smallest step between two readings. */
static void global_span(const cuda_block_profile **w, int n, block_profile_sum *sum) {
    uint64_t *t = malloc((size_t)(n > 0 ? n : 1) * (1 + CUDA_PROFILE_PARTS) * sizeof *t);
    int m = 0;
    for (int i = 0; i < n; i++) {
        t[m++] = w[i]->start_ns;
        for (int p = 0; p < CUDA_PROFILE_PARTS; p++)
            if (w[i]->end_ns[p] != 0) t[m++] = w[i]->end_ns[p];
    }
    qsort(t, (size_t)m, sizeof *t, cmp_u64);
    uint64_t step = 0, end = 0;
    for (int i = 1; i < m; i++)
        if (t[i] > t[i - 1] && (step == 0 || t[i] - t[i - 1] < step)) step = t[i] - t[i - 1];
    for (int i = 0; i < n; i++)
        if (rec_end_ns(w[i]) > end) end = rec_end_ns(w[i]);
    sum->span_ns = m > 0 ? (double)(end - t[0]) : 0.0;
    sum->timer_step_ns = (double)step;
    free(t);
}

/* cycles = fixed + per_tile x tiles over the written records. */
static void fit_tiles(const cuda_block_profile **w, int n, block_profile_sum *sum) {
    if (n == 0) return;
    double st = 0, sc = 0, stt = 0, stc = 0;
    for (int i = 0; i < n; i++) {
        const double t = w[i]->tiles, c = rec_cycles(w[i]);
        st += t, sc += c, stt += t * t, stc += t * c;
    }
    const double det = n * stt - st * st;
    if (det == 0.0) { /* every block the same size: no slope to tell */
        sum->fixed = sc / n;
        return;
    }
    sum->per_tile = (n * stc - st * sc) / det;
    sum->fixed = (sc - sum->per_tile * st) / n;
}

/* Adds record r's tiles and phases to sum, and its compute parts' cycles
 * and nanoseconds to *cycles and *ns. */
static void add_record(const cuda_block_profile *r, block_profile_sum *sum, double *cycles, double *ns) {
    sum->tiles += r->tiles;
    sum->producer_missing += r->end_ns[0] == 0;
    for (int p = 0; p < CUDA_PROFILE_PARTS; p++) {
        for (int k = 0; k < CUDA_PROFILE_PHASES; k++) sum->cycles[p][k] += r->cycles[p][k];
        sum->part_cycles[p] += part_total(r, p);
        if (p > 0) {
            *cycles += part_total(r, p);
            *ns += (double)(r->end_ns[p] - r->start_ns);
        }
    }
}

void block_profile_summarize(const cuda_block_profile *recs, int n, block_profile_sum *sum) {
    memset(sum, 0, sizeof *sum);
    const cuda_block_profile **w = malloc((size_t)(n > 0 ? n : 1) * sizeof *w);
    double cycles = 0.0, ns = 0.0;
    for (int i = 0; i < n; i++) {
        if (!rec_written(&recs[i])) {
            sum->missing++;
            continue;
        }
        w[sum->blocks++] = &recs[i];
        add_record(&recs[i], sum, &cycles, &ns);
    }
    if (sum->blocks > 0) {
        global_span(w, sum->blocks, sum);
        sm_occupancy(w, sum->blocks, sum);
        sum->clock_ghz = ns > 0 ? cycles / ns : 0.0;
        fit_tiles(w, sum->blocks, sum);
    }
    free(w);
}

/* One part's phases: cycles a tile and share of the part's time. */
static void print_part(FILE *f, const char *label, const block_profile_sum *sum, block_phase_name name, int part,
                       const char *what) {
    const double parts = part == 0 ? 1.0 : CUDA_PROFILE_PARTS - 1.0; /* the consumers: their mean */
    fprintf(f, "# profile %s: %s, cycles a tile (share of its time):", label, what);
    for (int k = 0; k < CUDA_PROFILE_PHASES && name(part, k); k++) {
        double c = 0.0;
        for (int p = part; p < (part == 0 ? 1 : CUDA_PROFILE_PARTS); p++) c += sum->cycles[p][k];
        double all = 0.0;
        for (int p = part; p < (part == 0 ? 1 : CUDA_PROFILE_PARTS); p++) all += sum->part_cycles[p];
        fprintf(f, "%s %s %.0f (%.1f%%)", k ? "," : "", name(part, k), c / parts / sum->tiles, all > 0 ? 100.0 * c / all : 0.0);
    }
    fprintf(f, "\n");
}

void block_profile_print(FILE *f, const char *label, const block_profile_sum *sum, block_phase_name name) {
    if (sum->blocks == 0 || sum->tiles <= 0) {
        fprintf(f, "# profile %s: no block wrote its record (%d missing)\n", label, sum->missing);
        return;
    }
    const double us_per_cycle = sum->clock_ghz > 0 ? 1e-3 / sum->clock_ghz : 0.0;
    fprintf(f,
            "# profile %s: %d blocks (%d without a whole record) on %d SMs over %.1f us (%%globaltimer; its closest distinct "
            "readings %.0f ns apart); SM clock %.3f GHz\n",
            label, sum->blocks, sum->missing, sum->sms, sum->span_ns * 1e-3, sum->timer_step_ns, sum->clock_ghz);
    fprintf(f,
            "# profile %s: on each SM, from its first block's start to its last's end, a block held it %.1f%% of the time; "
            "median gap between blocks %.0f cycles (%.2f us)\n",
            label, 100.0 * sum->held, sum->gap_cycles, sum->gap_cycles * us_per_cycle);
    fprintf(f, "# profile %s: a block's cycles = %.0f + %.0f a tile (least squares; %.2f tiles a block)\n", label, sum->fixed,
            sum->per_tile, sum->tiles / sum->blocks);
    print_part(f, label, sum, name, 1, "the compute warpgroups (their mean)");
    if (name(0, 0)) print_part(f, label, sum, name, 0, "the producer thread");
}

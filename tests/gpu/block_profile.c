/* tests/gpu/block_profile.h's sums. */
#include "tests/gpu/block_profile.h"

#include <stdlib.h>
#include <string.h>

/* A record's last consumer: its end and its cycles. */
static uint64_t rec_end(const cuda_block_profile *r) {
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

static int rec_written(const cuda_block_profile *r) { return r->start_ns != 0 && rec_end(r) >= r->start_ns; }

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Blocks in (smid, start) order. */
static int cmp_sm_start(const void *a, const void *b) {
    const cuda_block_profile *x = *(const cuda_block_profile *const *)a, *y = *(const cuda_block_profile *const *)b;
    if (x->smid != y->smid) return (x->smid > y->smid) - (x->smid < y->smid);
    return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
}

/* SMs, and the median gap between consecutive blocks on one SM, over the
 * n written records at w. */
static void sm_gaps(const cuda_block_profile **w, int n, block_profile_sum *sum) {
    qsort(w, (size_t)n, sizeof *w, cmp_sm_start);
    uint64_t *gaps = malloc((size_t)(n > 0 ? n : 1) * sizeof *gaps);
    int g = 0;
    for (int i = 0; i < n; i++) {
        if (i == 0 || w[i]->smid != w[i - 1]->smid) {
            sum->sms++;
            continue;
        }
        const uint64_t end = rec_end(w[i - 1]);
        gaps[g++] = w[i]->start_ns > end ? w[i]->start_ns - end : 0;
    }
    qsort(gaps, (size_t)g, sizeof *gaps, cmp_u64);
    sum->gap_ns = g == 0 ? 0.0 : g % 2 ? (double)gaps[g / 2] : 0.5 * ((double)gaps[g / 2 - 1] + (double)gaps[g / 2]);
    free(gaps);
}

/* cycles = fixed + per_tile x tiles over the written records. */
static void fit_tiles(const cuda_block_profile **w, int n, block_profile_sum *sum) {
    double st = 0, sc = 0, stt = 0, stc = 0;
    for (int i = 0; i < n; i++) {
        const double t = w[i]->tiles, c = rec_cycles(w[i]);
        st += t, sc += c, stt += t * t, stc += t * c;
    }
    const double det = n * stt - st * st;
    if (n == 0) return;
    if (det == 0.0) { /* every block the same size: no slope to tell */
        sum->fixed = sc / n;
        return;
    }
    sum->per_tile = (n * stc - st * sc) / det;
    sum->fixed = (sc - sum->per_tile * st) / n;
}

void block_profile_summarize(const cuda_block_profile *recs, int n, block_profile_sum *sum) {
    memset(sum, 0, sizeof *sum);
    const cuda_block_profile **w = malloc((size_t)(n > 0 ? n : 1) * sizeof *w);
    uint64_t first = UINT64_MAX, last = 0;
    double held_ns = 0.0, consumer_cycles = 0.0, consumer_ns = 0.0;
    for (int i = 0; i < n; i++) {
        const cuda_block_profile *r = &recs[i];
        if (!rec_written(r)) {
            sum->missing++;
            continue;
        }
        w[sum->blocks++] = r;
        const uint64_t end = rec_end(r);
        first = r->start_ns < first ? r->start_ns : first;
        last = end > last ? end : last;
        held_ns += (double)(end - r->start_ns);
        sum->tiles += r->tiles;
        for (int p = 0; p < CUDA_PROFILE_PARTS; p++) {
            for (int k = 0; k < CUDA_PROFILE_PHASES; k++) sum->cycles[p][k] += r->cycles[p][k];
            sum->part_cycles[p] += part_total(r, p);
            if (p > 0 && r->end_ns[p] > r->start_ns) {
                consumer_cycles += part_total(r, p);
                consumer_ns += (double)(r->end_ns[p] - r->start_ns);
            }
        }
    }
    if (sum->blocks > 0) {
        sum->span_ns = (double)(last - first);
        sm_gaps(w, sum->blocks, sum);
        sum->held = sum->span_ns > 0 ? held_ns / (sum->sms * sum->span_ns) : 0.0;
        sum->clock_ghz = consumer_ns > 0 ? consumer_cycles / consumer_ns : 0.0;
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
    fprintf(f,
            "# profile %s: %d blocks (%d without a record) on %d SMs over %.1f us; the SMs held a block %.1f%% of it, "
            "median gap between blocks on an SM %.2f us; SM clock %.3f GHz\n",
            label, sum->blocks, sum->missing, sum->sms, sum->span_ns * 1e-3, 100.0 * sum->held, sum->gap_ns * 1e-3,
            sum->clock_ghz);
    fprintf(f, "# profile %s: a block's cycles = %.0f + %.0f a tile (least squares; %.2f tiles a block)\n", label, sum->fixed,
            sum->per_tile, sum->tiles / sum->blocks);
    print_part(f, label, sum, name, 1, "the compute warpgroups (their mean)");
    if (name(0, 0)) print_part(f, label, sum, name, 0, "the producer thread");
}

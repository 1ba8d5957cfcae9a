/* tests/gpu/block_profile.c on made-up records whose sums are worked out
 * by hand below: the SMs, the gaps between blocks on an SM, how full the
 * SMs were kept, the clock, the least-squares split of a block's cycles,
 * the phases' sums, a record no block wrote, and the printed lines.
 * tests/t_block_profile.sh builds and runs it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/block_profile.h"
#include "tests/tap.h"

#define N_RECS 6

/* A block on `sm` from start to end (ns; the SM's clock reads twice
 * that) of `tiles` key tiles: consumer 1 takes 1000 + 500 tiles cycles
 * (in phases 0, 1 and 2 as 1000, 300 tiles and 200 tiles), consumer 2
 * half of that in phase 3; the producer 7 cycles a tile in phase 1, and
 * ends 30 ns after the start. Both consumers end at `end`. */
static cuda_block_profile block(uint32_t sm, uint64_t start, uint64_t end, uint32_t tiles) {
    cuda_block_profile r;
    memset(&r, 0, sizeof r);
    r.smid = sm;
    r.start_ns = start;
    r.end_ns[0] = start + 30;
    r.end_ns[1] = r.end_ns[2] = end;
    r.start_cycles = 2 * start;
    r.end_cycles[0] = 2 * (start + 30);
    r.end_cycles[1] = r.end_cycles[2] = 2 * end;
    r.tiles = tiles;
    r.cycles[1][0] = 1000;
    r.cycles[1][1] = 300 * tiles;
    r.cycles[1][2] = 200 * tiles;
    r.cycles[2][3] = (1000 + 500 * tiles) / 2;
    r.cycles[0][1] = 7 * tiles;
    return r;
}

static const char *phase_name(int part, int phase) {
    static const char *const consumer[] = {"alpha", "beta", "gamma", "delta"};
    static const char *const producer[] = {"p0", "p1"};
    if (part == 0) return phase >= 0 && phase < 2 ? producer[phase] : NULL;
    return phase >= 0 && phase < 4 ? consumer[phase] : NULL;
}

static const char *compute_only(int part, int phase) { return part == 0 ? NULL : phase_name(part, phase); }

/* Records of two SMs' blocks into recs. */
static void fill_recs(cuda_block_profile *recs) {
    recs[0] = block(0, 100, 200, 1);
    recs[1] = block(1, 100, 300, 3);
    for (int i = 2; i < N_RECS; i++) recs[i] = block(1, 100 + 400 * (uint64_t)i, 450 + 400 * (uint64_t)i, 2);
}

static int near(double got, double want) { return fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want)); }

int main(void) {
    int failed = 0;
    cuda_block_profile recs[N_RECS] = {
        block(0, 100, 200, 1), block(0, 250, 400, 2), /* SM 0: a gap of 50 */
        block(1, 100, 300, 3), block(1, 310, 400, 4), /* SM 1: 10 */
        block(2, 120, 400, 2),                        /* SM 2: one block */
    };
    memset(&recs[5], 0, sizeof recs[5]); /* a block that never wrote its record */
    block_profile_sum s;
    block_profile_summarize(recs, N_RECS, &s);
    char why[160];
    snprintf(why, sizeof why, "%d blocks, %d missing, %d SMs", s.blocks, s.missing, s.sms);
    tap_check(&failed, "block_profile_counts_blocks_sms_and_missing", s.blocks == 5 && s.missing == 1 && s.sms == 3, why);
    snprintf(why, sizeof why, "span %g ns, timer step %g ns", s.span_ns, s.timer_step_ns);
    /* readings 100 120 130 150 200 250 280 300 310 340 400: steps of 10 at least */
    tap_check(&failed, "block_profile_span_and_timer_step", near(s.span_ns, 300.0) && near(s.timer_step_ns, 10.0), why);
    /* by the SMs' clocks: gaps 100 and 20 cycles; held: (200 + 300 + 400 + 180 + 560) cycles of windows of
       600, 600 and 560 */
    snprintf(why, sizeof why, "gap %g cycles, held %g", s.gap_cycles, s.held);
    tap_check(&failed, "block_profile_gap_and_held_by_the_sms_clocks", near(s.gap_cycles, 60.0) && near(s.held, 1640.0 / 1760.0),
              why);
    /* every block's last consumer: 1000 + 500 tiles exactly */
    snprintf(why, sizeof why, "fixed %g, per tile %g, tiles %g", s.fixed, s.per_tile, s.tiles);
    tap_check(&failed, "block_profile_fit_splits_fixed_and_per_tile",
              near(s.fixed, 1000.0) && near(s.per_tile, 500.0) && near(s.tiles, 12.0), why);
    /* consumers' cycles 1.5 x (5000 + 500 x 12) = 16500 over 2 x 820 ns */
    snprintf(why, sizeof why, "clock %g GHz", s.clock_ghz);
    tap_check(&failed, "block_profile_clock_from_cycles_over_ns", near(s.clock_ghz, 16500.0 / 1640.0), why);
    snprintf(why, sizeof why, "phases %g %g %g %g, producer %g, parts %g %g", s.cycles[1][0], s.cycles[1][1], s.cycles[1][2],
             s.cycles[2][3], s.cycles[0][1], s.part_cycles[1], s.part_cycles[2]);
    tap_check(&failed, "block_profile_sums_phases",
              near(s.cycles[1][0], 5000.0) && near(s.cycles[1][1], 3600.0) && near(s.cycles[1][2], 2400.0) &&
                  near(s.cycles[2][3], 5500.0) && near(s.cycles[0][1], 84.0) && near(s.part_cycles[1], 11000.0) &&
                  near(s.part_cycles[2], 5500.0),
              why);

    /* the lines: the fit, and each named phase a tile (consumers' mean: alpha 5000 / 2 / 12) */
    char text[4096] = "";
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    block_profile_print(f, "case", &s, phase_name);
    fclose(f);
    tap_check(&failed, "block_profile_prints_the_fit", strstr(text, "# profile case: a block's cycles = 1000 + 500 a tile") != NULL,
              text);
    tap_check(&failed, "block_profile_prints_named_phases",
              strstr(text, "alpha 208 (30.3%), beta 150 (21.8%), gamma 100 (14.5%), delta 229 (33.3%)\n") &&
                  strstr(text, "p0 0 (0.0%), p1 7 (100.0%)\n") &&
                  strstr(text, "5 blocks (1 without a whole record) on 3 SMs over 0.3 us (%globaltimer; its closest distinct readings 10 ns apart)") &&
                  strstr(text, "a block held it 93.2% of the time; median gap between blocks 60 cycles (0.01 us)\n"),
              text);

    /* no record written: said, and nothing divided by zero */
    memset(recs, 0, sizeof recs);
    block_profile_summarize(recs, N_RECS, &s);
    f = fmemopen(text, sizeof text - 1, "w");
    block_profile_print(f, "none", &s, phase_name);
    fclose(f);
    tap_check(&failed, "block_profile_says_when_no_block_wrote",
              s.blocks == 0 && s.missing == N_RECS && strstr(text, "no block wrote its record (6 missing)") != NULL, text);

    /* a block whose second compute part wrote no end is no whole record; one whose producer wrote none is counted */
    fill_recs(recs);
    recs[1].end_ns[2] = 0;
    recs[2].end_ns[0] = 0;
    block_profile_summarize(recs, N_RECS, &s);
    snprintf(why, sizeof why, "%d blocks, %d missing, producer missing %d", s.blocks, s.missing, s.producer_missing);
    tap_check(&failed, "block_profile_wants_every_compute_part", s.blocks == N_RECS - 1 && s.missing == 1 && s.producer_missing == 1,
              why);

    /* a kernel with no producer (part 0 has no phase): no producer line */
    fill_recs(recs);
    block_profile_summarize(recs, N_RECS, &s);
    f = fmemopen(text, sizeof text - 1, "w");
    block_profile_print(f, "two", &s, compute_only);
    fclose(f);
    tap_check(&failed, "block_profile_leaves_out_a_part_without_phases",
              strstr(text, "# profile two: the compute warpgroups") != NULL && strstr(text, "producer") == NULL, text);
    return failed;
}

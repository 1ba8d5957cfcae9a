/* The link model of projected runs (parallel/comm.h, comm_link): the flat
 * latency + bandwidth model, nccl-tests tables (interpolation in log size,
 * the latency floor below the first row, the last row's busbw beyond, a
 * collective without rows using all_reduce's), rows per group size (the
 * exact size, else rows for any size, else the nearest size, a tie to the
 * smaller), the table parser's errors (file and line named), comm_null
 * adding the modeled time of a collective at its group's size, the shipped
 * tables' coverage, and the overlap models (DP buckets behind the backward
 * pass, ZeRO's prefetch, TP collectives beside products).
 * Usage: test_link SCRATCH_DIR [SHIPPED_TABLE...]. Prints "ok NAME" / "not ok NAME - why". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"
#include "tests/tap.h"

static int failed = 0;

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b) + 1e-18; }

/* at 8 ranks, where a table without a ranks column has the same rows for every size */
static void check_time_at(const char *name, const comm_link *l, coll_kind k, int ranks, double msg, double ring, double want) {
    const double got = comm_link_seconds(l, k, ranks, msg, ring);
    char why[200];
    snprintf(why, sizeof why, "%s of %g bytes (ring %g) at %d ranks: %.9g s, want %.9g s", comm_kind_name(k), msg, ring,
             ranks, got, want);
    tap_check(&failed, name, near(got, want), why);
}

static void check_time(const char *name, const comm_link *l, coll_kind k, double msg, double ring, double want) {
    check_time_at(name, l, k, 8, msg, ring, want);
}

static const char *write_table(const char *dir, const char *name, const char *text) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("not ok write_%s - cannot write %s\n", name, path);
        exit(1);
    }
    return path;
}

static void table_times(const char *dir) {
    comm_link l = comm_link_flat(0, 0);
    tg_err e;
    const char *p = write_table(dir, "t.txt", "# comment\n\nall_reduce 100000 30  # trailing comment\nall_reduce 1000 10\n"
                                              "reduce_scatter 1000 5\n");
    tap_check(&failed, "table_loads", comm_link_load(&l, p, &e) == 0, e.msg);
    const comm_link_set *ar = comm_link_rows_for(&l, COLL_ALL_REDUCE, 8);
    tap_check(&failed, "table_sorted", ar && ar->ranks == 0 && ar->n == 2 && ar->rows[0].bytes == 1000, "rows not sorted by size");
    /* at a row: ring / busbw of the row */
    check_time("at_first_row", &l, COLL_ALL_REDUCE, 1000, 1750, 1750 / 10e9);
    check_time("at_last_row", &l, COLL_ALL_REDUCE, 100000, 175000, 175000 / 30e9);
    /* halfway in log size (10^4 between 10^3 and 10^5): the mean busbw, 20 GB/s */
    check_time("log_interpolation", &l, COLL_ALL_REDUCE, 10000, 17500, 17500 / 20e9);
    /* a quarter of the way: 10^3.5 bytes, 15 GB/s */
    check_time("log_interpolation_quarter", &l, COLL_ALL_REDUCE, pow(10, 3.5), 1750 * pow(10, 0.5), 1750 * pow(10, 0.5) / 15e9);
    /* below the first row the time is the first row's: latency */
    check_time("latency_floor", &l, COLL_ALL_REDUCE, 10, 17.5, 1750 / 10e9);
    check_time("beyond_last_row", &l, COLL_ALL_REDUCE, 1e7, 1.75e7, 1.75e7 / 30e9);
    check_time("own_rows", &l, COLL_REDUCE_SCATTER, 1000, 875, 875 / 5e9);
    check_time("all_reduce_rows_by_default", &l, COLL_ALL_GATHER, 10000, 8750, 8750 / 20e9);
    check_time("nothing_sent", &l, COLL_ALL_REDUCE, 0, 0, 0);
    const comm_link flat = comm_link_flat(460e9, 10e-6);
    check_time("flat_model", &flat, COLL_ALL_REDUCE, 1 << 20, 1835008, 10e-6 + 1835008 / 460e9);
}

static void table_errors(const char *dir) {
    static const struct { const char *name, *text, *needle; } bad[] = {
        {"bad_collective", "all_reduce 8 1\nallreduce 16 2\n", "t_bad.txt:2: unknown collective 'allreduce'"},
        {"bad_fields", "all_reduce 8\n", "t_bad.txt:1: expected \"collective bytes busbw_GBps [ranks]\""},
        {"bad_extra_field", "all_reduce 8 1 4 9\n", "t_bad.txt:1: expected"},
        {"bad_ranks_one", "all_reduce 8 1 1\n", "t_bad.txt:1: ranks must be a whole number from 2"},
        {"bad_ranks_fraction", "all_reduce 8 1 2.5\n", "t_bad.txt:1: ranks must be a whole number from 2"},
        {"bad_ranks_word", "all_reduce 8 1 eight\n", "t_bad.txt:1: expected"},
        {"duplicate_size_at_ranks", "all_reduce 8 1 4\nall_reduce 8 1 2\nall_reduce 8 2 4\n",
         "t_bad.txt:3: a second all_reduce row for 8 bytes at 4 ranks"},
        {"too_many_sizes", "all_reduce 8 1 2\nall_reduce 8 1 3\nall_reduce 8 1 4\nall_reduce 8 1 5\nall_reduce 8 1 6\n"
                           "all_reduce 8 1 7\nall_reduce 8 1 8\nall_reduce 8 1\nall_reduce 8 1 9\n",
         "t_bad.txt:9: more than 8 group sizes of all_reduce rows"},
        {"no_all_reduce_at_ranks", "all_gather 8 1 4\n", "t_bad.txt: no all_reduce row"},
        {"bad_busbw", "all_reduce 8 -3\n", "t_bad.txt:1: busbw_GBps must be above 0"},
        {"bad_bytes", "all_reduce 0.5 3\n", "t_bad.txt:1: bytes must be a whole number"},
        {"duplicate_size", "all_reduce 8 1\n all_reduce 8 2\n", "t_bad.txt:2: a second all_reduce row for 8 bytes"},
        {"no_all_reduce", "all_gather 8 1\n", "t_bad.txt: no all_reduce row"},
        {"empty_table", "# nothing\n", "t_bad.txt: no all_reduce row"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        comm_link l = comm_link_flat(0, 0);
        tg_err e = {0};
        const int rc = comm_link_load(&l, write_table(dir, "t_bad.txt", bad[i].text), &e);
        char why[2200];
        snprintf(why, sizeof why, "status %d, message '%s', want '%s'", rc, e.msg, bad[i].needle);
        tap_check(&failed, bad[i].name, rc != 0 && strstr(e.msg, bad[i].needle) != NULL, why);
    }
    comm_link l = comm_link_flat(0, 0);
    tg_err e = {0};
    char missing[1024];
    snprintf(missing, sizeof missing, "%s/no_such_table.txt", dir);
    tap_check(&failed, "missing_file", comm_link_load(&l, missing, &e) != 0 && strstr(e.msg, "no_such_table.txt: cannot open") != NULL, e.msg);
}

/* Rows per group size: all_reduce measured at 2, 4 and 8 ranks;
 * reduce_scatter for any size and at 8; all_gather only at 2. */
static void degree_rows(const char *dir) {
    comm_link l = comm_link_flat(0, 0);
    tg_err e;
    const char *p = write_table(dir, "t3.txt",
                                "all_reduce 1000 10 2\nall_reduce 100000 30 2\nall_reduce 1000 20 4\nall_reduce 1000 40 8\n"
                                "reduce_scatter 1000 5\nreduce_scatter 1000 7 8\nall_gather 1000 3 2\n");
    tap_check(&failed, "degree_table_loads", comm_link_load(&l, p, &e) == 0, e.msg);
    check_time_at("degree_exact_2", &l, COLL_ALL_REDUCE, 2, 1000, 1000, 1000 / 10e9);
    check_time_at("degree_exact_2_interpolates", &l, COLL_ALL_REDUCE, 2, 10000, 10000, 10000 / 20e9);
    check_time_at("degree_exact_4", &l, COLL_ALL_REDUCE, 4, 1000, 1500, 1500 / 20e9);
    check_time_at("degree_exact_8", &l, COLL_ALL_REDUCE, 8, 1000, 1750, 1750 / 40e9);
    check_time_at("degree_nearest_above", &l, COLL_ALL_REDUCE, 16, 1000, 1875, 1875 / 40e9);
    check_time_at("degree_nearest_5_is_4", &l, COLL_ALL_REDUCE, 5, 1000, 1600, 1600 / 20e9);
    check_time_at("degree_tie_3_takes_2", &l, COLL_ALL_REDUCE, 3, 1000, 1333, 1333 / 10e9);
    check_time_at("degree_tie_6_takes_4", &l, COLL_ALL_REDUCE, 6, 1000, 1666, 1666 / 20e9);
    check_time_at("degree_own_rows_at_8", &l, COLL_REDUCE_SCATTER, 8, 1000, 875, 875 / 7e9);
    check_time_at("degree_any_rows_before_nearest", &l, COLL_REDUCE_SCATTER, 4, 1000, 750, 750 / 5e9);
    check_time_at("degree_kind_nearest_own_rows", &l, COLL_ALL_GATHER, 8, 1000, 875, 875 / 3e9);
    check_time_at("degree_no_rows_uses_all_reduce", &l, COLL_BROADCAST, 4, 1000, 1000, 1000 / 20e9);
    const comm_link_set *s = comm_link_rows_for(&l, COLL_ALL_REDUCE, 2);
    tap_check(&failed, "degree_rows_for", s && s->ranks == 2 && s->n == 2 && s->rows[1].bytes == 100000,
              "comm_link_rows_for(all_reduce, 2) is not the two 2-rank rows");
    const comm_link flat = comm_link_flat(1e9, 0);
    tap_check(&failed, "degree_rows_for_flat", comm_link_rows_for(&flat, COLL_ALL_REDUCE, 2) == NULL, "the flat model has rows");

    /* comm_null at its own size: the same all_reduce of 256 floats at 2 and at 4 ranks */
    double got[2] = {-1, -1};
    float buf[256] = {0};
    for (int i = 0; i < 2; i++) {
        comm *c = comm_null_create_modeled("tp", 0, 2 << i, l);
        if (c && comm_all_reduce(c, buf, 256, REDUCE_SUM, &e) == 0) got[i] = c->modeled_seconds;
        comm_destroy(c);
    }
    /* 1024 bytes: at 2 ranks a ring sends 1024, busbw interpolated just past the first 2-rank row; at 4 ranks
     * it sends 1536, beyond the single 4-rank row */
    const double at2 = 1024 / (10e9 + 20e9 * log(1.024) / log(100.0)), at4 = 1536 / 20e9;
    char why[160];
    snprintf(why, sizeof why, "2 ranks %.9g s (want %.9g), 4 ranks %.9g s (want %.9g)", got[0], at2, got[1], at4);
    tap_check(&failed, "null_comm_uses_group_size", near(got[0], at2) && near(got[1], at4), why);
}

/* Each shipped table loads and has all_reduce, reduce_scatter and
 * all_gather rows of their own at 2, 4 and 8 ranks. */
static void shipped_tables(int n, char **paths) {
    static const coll_kind kinds[3] = {COLL_ALL_REDUCE, COLL_REDUCE_SCATTER, COLL_ALL_GATHER};
    for (int i = 0; i < n; i++) {
        comm_link *l = malloc(sizeof *l);
        tg_err e = {0};
        char name[160], why[2200] = "";
        const char *base = strrchr(paths[i], '/') ? strrchr(paths[i], '/') + 1 : paths[i];
        snprintf(name, sizeof name, "shipped_%s", base);
        if (!l || comm_link_load(l, paths[i], &e)) snprintf(why, sizeof why, "%s", e.msg);
        for (int k = 0; k < 3 && !why[0]; k++)
            for (int ranks = 2; ranks <= 8 && !why[0]; ranks *= 2) {
                const comm_link_set *s = NULL;
                for (int j = 0; j < l->n_sets[kinds[k]]; j++)
                    if (l->sets[kinds[k]][j].ranks == ranks) s = &l->sets[kinds[k]][j];
                if (!s || s->n < 2) snprintf(why, sizeof why, "no %s rows of its own at %d ranks", comm_kind_name(kinds[k]), ranks);
            }
        tap_check(&failed, name, !why[0], why);
        free(l);
    }
}

/* comm_null over the table: one all_reduce of 8192 floats at size 8 adds
 * ring / busbw(message of 32768 bytes) to modeled_seconds. */
static void null_comm(const char *dir) {
    comm_link l = comm_link_flat(0, 0);
    tg_err e;
    if (comm_link_load(&l, write_table(dir, "t2.txt", "all_reduce 1024 10\nall_reduce 1048576 40\n"), &e)) {
        tap_check(&failed, "null_comm_modeled", 0, e.msg);
        return;
    }
    comm *c = comm_null_create_modeled("tp", 0, 8, l);
    float *buf = calloc(8192, sizeof(float));
    const int rc = c && buf ? comm_all_reduce(c, buf, 8192, REDUCE_SUM, &e) : -1;
    const double ring = 2.0 * 7 * 1024 * 4, bw = (10 + (40 - 10) * (5.0 / 10.0)) * 1e9; /* 2^15 is halfway 2^10..2^20 */
    char why[160];
    snprintf(why, sizeof why, "rc %d, modeled %.9g s, want %.9g s", rc, c ? c->modeled_seconds : -1, ring / bw);
    tap_check(&failed, "null_comm_modeled", rc == 0 && c && near(c->modeled_seconds, ring / bw), why);
    free(buf);
    comm_destroy(c);
}

/* The overlap model of projected runs: collectives queue on the link in
 * order, each from when it is ready; what runs past the compute's end is
 * exposed, the rest hidden. Figures worked by hand. */
static void overlap_model(void) {
    const double ready[3] = {0.2, 0.5, 1.0}, secs[3] = {0.4, 0.1, 0.05};
    /* link: [0.2, 0.6), then the second waits for it: [0.6, 0.7), the third [1.0, 1.05): 0.05 past 1.0 */
    double got = comm_overlap_hidden_s(ready, secs, 3, 1.0);
    char why[96];
    snprintf(why, sizeof why, "hidden %.9g s, want 0.5", got);
    tap_check(&failed, "overlap_hidden_queued", near(got, 0.5), why);
    /* a backlog: [0.1, 0.3), [0.3, 0.5), [0.5, 0.55) against a pass ending at 0.3: 0.25 of 0.45 s after it */
    const double ready2[3] = {0.1, 0.2, 0.3}, secs2[3] = {0.2, 0.2, 0.05};
    got = comm_overlap_hidden_s(ready2, secs2, 3, 0.3);
    snprintf(why, sizeof why, "hidden %.9g s, want 0.2", got);
    tap_check(&failed, "overlap_hidden_backlog", near(got, 0.2), why);
    got = comm_overlap_hidden_s(ready, secs, 0, 1.0);
    tap_check(&failed, "overlap_hidden_none", got == 0.0, "no collective hides something");
}

/* The prefetch model (ZeRO's gather beside the forward pass): the link runs
 * the collectives back to back from 0; the compute stalls at each need until
 * its collective is done, and every stall delays the later needs. Figures
 * worked by hand. */
static void prefetch_model(void) {
    char why[96];
    /* link done at 0.1, 0.3, 0.35, 0.75; needs at 0, 0.2, 0.5, 0.6: stall 0.1 at the first (compute
     * clock +0.1), the second reached at 0.3 = done, the third at 0.6 > 0.35, the fourth at 0.7 < 0.75:
     * 0.05 more. 0.15 of 0.75 s stalls, 0.6 hidden */
    const double need[4] = {0, 0.2, 0.5, 0.6}, secs[4] = {0.1, 0.2, 0.05, 0.4};
    double got = comm_prefetch_hidden_s(need, secs, 4);
    snprintf(why, sizeof why, "hidden %.9g s, want 0.6", got);
    tap_check(&failed, "prefetch_hidden_stalls_carry", near(got, 0.6), why);
    /* every need at 0: nothing hides */
    const double at_once[3] = {0, 0, 0};
    got = comm_prefetch_hidden_s(at_once, secs, 3);
    snprintf(why, sizeof why, "hidden %.9g s, want 0", got);
    tap_check(&failed, "prefetch_hidden_needed_at_once", near(got, 0), why);
    /* needs late enough: all of it hides */
    const double late[2] = {1, 2};
    got = comm_prefetch_hidden_s(late, secs, 2);
    snprintf(why, sizeof why, "hidden %.9g s, want 0.3", got);
    tap_check(&failed, "prefetch_hidden_all", near(got, 0.3), why);
    tap_check(&failed, "prefetch_hidden_none", comm_prefetch_hidden_s(need, secs, 0) == 0.0, "no collective hides something");
}

/* The TP model: each collective hides behind the products noted beside it,
 * up to its own time. Figures worked by hand. */
static void beside_model(void) {
    char why[128];
    /* at 1 ns per FLOP: 0.3 s of link beside 0.5 s of products (all hidden), 0.4 s beside 0.1 s
     * (0.1 hidden), 0.2 s beside nothing: 0.4 of 0.9 s hidden */
    const comm_beside b[3] = {{0.3, 5e8}, {0.4, 1e8}, {0.2, 0}};
    double got = comm_beside_hidden_s(b, 3, 1e-9);
    snprintf(why, sizeof why, "hidden %.9g s, want 0.4", got);
    tap_check(&failed, "beside_hidden_shorter_of_two", near(got, 0.4), why);
    tap_check(&failed, "beside_hidden_none", comm_beside_hidden_s(b, 0, 1e-9) == 0.0, "no collective hides something");

    /* comm_note_beside keeps the modeled seconds of the collective it is given: a modeled group of 4
     * records them, a group of 1 and a group without a link record nothing (nothing to hide) */
    float buf[64] = {0};
    tg_err e;
    comm *groups[3] = {comm_null_create_modeled("tp", 0, 4, comm_link_flat(1e9, 1e-5)),
                       comm_null_create_modeled("tp", 0, 1, comm_link_flat(1e9, 1e-5)), comm_null_create("tp", 0, 4)};
    int kept[3] = {-1, -1, -1};
    double seconds = -1;
    for (int i = 0; i < 3 && groups[i]; i++) {
        comm *c = groups[i];
        for (int k = 0; k < 70; k++) { /* past the first 64 records: the list grows */
            comm_req *r = comm_all_reduce_start(c, buf, 64, TG_F32, REDUCE_SUM, &e);
            comm_note_beside(c, r, 1e6);
            if (comm_wait(r, &e)) break;
        }
        kept[i] = c->n_beside;
        if (i == 0 && c->n_beside > 69) seconds = c->beside[69].seconds;
        comm_beside_clear(c);
        if (c->n_beside != 0) kept[i] = -2;
    }
    const double want = 1e-5 + 2.0 * 3 * 16 * 4 / 1e9; /* latency + all-reduce ring bytes / bandwidth */
    snprintf(why, sizeof why, "records kept %d, %d, %d (want 70, 0, 0); seconds %.9g, want %.9g", kept[0], kept[1],
             kept[2], seconds, want);
    tap_check(&failed, "note_beside_records_modeled", kept[0] == 70 && kept[1] == 0 && kept[2] == 0 && near(seconds, want),
              why);
    for (int i = 0; i < 3; i++) comm_destroy(groups[i]);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_link SCRATCH_DIR [SHIPPED_TABLE...]\n");
        return 2;
    }
    table_times(argv[1]);
    table_errors(argv[1]);
    degree_rows(argv[1]);
    shipped_tables(argc - 2, argv + 2);
    null_comm(argv[1]);
    overlap_model();
    prefetch_model();
    beside_model();
    return failed;
}

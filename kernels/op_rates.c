/* The per-op table's rate columns and the table of ceilings (kernels/op_rates.h). */
#include "kernels/op_rates.h"

#include <math.h>
#include <string.h>

/* Ceilings by GPU name, first match wins (longer names before their
 * prefixes; GH200's row, with no figures, keeps it from matching H200's:
 * its memory differs by model). Products: dense bf16 with fp32
 * accumulation. "measured" figures come from a sitting's committed
 * results; the rest are NVIDIA's data sheets. */
static const struct {
    const char *match;
    double tflops, gbs;
    const char *tflops_source, *gbs_source;
} CEILINGS[] = {
    {"GH200", 0, 0, NULL, NULL},
    {"H200 NVL", 835, 4800, "data sheet", "data sheet"},
    {"H200", 845, 4148,
     "measured: the fastest cuBLASLt product op of results/gpu/2026-11-30_h200/op_times_*.tsv, lmhead_backward at 124M "
     "with kernels.lt_tune=time",
     "measured: build/gpu/bench_copy's median, results/gpu/2026-11-30_h200"},
    {"H100 PCIe", 756, 2000, "data sheet", "data sheet"},
    {"H100 NVL", 835, 3900, "data sheet", "data sheet"},
    {"H100", 989, 3350, "data sheet (SXM)", "data sheet (SXM)"},
    {"A100-SXM4-80GB", 312, 2039, "data sheet", "data sheet"},
};

int op_ceilings_find(const char *device_name, tg_dtype act, op_ceilings *c) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < sizeof CEILINGS / sizeof CEILINGS[0]; i++) {
        if (!strstr(device_name, CEILINGS[i].match)) continue;
        if (CEILINGS[i].gbs <= 0) return 0;
        c->gbs = CEILINGS[i].gbs;
        c->gbs_source = CEILINGS[i].gbs_source;
        /* float32 products do not run on the bf16 tensor cores: the data sheet's fp32 peak */
        c->tflops = act == TG_BF16 ? CEILINGS[i].tflops : ops_peak_tflops(device_name, act);
        c->tflops_source = act == TG_BF16 ? CEILINGS[i].tflops_source : "data sheet (fp32)";
        return 1;
    }
    return 0;
}

/* One row's rate (TFLOP/s or GB/s; < 0 none) and its fraction of the ceiling (< 0 none). */
static void row_rate(const op_rate_row *r, op_unit unit, const op_ceilings *c, double *rate, double *fraction) {
    *rate = *fraction = -1;
    if (unit == OP_UNIT_CALL || r->work < 0 || r->device_ms <= 0) return;
    const double per_s = r->work / (r->device_ms * 1e-3);
    *rate = unit == OP_UNIT_FLOP ? per_s * 1e-12 : per_s * 1e-9;
    const double ceiling = unit == OP_UNIT_FLOP ? c->tflops : unit == OP_UNIT_BYTE ? c->gbs : 0;
    if (ceiling > 0) *fraction = *rate / ceiling;
}

/* The device's name on one line: a control character (a name from a
 * table's shape line may hold one) becomes '?'. */
static void write_name(FILE *f, const char *name) {
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, f);
}

static void write_ceilings(FILE *f, const char *device_name, tg_dtype act, const op_ceilings *c, int known,
                           op_rates_format fmt) {
    fputs(fmt == OP_RATES_TSV ? OP_RATES_CEILING_PREFIX : fmt == OP_RATES_MARKDOWN ? "Ceilings: " : "ceilings: ", f);
    if (!known) {
        fputs("none: device '", f);
        write_name(f, device_name);
        fputs("' is not in the table of ceilings (kernels/op_rates.c), so every ceiling_fraction is NA\n", f);
        return;
    }
    write_name(f, device_name);
    fprintf(f, ", %s: products ", tg_dtype_name(act));
    if (c->tflops > 0) fprintf(f, "%.0f TFLOP/s (%s)", c->tflops, c->tflops_source);
    else fputs("unknown", f);
    fprintf(f, ", device memory %.0f GB/s (%s); ceiling_fraction: FLOP ops against the products', byte ops against the "
               "memory's; the host link's ops (upload, download, download_floats) and per-call ops have none (NA)\n",
            c->gbs, c->gbs_source);
}

static const char *unit_name(op_unit u) { return u == OP_UNIT_FLOP ? "FLOP" : u == OP_UNIT_CALL ? "NA" : "byte"; }
static const char *rate_unit(op_unit u) { return u == OP_UNIT_FLOP ? "TFLOP/s" : "GB/s"; }

static void write_tsv_row(FILE *f, const op_rate_row *r, op_unit u, double rate, double fraction) {
    fprintf(f, "%s\t%.2f\t%.4f\t%.4f\t%.4f\t", r->name, r->calls, r->device_ms, r->host_ms, r->share);
    if (u == OP_UNIT_CALL || r->work < 0) fputs("NA\tNA\t", f);
    else if (r->work == floor(r->work) && r->work < 1e18) fprintf(f, "%.0f\t%s\t", r->work, unit_name(u)); /* exact */
    else fprintf(f, "%.9g\t%s\t", r->work, unit_name(u));
    if (rate < 0) fputs("NA\tNA\t", f);
    else fprintf(f, "%.4g\t%s\t", rate, rate_unit(u));
    if (fraction < 0) fputs("NA\n", f);
    else fprintf(f, "%.4f\n", fraction);
}

static void write_text_row(FILE *f, const op_rate_row *r, op_unit u, double rate, double fraction) {
    char work[48] = "-", speed[48] = "-", of[24] = "-";
    if (u != OP_UNIT_CALL && r->work >= 0) snprintf(work, sizeof work, "%.4g %s", r->work, unit_name(u));
    if (rate >= 0) snprintf(speed, sizeof speed, "%.4g %s", rate, rate_unit(u));
    if (fraction >= 0) snprintf(of, sizeof of, "%.1f%%", 100 * fraction);
    fprintf(f, "%-24s %10.1f %12.3f %12.3f %6.1f%% %18s %16s %10s\n", r->name, r->calls, r->device_ms, r->host_ms,
            100 * r->share, work, speed, of);
}

/* A figure for reading: 4 significant digits, no exponent above 1. */
static void write_figure(FILE *f, double x, const char *unit) {
    if (x >= 1000) fprintf(f, "%.0f %s | ", x, unit);
    else fprintf(f, "%.4g %s | ", x, unit);
}

/* Markdown: work in GFLOP or MB, for reading. */
static void write_markdown_row(FILE *f, const op_rate_row *r, op_unit u, double rate, double fraction) {
    fprintf(f, "| %s | %.2f | %.4f | %.1f%% | ", r->name, r->calls, r->device_ms, 100 * r->share);
    if (u == OP_UNIT_CALL || r->work < 0) fputs("NA | ", f);
    else if (u == OP_UNIT_FLOP) write_figure(f, r->work * 1e-9, "GFLOP");
    else write_figure(f, r->work * 1e-6, "MB");
    if (rate < 0) fputs("NA | ", f);
    else write_figure(f, rate, rate_unit(u));
    if (fraction < 0) fputs("NA |\n", f);
    else fprintf(f, "%.1f%% |\n", 100 * fraction);
}

void op_rates_write(FILE *f, const op_rate_row *rows, int n, const char *device_name, tg_dtype act, op_rates_format fmt) {
    op_ceilings c;
    const int known = op_ceilings_find(device_name, act, &c);
    write_ceilings(f, device_name, act, &c, known, fmt);
    if (fmt == OP_RATES_TSV) fprintf(f, "%s\n", OP_RATES_TSV_HEADER);
    else if (fmt == OP_RATES_TEXT)
        fprintf(f, "%-24s %10s %12s %12s %7s %18s %16s %10s\n", "op", "calls/step", "device ms", "host ms", "share",
                "work/step", "rate", "of ceiling");
    else fputs("\n| op | calls/step | device ms/step | share | work/step | rate | of ceiling |\n|---|---:|---:|---:|---:|---:|---:|\n", f);
    for (int i = 0; i < n; i++) {
        const op_unit u = op_work_unit(rows[i].name, NULL);
        double rate, fraction;
        row_rate(&rows[i], u, &c, &rate, &fraction);
        if (fmt == OP_RATES_TSV) write_tsv_row(f, &rows[i], u, rate, fraction);
        else if (fmt == OP_RATES_TEXT) write_text_row(f, &rows[i], u, rate, fraction);
        else write_markdown_row(f, &rows[i], u, rate, fraction);
    }
}

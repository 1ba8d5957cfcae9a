/* A device-to-device copy's bandwidth: the measured memory ceiling the op
 * table's byte ops are held against (kernels/op_rates.c's table, whose
 * figure is the data sheet's until a sitting measures this). The CUDA
 * backend's own copy (comm_memory.copy: cudaMemcpyAsync on its stream),
 * between two buffers of --mib MiB, each call between two device marks
 * (CUDA events) after --warmup calls; GB/s counts the bytes read and
 * written (2 x the buffer), as the op table's byte model does.
 *
 *   build/gpu/bench_copy [--mib N] [--warmup N] [--runs N]
 *
 * Output: a '#' line naming the device, then "copy_gbps_median\t...",
 * "copy_gbps_best\t..." lines. No CUDA device: exit 2; bad options: 3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "util/err.h"

typedef struct {
    int mib, warmup, runs;
} copy_opts;

static int parse_count(const char *s, int lo, int hi, int *out) {
    char *end;
    const long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

/* 1 when the command line is good (opts filled), else 0 with a message. */
static int parse_opts(int argc, char **argv, copy_opts *o) {
    *o = (copy_opts){.mib = 1024, .warmup = 3, .runs = 20};
    for (int i = 1; i < argc; i += 2) {
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int *field = strcmp(argv[i], "--mib") == 0 ? &o->mib : strcmp(argv[i], "--warmup") == 0 ? &o->warmup
                     : strcmp(argv[i], "--runs") == 0                                             ? &o->runs
                                                                                                  : NULL;
        if (!field || !val) {
            fprintf(stderr, "bench_copy: unknown or incomplete option '%s'\n", argv[i]);
            return 0;
        }
        const int lo = field == &o->warmup ? 0 : 1;
        if (!parse_count(val, lo, field == &o->mib ? 65536 : 100000, field)) {
            fprintf(stderr, "bench_copy: %s '%s': want a whole number from %d\n", argv[i], val, lo);
            return 0;
        }
    }
    return 1;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    copy_opts opts;
    if (!parse_opts(argc, argv, &opts)) {
        fprintf(stderr, "usage: %s [--mib N] [--warmup N] [--runs N]\n", argv[0]);
        return 3;
    }
    tg_err err;
    err.msg[0] = '\0';
    tg_ops *gpu = ops_cuda_create(0, TG_BF16, &err);
    if (!gpu) {
        printf("bench_copy: cannot create the CUDA backend: %s\n", err.msg);
        return 2;
    }
    const size_t bytes = (size_t)opts.mib << 20;
    void *src = gpu->alloc(gpu, bytes, "bench_copy: source"), *dst = gpu->alloc(gpu, bytes, "bench_copy: destination");
    gpu->zero(gpu, src, bytes);
    for (int i = 0; i < opts.warmup; i++) gpu->mem.copy(gpu->mem.ctx, dst, src, bytes);
    double *gbps = tg_malloc((size_t)opts.runs * sizeof *gbps, "bench_copy: rates");
    for (int i = 0; i < opts.runs; i++) {
        gpu->timer_begin(gpu);
        gpu->mem.copy(gpu->mem.ctx, dst, src, bytes);
        gbps[i] = 2.0 * (double)bytes / (gpu->timer_end_ms(gpu) * 1e-3) * 1e-9;
    }
    qsort(gbps, (size_t)opts.runs, sizeof *gbps, cmp_double);
    const int n = opts.runs;
    printf("# bench_copy on %s: %d MiB device to device (cudaMemcpyAsync), %d warm-up calls, then %d timed (device "
           "events); GB/s counts read + write\n",
           gpu->device, opts.mib, opts.warmup, n);
    printf("copy_gbps_median\t%.0f\ncopy_gbps_best\t%.0f\n", n % 2 ? gbps[n / 2] : 0.5 * (gbps[n / 2 - 1] + gbps[n / 2]),
           gbps[n - 1]);
    free(gbps);
    gpu->free(gpu, dst);
    gpu->free(gpu, src);
    ops_destroy(gpu);
    return 0;
}

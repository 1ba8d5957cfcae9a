/* What every build has of the backends: the CPU tables, destruction, and in
 * a build without CUDA (no make GPU=1) the answer that CUDA is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"

/* The two flavours of kernels/cpu/ops_cpu.c (kernels/cpu/act.h). */
const tg_ops *cpu_ops_table(void);
const tg_ops *cpu_bf16_ops_table(void);

const tg_ops *ops_cpu(void) { return cpu_ops_table(); }

static void destroy_copy(tg_ops *o) { free(o); }

tg_ops *ops_cpu_bf16_create(tg_err *e) {
    tg_ops *o = malloc(sizeof *o);
    if (!o) {
        tg_fail(e, "out of memory creating the bf16 CPU backend");
        return NULL;
    }
    *o = *cpu_bf16_ops_table();
    o->destroy = destroy_copy;
    return o;
}

/* From NVIDIA's data sheets: dense (no sparsity) bf16 tensor-core TFLOP/s
 * with fp32 accumulation, and plain fp32 (the fp32 path does not use TF32).
 * First match wins, so longer names come before their prefixes. A10G (AWS)
 * is not on NVIDIA's public sheets: its bf16 tensor rate with fp32
 * accumulation is half the A10's, as on the other GA102 boards without the
 * full-rate datacenter tensor cores (cf. RTX 3090). */
double ops_peak_tflops(const char *device_name, tg_dtype act) {
    static const struct {
        const char *match;
        double bf16, fp32;
    } table[] = {
        {"H100 PCIe", 756, 51}, {"H100 NVL", 835, 60}, {"H100", 989, 67}, {"H200", 989, 67}, {"GH200", 989, 67},
        {"B200", 2250, 80},     {"A100", 312, 19.5},   {"A800", 312, 19.5}, {"L40S", 362, 91.6}, {"L40", 181, 90.5},
        {"L4", 121, 30.3},      {"A10G", 70, 31.2},    {"A10", 125, 31.2},  {"A30", 165, 10.3},  {"RTX 4090", 165, 82.6},
        {"RTX 3090", 71, 35.6}, {"A6000", 155, 38.7},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strstr(device_name, table[i].match)) return act == TG_BF16 ? table[i].bf16 : table[i].fp32;
    return 0.0;
}

void ops_destroy(const tg_ops *o) {
    if (o && o->destroy) o->destroy((tg_ops *)o);
}

#ifndef TG_CUDA
int ops_cuda_compiled(void) { return 0; }

int ops_cuda_device_count(void) { return 0; }

tg_ops *ops_cuda_create(int device, tg_dtype act, tg_err *e) {
    (void)device;
    (void)act;
    tg_fail(e, "this train_gpt was built without CUDA: rebuild with make GPU=1");
    return NULL;
}

int ops_cuda_lt_tune(const tg_ops *o, const char *tune, const char *record, int write, tg_err *e) {
    (void)o, (void)tune, (void)record, (void)write, (void)e;
    return 0; /* no CUDA backend to tune */
}

int ops_cuda_dw_overlap(const tg_ops *o, int on, tg_err *e) {
    (void)o, (void)on, (void)e;
    return 0; /* no CUDA backend: nothing overlaps */
}

int ops_cuda_attention(const tg_ops *o, const char *kernel, int hs, double dropout, tg_err *e) {
    (void)o, (void)hs, (void)dropout;
    if (strcmp(kernel, "mma") == 0 || strcmp(kernel, "auto") == 0) return 0;
    return tg_fail(e, "attention kernel %s: this train_gpt was built without CUDA (rebuild with make GPU=1)", kernel);
}

void ops_cuda_attention_describe(const tg_ops *o, char *out, size_t size) {
    (void)o;
    snprintf(out, size, "no CUDA backend");
}
#endif

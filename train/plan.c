#include "train/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
#include "train/batch.h"
#include "train/optim.h"
#include "parallel/comm.h"

typedef struct layout {
    int tp, dp, mb, zero;
    bool sp;
    recompute_mode rc;
    gpt_budget mem;
    double compute_s, comm_s;
    optim_hidden hidden; /* of comm_s: the modeled overlap with compute (optim_hidden_modeled) */
    double tp_hidden_s;  /* of comm_s: TP collectives beside products (comm_beside_hidden_s) */
    uint64_t bytes[2][COLL_KINDS]; /* sent by rank 0 per step: tp, dp groups */
    bool fits;
} layout;

static const char *RC_NAMES[] = {"none", "selective", "full"};

/* The communication of one step of layout l, from the trainer's own code: a
 * dry step (train/batch.c) over the null backend, whose kernels do nothing
 * and whose memory does not exist, with counting communicators that model
 * each collective over the configured link (comm_null). Fills l->comm_s, of
 * it what the DP buckets hide behind l->compute_s and what the products
 * beside the TP collectives hide at seconds_per_flop (as a projected run
 * models them), and the bytes this rank sends per group and collective
 * kind. */
static int dry_step(const tg_config *v, const gpt_dims *d, layout *l, double seconds_per_flop, tg_err *e) {
    comm_link *link = tg_malloc(sizeof *link, "plan link model");
    if (config_link(v, link, e)) {
        free(link);
        return -1;
    }
    tg_ops *ops = ops_null_create(config_act_dtype(v));
    comm *tp = comm_null_create_modeled("tp", 0, l->tp, *link), *dp = comm_null_create_modeled("dp", 0, l->dp, *link);
    free(link);
    comm_use_memory(tp, &ops->mem);
    comm_use_memory(dp, &ops->mem);
    const int T = v->model.seq_len;
    gpt *g = gpt_create(ops, tp, d, l->mb, T, gpt_param_count(d));
    optim *o = optim_create(ops, g, dp, l->zero, v->parallel.dp_bucket_mb);
    int32_t *window = tg_calloc((size_t)v->train.global_batch * T + 1, sizeof(int32_t), "plan window");
    int32_t *share = ops->alloc(ops, batch_share_len(v, l->dp) * sizeof(int32_t), "plan tokens");
    const batch_io io = {g, o, dp, v, window, share, NULL};
    optim_report rep;
    const int rc = batch_train_step(&io, 1, &rep, e);
    l->comm_s = tp->modeled_seconds + dp->modeled_seconds;
    l->hidden = optim_hidden_modeled(o, l->compute_s / config_grad_accum(v), l->rc == RECOMPUTE_FULL);
    l->tp_hidden_s = comm_beside_hidden_s(tp->beside, tp->n_beside, seconds_per_flop);
    memcpy(l->bytes[0], tp->bytes_sent, sizeof l->bytes[0]);
    memcpy(l->bytes[1], dp->bytes_sent, sizeof l->bytes[1]);
    free(window);
    ops->free(ops, share);
    optim_free(o);
    gpt_free(g);
    comm_destroy(tp);
    comm_destroy(dp);
    ops_destroy(ops);
    return rc;
}

/* FLOPs one device runs in a step of layout l, recomputation included. */
static double step_flops(const tg_config *c, const layout *l, const gpt_dims *d, double full_params) {
    return gpt_executed_flops_per_token(d, full_params) * config_tokens_per_device(c, l->tp, l->dp);
}

static int evaluate(const tg_config *c, const plan_opts *o, layout *l, double peak, tg_err *e) {
    tg_config v = *c; /* the config as this layout would run it */
    v.parallel.tp = l->tp;
    v.parallel.dp = l->dp;
    v.parallel.sp = l->sp;
    v.parallel.zero = l->zero;
    v.train.micro_batch = l->mb;
    snprintf(v.train.recompute, sizeof v.train.recompute, "%s", RC_NAMES[l->rc]);
    gpt_dims d;
    if (gpt_dims_from_config(&d, &v, l->tp, 0, e)) return -1;
    optim_shape_dims(&d, l->dp, l->zero);
    const bool cuda = strcmp(c->device, "cuda") == 0;
    l->mem = optim_budget(&d, l->mb, c->model.seq_len, l->dp, l->zero, config_act_dtype(c),
                          cuda ? OPS_CUDA_LT_WORKSPACE_BYTES + OPS_CUDA_SCRATCH_BYTES : 0);
    batch_budget_share(&l->mem, &v, l->dp);
    l->fits = (double)l->mem.total <= o->device_bytes;
    const double full_params = 12.0 * d.L * (double)d.C * d.C + 13.0 * d.L * d.C + ((double)d.V + d.T) * d.C + 2.0 * d.C;
    const double flops = step_flops(c, l, &d, full_params), seconds_per_flop = 1 / (peak * o->compute_efficiency);
    l->compute_s = flops * seconds_per_flop;
    return dry_step(&v, &d, l, seconds_per_flop, e); /* after compute_s: it models the overlap with it */
}

/* A layout's predicted step: compute and communication, less the overlap. */
static double hidden_s(const layout *l) { return l->hidden.dp_s + l->hidden.gather_s + l->tp_hidden_s; }
static double predicted_s(const layout *l) { return l->compute_s + l->comm_s - hidden_s(l); }

/* Fastest first; among equal predictions, larger micro-batches (kernels run
 * better on them) and then less memory. */
static int by_time(const void *a, const void *b) {
    const layout *x = a, *y = b;
    double tx = predicted_s(x), ty = predicted_s(y);
    if (fabs(tx - ty) > 1e-9 * (tx + ty)) return (tx > ty) - (tx < ty);
    if (x->mb != y->mb) return y->mb - x->mb;
    return (x->mem.total > y->mem.total) - (x->mem.total < y->mem.total);
}

/* Every (tp, sp, recompute, micro_batch, zero) the config and device count allow. */
static int enumerate(const tg_config *c, const plan_opts *o, layout **out) {
    int n = 0, cap = 64;
    layout *ls = tg_malloc(sizeof(layout) * (size_t)cap, "plan");
    for (int tp = 1; tp <= o->devices; tp++) {
        if (o->devices % tp || c->model.n_head % tp) continue;
        const int dp = o->devices / tp;
        if (c->train.global_batch % dp) continue;
        for (int sp = 0; sp <= (tp > 1); sp++)
            for (int rc = 0; rc < 3; rc++)
                for (int mb = 1; mb <= c->train.global_batch / dp; mb++) {
                    if ((c->train.global_batch / dp) % mb || (sp && (mb * c->model.seq_len) % tp)) continue;
                    for (int zero = 0; zero <= (dp > 1); zero++) {
                        if (n == cap) {
                            cap *= 2;
                            layout *grown = realloc(ls, sizeof(layout) * (size_t)cap);
                            if (!grown) {
                                tg_err e;
                                tg_fail(&e, "out of memory listing %d layouts", cap);
                                tg_die("train_gpt", &e);
                            }
                            ls = grown;
                        }
                        ls[n++] = (layout){tp, dp, mb, zero, sp, (recompute_mode)rc, {0}, 0, 0, {0, 0}, 0, {{0}}, false};
                    }
                }
    }
    *out = ls;
    return n;
}

/* One layout for --plan-json, with the bytes rank 0 sends per step by
 * group and collective, as a train line of log.jsonl names them. */
static void write_json_line(FILE *json, const layout *l, bool fastest) {
    fprintf(json, "{\"tp\":%d,\"dp\":%d,\"sp\":%s,\"recompute\":\"%s\",\"micro_batch\":%d,\"zero\":%d,\"bytes\":%zu,"
                  "\"fits\":%s,\"step_ms\":%.3f,\"comm_ms\":%.3f,\"dp_hidden_ms_modeled\":%.3f,"
                  "\"zero_gather_hidden_ms_modeled\":%.3f,\"tp_hidden_ms_modeled\":%.3f,\"fastest\":%s",
            l->tp, l->dp, l->sp ? "true" : "false", RC_NAMES[l->rc], l->mb, l->zero, l->mem.total, l->fits ? "true" : "false",
            1e3 * predicted_s(l), 1e3 * l->comm_s, 1e3 * l->hidden.dp_s, 1e3 * l->hidden.gather_s,
            1e3 * l->tp_hidden_s, fastest ? "true" : "false");
    static const char *const group[2] = {"tp", "dp"};
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < COLL_KINDS; k++)
            fprintf(json, ",\"%s_%s_bytes\":%llu", group[g], comm_kind_name((coll_kind)k), (unsigned long long)l->bytes[g][k]);
    fprintf(json, "}\n");
}

int plan_print(const tg_config *c, const plan_opts *o, FILE *out, FILE *json, tg_err *e) {
    const double peak = (c->device_peak_tflops > 0 ? c->device_peak_tflops : 989.0) * 1e12;
    layout *ls;
    int n = enumerate(c, o, &ls);
    for (int i = 0; i < n; i++)
        if (evaluate(c, o, &ls[i], peak, e)) {
            free(ls);
            return -1;
        }
    qsort(ls, (size_t)n, sizeof(layout), by_time);
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    fprintf(out, "plan: %d layers x %d wide, %d heads, context %d, global batch %d, on %d devices of %.1f GiB\n",
            c->model.n_layer, c->model.n_embd, c->model.n_head, c->model.seq_len, c->train.global_batch, o->devices,
            o->device_bytes / GiB);
    fprintf(out, "predicted time: model FLOPs at %.0f%% of %.0f TFLOP/s (device_peak_tflops%s) + communication ",
            100 * o->compute_efficiency, peak / 1e12, c->device_peak_tflops > 0 ? "" : " unset: H100/H200 dense bf16");
    if (c->interconnect.table[0])
        fprintf(out, "from the nccl-tests table %s (interconnect.table)", c->interconnect.table);
    else
        fprintf(out, "at %g GB/s and %g us per collective (interconnect.*)", c->interconnect.bus_gbps, c->interconnect.latency_us);
    fprintf(out, ",\nless what is modeled as hidden ('hidden ms'): TP collectives beside the products that need none of"
                 " their result");
    if (c->parallel.dp_bucket_mb > 0)
        fprintf(out, ", DP buckets behind the backward pass (and ZeRO's gather behind the next forward)\n");
    else
        fprintf(out, "; no DP overlap (parallel.dp_bucket_mb 0)\n");
    fprintf(out, "%4s %4s %4s %-9s %4s %4s %12s %12s %5s %10s %10s %10s\n", "tp", "dp", "sp", "recompute", "mb", "zero",
            "GiB/device", "bytes", "fits", "step ms", "comm ms", "hidden ms");
    int best = -1;
    for (int i = 0; i < n; i++) {
        const layout *l = &ls[i];
        if (best < 0 && l->fits) best = i;
        fprintf(out, "%4d %4d %4s %-9s %4d %4d %12.2f %12zu %5s %10.1f %10.1f %10.1f%s\n", l->tp, l->dp,
                l->sp ? "on" : "off", RC_NAMES[l->rc], l->mb, l->zero, l->mem.total / GiB, l->mem.total,
                l->fits ? "yes" : "no", 1e3 * predicted_s(l), 1e3 * l->comm_s, 1e3 * hidden_s(l),
                best == i ? "  <- fastest that fits" : "");
        if (json) write_json_line(json, l, best == i);
    }
    if (n == 0) fprintf(out, "no layout: %d devices allow no tp dividing n_head (%d) with dp dividing global_batch (%d)\n",
                        o->devices, c->model.n_head, c->train.global_batch);
    else if (best < 0) fprintf(out, "no layout fits in %.1f GiB per device\n", o->device_bytes / GiB);
    free(ls);
    return 0;
}

int plan_main(const tg_config *c, const plan_opts *o, const char *json_path) {
    tg_err e;
    FILE *json = NULL;
    if (json_path && !(json = fopen(json_path, "w"))) {
        fprintf(stderr, "train_gpt: error: %s: cannot create the plan's JSON file\n", json_path);
        return 1;
    }
    const int rc = plan_print(c, o, stdout, json, &e);
    if (json && fclose(json) != 0 && rc == 0) {
        fprintf(stderr, "train_gpt: error: %s: cannot write the plan's JSON file\n", json_path);
        return 1;
    }
    if (rc) fprintf(stderr, "train_gpt: error: %s\n", e.msg);
    return rc ? 1 : 0;
}

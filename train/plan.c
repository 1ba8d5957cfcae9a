#include "train/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
#include "train/batch.h"
#include "train/op_table.h"
#include "train/optim.h"
#include "train/plan_time.h"
#include "parallel/comm.h"
#include "util/json.h"

/* How a layout's compute is timed: not at all (no figure is better than a
 * wrong one), FLOPs at an assumed rate (labelled as such), or the per-op
 * model fitted to a measured op table (train/plan_time.h). */
typedef enum { TIME_NONE, TIME_FLOPS, TIME_CALIBRATED } time_kind;
static const char *const TIME_NAMES[] = {"none", "flops_assumed", "calibrated"};

typedef struct time_model {
    time_kind kind;
    double seconds_per_flop; /* the products': assumed, or calibrated */
    const char *path;        /* --calibrate */
    op_table *table;
    plan_calib *calib;
    char notes[2048]; /* what the fit noticed, for the header */
} time_model;

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
    /* One transformer layer of this rank's shard, one micro-batch, compute
     * only: forward, backward (without recomputation), what the recompute
     * mode reruns (NAN without a time model). */
    double layer_fwd_s, layer_bwd_s, layer_rc_s;
    double layer_fwd_comm_s, layer_bwd_comm_s; /* its TP collectives over the link, before any overlap */
} layout;

static const char *RC_NAMES[] = {"none", "selective", "full"};

/* One step of layout l (config v, dims d) over ops, the null backend or a
 * meter (train/plan_time.h): a dry step through the trainer's own step code
 * (train/batch.c), whose kernels do nothing and whose memory does not
 * exist, with counting communicators that model each collective over the
 * configured link (comm_null). Fills l->comm_s and the bytes this rank
 * sends per group and collective kind; with a time model (tm not NULL and
 * not TIME_NONE) also what the DP buckets hide behind l->compute_s (a
 * meter's priced calls when calibrated) and what the products beside the TP
 * collectives hide, as a projected run models them. */
static int dry_step(const tg_config *v, const gpt_dims *d, const tg_ops *ops, bool metered, const time_model *tm, layout *l,
                    tg_err *e) {
    comm_link *link = tg_malloc(2 * sizeof *link, "plan link model"); /* the TP group's, a DP group's */
    if (config_group_link(v, false, l->tp, l->dp, &link[0], e) || config_group_link(v, true, l->tp, l->dp, &link[1], e)) {
        free(link);
        return -1;
    }
    comm *tp = comm_null_create_modeled("tp", 0, l->tp, link[0]), *dp = comm_null_create_modeled("dp", 0, l->dp, link[1]);
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
    if (metered) plan_meter_reset(ops); /* the step alone, not the model's set-up */
    const int rc = batch_train_step(&io, 1, &rep, e);
    l->comm_s = tp->modeled_seconds + dp->modeled_seconds;
    if (metered && tm) l->compute_s = plan_meter_seconds(ops);
    if (tm && tm->kind != TIME_NONE) {
        l->hidden = optim_hidden_modeled(o, l->compute_s / config_grad_accum(v), l->rc == RECOMPUTE_FULL);
        l->tp_hidden_s = comm_beside_hidden_s(tp->beside, tp->n_beside, tm->seconds_per_flop);
    }
    memcpy(l->bytes[0], tp->bytes_sent, sizeof l->bytes[0]);
    memcpy(l->bytes[1], dp->bytes_sent, sizeof l->bytes[1]);
    free(window);
    ops->free(ops, share);
    optim_free(o);
    gpt_free(g);
    comm_destroy(tp);
    comm_destroy(dp);
    return rc;
}

/* FLOPs one device runs in a step of layout l, recomputation included. */
static double step_flops(const tg_config *c, const layout *l, const gpt_dims *d, double full_params) {
    return gpt_executed_flops_per_token(d, full_params) * config_tokens_per_device(c, l->tp, l->dp);
}

/* Modeled seconds of one forward and one backward pass: compute (a
 * meter's priced calls) and the TP collectives over the link. */
typedef struct pass_times {
    double fwd, bwd, fwd_comm, bwd_comm;
} pass_times;

/* A forward and a backward pass of one micro-batch through a model of
 * config c with L layers over meter. */
static int layer_pass(const tg_config *c, int L, const char *recompute, tg_ops *meter, pass_times *p, tg_err *e) {
    tg_config v = *c;
    v.model.n_layer = L;
    snprintf(v.train.recompute, sizeof v.train.recompute, "%s", recompute);
    gpt_dims d;
    comm_link *link = tg_malloc(sizeof *link, "plan link model");
    if (gpt_dims_from_config(&d, &v, v.parallel.tp, 0, e) ||
        config_group_link(&v, false, v.parallel.tp, v.parallel.dp > 0 ? v.parallel.dp : 1, link, e)) {
        free(link);
        return -1;
    }
    comm *tp = comm_null_create_modeled("tp", 0, v.parallel.tp, *link);
    free(link);
    comm_use_memory(tp, &meter->mem);
    const int B = v.train.micro_batch, T = v.model.seq_len;
    gpt *g = gpt_create(meter, tp, &d, B, T, gpt_param_count(&d));
    int32_t *tokens = tg_calloc((size_t)B * T, sizeof(int32_t), "plan tokens");
    plan_meter_reset(meter);
    const double comm0 = tp->modeled_seconds;
    int rc = gpt_forward(g, tokens, tokens, B, T, 1.0f, e);
    p->fwd = plan_meter_seconds(meter);
    p->fwd_comm = tp->modeled_seconds - comm0;
    if (rc == 0) rc = gpt_backward(g, NULL, false, e); /* a step's first micro-batch: it writes the gradients */
    p->bwd = plan_meter_seconds(meter) - p->fwd;
    p->bwd_comm = tp->modeled_seconds - comm0 - p->fwd_comm;
    free(tokens);
    gpt_free(g);
    comm_destroy(tp);
    return rc;
}

/* One layer's figures at the assumed FLOP rate: forward 24 C^2 + 4 T C
 * FLOPs a token (the attention core as 6N + 12 L C T counts it), backward
 * twice that, full recompute what gpt_executed_flops_per_token adds;
 * selective reruns no product, so no FLOPs. */
static void layer_times_flops(const tg_config *v, const time_model *tm, layout *l) {
    const double C = v->model.n_embd, T = v->model.seq_len, tokens = (double)l->mb * T / l->tp;
    l->layer_fwd_s = tokens * (24 * C * C + 4 * T * C) * tm->seconds_per_flop;
    l->layer_bwd_s = 2 * l->layer_fwd_s;
    l->layer_rc_s = l->rc == RECOMPUTE_FULL ? tokens * (16 * C * C + 4 * T * C) * tm->seconds_per_flop : 0;
}

/* One layer's figures: the difference between models of 2 and 1 layers
 * (everything else in them is the same calls), backward with the layout's
 * recompute mode and without. Compute from the calibration (else FLOPs at
 * the assumed rate); the TP collectives over the modeled link. */
static int layer_times(const tg_config *v, const time_model *tm, layout *l, tg_err *e) {
    tg_ops *meter = plan_meter_create(config_act_dtype(v), tm->kind == TIME_CALIBRATED ? tm->calib : NULL);
    pass_times a1 = {0}, a2 = {0}, n1, n2;
    int rc = layer_pass(v, 1, RC_NAMES[l->rc], meter, &a1, e) || layer_pass(v, 2, RC_NAMES[l->rc], meter, &a2, e);
    n1 = a1, n2 = a2;
    if (rc == 0 && l->rc != RECOMPUTE_NONE)
        rc = layer_pass(v, 1, "none", meter, &n1, e) || layer_pass(v, 2, "none", meter, &n2, e);
    ops_destroy(meter);
    l->layer_fwd_comm_s = a2.fwd_comm - a1.fwd_comm;
    l->layer_bwd_comm_s = a2.bwd_comm - a1.bwd_comm; /* recomputation's collectives included */
    if (tm->kind == TIME_FLOPS) {
        layer_times_flops(v, tm, l);
    } else {
        l->layer_fwd_s = a2.fwd - a1.fwd;
        l->layer_bwd_s = n2.bwd - n1.bwd;
        l->layer_rc_s = (a2.bwd - a1.bwd) - (n2.bwd - n1.bwd);
    }
    return rc ? -1 : 0;
}

static int evaluate(const tg_config *c, const plan_opts *o, const time_model *tm, layout *l, tg_err *e) {
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
    l->compute_s = NAN;
    if (tm->kind == TIME_FLOPS) {
        const double full_params = 12.0 * d.L * (double)d.C * d.C + 13.0 * d.L * d.C + ((double)d.V + d.T) * d.C + 2.0 * d.C;
        l->compute_s = step_flops(c, l, &d, full_params) * tm->seconds_per_flop;
    }
    if (tm->kind != TIME_NONE && layer_times(&v, tm, l, e)) return -1;
    tg_ops *ops = tm->kind == TIME_CALIBRATED ? plan_meter_create(config_act_dtype(&v), tm->calib)
                                              : ops_null_create(config_act_dtype(&v));
    const int rc = dry_step(&v, &d, ops, tm->kind == TIME_CALIBRATED, tm, l, e); /* after compute_s (flops): it models the overlap with it */
    ops_destroy(ops);
    return rc;
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
                        ls[n++] = (layout){tp, dp, mb, zero, sp, (recompute_mode)rc, {0}, 0, 0, {0, 0}, 0, {{0}}, false, NAN, NAN, NAN, NAN, NAN};
                    }
                }
    }
    *out = ls;
    return n;
}

/* ,"key":ms with 3 decimals, or null when s is not a number. */
static void json_ms(FILE *f, const char *key, double s) {
    if (isnan(s)) fprintf(f, ",\"%s\":null", key);
    else fprintf(f, ",\"%s\":%.3f", key, 1e3 * s);
}

/* One layout for --plan-json, with the bytes rank 0 sends per step by
 * group and collective, as a train line of log.jsonl names them. */
static void write_json_line(FILE *json, const tg_config *c, const layout *l, const time_model *tm, bool fastest) {
    const bool timed = tm->kind != TIME_NONE;
    fprintf(json, "{\"tp\":%d,\"dp\":%d,\"sp\":%s,\"recompute\":\"%s\",\"micro_batch\":%d,\"zero\":%d,\"bytes\":%zu,"
                  "\"fits\":%s,\"time_model\":\"%s\",\"calibration\":",
            l->tp, l->dp, l->sp ? "true" : "false", RC_NAMES[l->rc], l->mb, l->zero, l->mem.total, l->fits ? "true" : "false",
            TIME_NAMES[tm->kind]);
    char *path = tm->path ? json_quote(tm->path) : NULL;
    fprintf(json, "%s", path ? path : "null");
    free(path);
    json_ms(json, "step_ms", timed ? predicted_s(l) : NAN);
    json_ms(json, "compute_ms", l->compute_s);
    json_ms(json, "comm_ms", l->comm_s);
    json_ms(json, "dp_hidden_ms_modeled", timed ? l->hidden.dp_s : NAN);
    json_ms(json, "zero_gather_hidden_ms_modeled", timed ? l->hidden.gather_s : NAN);
    json_ms(json, "tp_hidden_ms_modeled", timed ? l->tp_hidden_s : NAN);
    json_ms(json, "layer_forward_ms", l->layer_fwd_s);
    json_ms(json, "layer_backward_ms", l->layer_bwd_s);
    json_ms(json, "layer_recompute_ms", l->layer_rc_s);
    json_ms(json, "layer_forward_comm_ms", l->layer_fwd_comm_s);
    json_ms(json, "layer_backward_comm_ms", l->layer_bwd_comm_s);
    fprintf(json, ",\"fastest\":%s,\"tp_across_nodes\":%s,\"dp_across_nodes\":%s", fastest ? "true" : "false",
            config_group_crosses_nodes(c, false, l->tp, l->dp) ? "true" : "false",
            config_group_crosses_nodes(c, true, l->tp, l->dp) ? "true" : "false");
    static const char *const group[2] = {"tp", "dp"};
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < COLL_KINDS; k++)
            fprintf(json, ",\"%s_%s_bytes\":%llu", group[g], comm_kind_name((coll_kind)k), (unsigned long long)l->bytes[g][k]);
    fprintf(json, "}\n");
}

/* The layout of the shape line, checked as the trainer would (what
 * config_validate checks of it, but for the device's build). */
static int shape_layout(const op_table *t, layout *l, gpt_dims *d, tg_err *e) {
    const tg_config *s = &t->shape;
    const int tp = s->parallel.tp, dp = s->parallel.dp > 0 ? s->parallel.dp : 1, B = s->train.micro_batch;
    if (s->model.n_embd % s->model.n_head || s->model.n_head % tp || s->train.global_batch % (B * dp) ||
        (s->parallel.sp && (long long)B * s->model.seq_len % tp))
        return tg_fail(e, "%s:%d: shape: no layout the trainer runs: n_embd %d, n_head %d, tp %d, dp %d, micro_batch %d, "
                          "global_batch %d, sp %s", t->path, t->shape_line, s->model.n_embd, s->model.n_head, tp, dp, B,
                       s->train.global_batch, s->parallel.sp ? "on" : "off");
    if (gpt_dims_from_config(d, s, tp, 0, e)) return tg_wrap(e, "%s:%d: shape: ", t->path, t->shape_line);
    *l = (layout){tp, dp, B, s->parallel.zero, s->parallel.sp, d->recompute, {0}, 0, 0, {0, 0}, 0, {{0}}, false, NAN, NAN, NAN, NAN, NAN};
    optim_shape_dims(d, dp, s->parallel.zero);
    return 0;
}

tg_ops *plan_meter_at_table_shape(const op_table *t, tg_err *e) {
    layout l;
    gpt_dims d;
    if (shape_layout(t, &l, &d, e)) return NULL;
    tg_ops *counted = plan_meter_create(config_act_dtype(&t->shape), NULL);
    if (dry_step(&t->shape, &d, counted, true, NULL, &l, e)) {
        ops_destroy(counted);
        return NULL;
    }
    return counted;
}

/* Fits the time model to the op table at path: a dry step at the shape its
 * shape line names, over a counting meter, gives each op's work. */
static int plan_calibrate(const char *path, time_model *tm, tg_err *e) {
    tm->path = path;
    tm->table = tg_malloc(sizeof *tm->table, "op table");
    if (op_table_read(path, tm->table, e)) return -1;
    const op_table *t = tm->table;
    if (!t->has_shape)
        return tg_fail(e, "%s: no shape line ('%s{...}' before the header) naming the model, batch, layout and precision "
                          "the table was measured at: a run with out.op_times=true writes it; add it to an older table "
                          "from that run's command", path, OP_TABLE_SHAPE_PREFIX);
    tg_ops *counted = plan_meter_at_table_shape(t, e);
    if (!counted) return -1;
    tm->calib = plan_calib_fit(t, counted, tm->notes, sizeof tm->notes, e);
    ops_destroy(counted);
    if (!tm->calib) return -1;
    tm->kind = TIME_CALIBRATED;
    tm->seconds_per_flop = plan_calib_seconds_per_flop(tm->calib);
    return 0;
}

/* The time model of c: --calibrate's table fitted, else FLOPs at an
 * assumed rate on CUDA, else none. */
static int time_model_init(const tg_config *c, const plan_opts *o, time_model *tm, tg_err *e) {
    memset(tm, 0, sizeof *tm);
    if (o->calibrate) return plan_calibrate(o->calibrate, tm, e);
    if (strcmp(c->device, "cuda") != 0) return 0;
    tm->kind = TIME_FLOPS;
    tm->seconds_per_flop = 1 / ((c->device_peak_tflops > 0 ? c->device_peak_tflops : 989.0) * 1e12 * o->compute_efficiency);
    return 0;
}

static void time_model_free(time_model *tm) {
    plan_calib_free(tm->calib);
    free(tm->table);
}

static void print_time_model(const tg_config *c, const plan_opts *o, const time_model *tm, FILE *out) {
    if (tm->kind == TIME_NONE) {
        fprintf(out, "predicted time: none: device %s has no time model (give --calibrate OP_TABLE, a table written with "
                     "out.op_times=true, to price the layouts); communication ", c->device);
    } else if (tm->kind == TIME_FLOPS) {
        fprintf(out, "predicted time, assumed (no --calibrate): model FLOPs at %.0f%% of %.0f TFLOP/s (device_peak_tflops%s) "
                     "+ communication ", 100 * o->compute_efficiency, 1 / (tm->seconds_per_flop * o->compute_efficiency * 1e12),
                c->device_peak_tflops > 0 ? "" : " unset: H100/H200 dense bf16");
    } else {
        const tg_config *s = &tm->table->shape;
        fprintf(out, "predicted time: calibrated on %s (%s, %s; measured at %d layers x %d, micro-batch %d, global batch %d, "
                     "tp %d, dp %d, %s, recompute %s): each kernel call priced by its work (FLOPs or bytes) at the rate the "
                     "table measured for its op, plus %.1f us a call (the table's cheapest); products at %.3g TFLOP/s\n"
                     "+ communication ", tm->path, tm->table->device_name[0] ? tm->table->device_name : "device not named",
                s->device, s->model.n_layer, s->model.n_embd, s->train.micro_batch, s->train.global_batch, s->parallel.tp,
                s->parallel.dp, s->train.precision, s->train.recompute, 1e6 * plan_calib_launch_s(tm->calib),
                1e-12 / tm->seconds_per_flop);
    }
    if (c->interconnect.table[0])
        fprintf(out, "from the nccl-tests table %s (interconnect.table)", c->interconnect.table);
    else
        fprintf(out, "at %g GB/s and %g us per collective (interconnect.*)", c->interconnect.bus_gbps, c->interconnect.latency_us);
    if (c->interconnect.node_gpus > 0)
        fprintf(out, "; a group with ranks on more than one node of %d (interconnect.node_gpus) at %g GB/s a node, shared by the "
                     "groups that cross at once (at most interconnect.bus_gbps), and %g us per collective",
                c->interconnect.node_gpus, c->interconnect.node_gbps, c->interconnect.node_latency_us);
    if (tm->kind == TIME_NONE) {
        fprintf(out, "\n");
        return;
    }
    fprintf(out, ",\nless what is modeled as hidden ('hidden ms'): TP collectives beside the products that need none of"
                 " their result");
    if (c->parallel.dp_bucket_mb > 0)
        fprintf(out, ", DP buckets behind the backward pass (and ZeRO's gather behind the next forward)\n");
    else
        fprintf(out, "; no DP overlap (parallel.dp_bucket_mb 0)\n");
    if (tm->notes[0]) fprintf(out, "calibration notes: %s\n", tm->notes);
    const tg_config *s = tm->kind == TIME_CALIBRATED ? &tm->table->shape : NULL;
    if (s && (config_act_dtype(s) != config_act_dtype(c) || strcmp(s->device, c->device) != 0))
        fprintf(out, "note: the table ran %s on %s, this config runs %s on %s: its kernels are priced at the table's rates\n",
                tg_dtype_name(config_act_dtype(s)), s->device, tg_dtype_name(config_act_dtype(c)), c->device);
}

/* A figure in ms for the text table, or "-" without one. */
static const char *ms_text(double s, char *buf, size_t n) {
    if (isnan(s)) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.1f", 1e3 * s);
    return buf;
}

int plan_print(const tg_config *c, const plan_opts *o, FILE *out, FILE *json, tg_err *e) {
    time_model tm;
    if (time_model_init(c, o, &tm, e)) {
        time_model_free(&tm);
        return -1;
    }
    layout *ls;
    int n = enumerate(c, o, &ls);
    for (int i = 0; i < n; i++)
        if (evaluate(c, o, &tm, &ls[i], e)) {
            free(ls);
            time_model_free(&tm);
            return -1;
        }
    qsort(ls, (size_t)n, sizeof(layout), by_time);
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    fprintf(out, "plan: %d layers x %d wide, %d heads, context %d, global batch %d, on %d devices of %.1f GiB\n",
            c->model.n_layer, c->model.n_embd, c->model.n_head, c->model.seq_len, c->train.global_batch, o->devices,
            o->device_bytes / GiB);
    print_time_model(c, o, &tm, out);
    fprintf(out, "%4s %4s %4s %-9s %4s %4s %12s %12s %5s %10s %10s %10s %10s\n", "tp", "dp", "sp", "recompute", "mb", "zero",
            "GiB/device", "bytes", "fits", "step ms", "compute ms", "comm ms", "hidden ms");
    const bool timed = tm.kind != TIME_NONE;
    int best = -1;
    for (int i = 0; i < n; i++) {
        const layout *l = &ls[i];
        if (timed && best < 0 && l->fits) best = i;
        char step[32], compute[32], hidden[32];
        fprintf(out, "%4d %4d %4s %-9s %4d %4d %12.2f %12zu %5s %10s %10s %10.1f %10s%s%s\n", l->tp, l->dp,
                l->sp ? "on" : "off", RC_NAMES[l->rc], l->mb, l->zero, l->mem.total / GiB, l->mem.total,
                l->fits ? "yes" : "no", ms_text(timed ? predicted_s(l) : NAN, step, sizeof step),
                ms_text(l->compute_s, compute, sizeof compute), 1e3 * l->comm_s,
                ms_text(timed ? hidden_s(l) : NAN, hidden, sizeof hidden), best == i ? "  <- fastest that fits" : "",
                config_group_crosses_nodes(c, false, l->tp, l->dp) ? "  (TP across nodes)" : "");
        if (json) write_json_line(json, c, l, &tm, best == i);
    }
    if (n == 0) fprintf(out, "no layout: %d devices allow no tp dividing n_head (%d) with dp dividing global_batch (%d)\n",
                        o->devices, c->model.n_head, c->train.global_batch);
    else if (!timed) fprintf(out, "no time model: the layouts are listed by micro-batch, then memory, none marked fastest\n");
    else if (best < 0) fprintf(out, "no layout fits in %.1f GiB per device\n", o->device_bytes / GiB);
    free(ls);
    time_model_free(&tm);
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

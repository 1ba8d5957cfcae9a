/* What a run tells: the progress line on stdout and rank 0's log.jsonl
 * (train, eval, budget, resume and peak-memory lines). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "kernels/timed.h"
#include "train/op_table.h"
#include "train/run.h"
#include "util/fs.h"
#include "train/runlog.h"


void report_budget(const gpt_budget *b) {
    const double MiB = 1024.0 * 1024.0;
    printf("memory per rank (MiB): params %.1f | grads %.1f | AdamW state %.1f | activations %.1f (attention %.1f)"
           " | logits %.1f | backward scratch %.1f | backend workspace %.1f | tokens %.1f | total %.1f\n",
           b->params / MiB, b->grads / MiB, b->optim / MiB, b->acts_kept / MiB, b->acts_attention / MiB, b->logits / MiB,
           b->scratch / MiB, b->workspace / MiB, b->tokens / MiB, b->total / MiB);
}

/* Policy: a log line that cannot be written ends the run (non-zero, the
 * step named): a log with a silent gap is worse than a stop, and a resume
 * from the newest checkpoint continues it. jsonl_close has cut the partial
 * line back, so the file stays whole lines. */
void report_log_close(const run *r, jsonl_line *l, int step) {
    tg_err e;
    if (jsonl_close(l, &e) == 0) return;
    tg_wrap(&e, "%s/log.jsonl: step %d", r->cfg.out.dir, step);
    tg_die(PROG, &e);
}

/* Policy as for log.jsonl: output that cannot be written (a full disk under
 * rank R's out.dir/logs/rank_R.out, a closed pipe, /dev/full) ends the run,
 * naming what failed. stdout keeps its error flag, so a failure in an
 * earlier line (the banner) is caught at the next check. */
void report_check_stdout(const run *r, const char *what, int step) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return;
    const int err = errno;
    char where[CFG_PATH_MAX + 48];
    if (r->rank != 0 && r->purpose == RUN_TRAIN) snprintf(where, sizeof where, "%s/logs/rank_%d.out", r->cfg.out.dir, r->rank);
    else snprintf(where, sizeof where, "stdout");
    tg_err e;
    tg_fail(&e, "%s: cannot write %s at step %d: %s", where, what, step, err ? strerror(err) : "write error");
    tg_die(PROG, &e);
}

/* Rank 0's log.jsonl: after a resume, the lines the interrupted run wrote
 * past its checkpoint go (so every step appears once), and one line marks
 * the resume; then the budget line of this start. */
void report_open_log(run *r) {
    const tg_config *c = &r->cfg;
    char path[CFG_PATH_MAX + 16];
    tg_err e;
    snprintf(path, sizeof path, "%s/log.jsonl", c->out.dir);
    if (r->resumed_step >= 0 && runlog_truncate_after(path, r->resumed_step, &e)) tg_die(PROG, &e);
    r->log = fopen(path, "a");
    if (!r->log) {
        tg_fail(&e, "%s: cannot open the log for appending", path);
        tg_die(PROG, &e);
    }
    jsonl_line l;
    if (r->resumed_step >= 0) {
        l = jsonl_open(r->log);
        jsonl_int(&l, "step", r->resumed_step);
        jsonl_bool(&l, "resumed", true);
        report_log_close(r, &l, r->resumed_step);
    }
    const gpt_budget *b = &r->budget;
    char budget[512];
    snprintf(budget, sizeof budget, "{\"params\":%zu,\"grads\":%zu,\"optim\":%zu,\"activations\":%zu,\"attention\":%zu,"
             "\"logits\":%zu,\"scratch\":%zu,\"tokens\":%zu,\"total\":%zu}", b->params, b->grads, b->optim, b->acts_kept,
             b->acts_attention, b->logits, b->scratch, b->tokens, b->total);
    l = jsonl_open(r->log);
    jsonl_int(&l, "step", r->state.step);
    jsonl_raw(&l, "budget_bytes_per_rank", budget);
    jsonl_uint(&l, "allocated_bytes", gpt_allocated_bytes(r->model) + optim_allocated_bytes(r->opt) + b->tokens);
    jsonl_int(&l, "tp", r->tp->size);
    jsonl_int(&l, "dp", r->dp->size);
    report_log_close(r, &l, r->state.step);
}

/* Seconds of communication so far: measured inside the collectives of a
 * real run, modeled for a projected one. */
double report_comm_seconds(const run *r) {
    if (r->cfg.parallel.project) return r->tp->modeled_seconds + r->dp->modeled_seconds;
    return r->tp->seconds + r->dp->seconds;
}

/* Bytes this rank sent during the step, per group and collective kind. */
static void write_comm_bytes(const run *r, jsonl_line *l) {
    const comm *groups[2] = {r->tp, r->dp};
    char key[64];
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < COLL_KINDS; k++) {
            snprintf(key, sizeof key, "%s_%s_bytes", groups[g]->name, comm_kind_name((coll_kind)k));
            jsonl_uint(l, key, (unsigned long long)(groups[g]->bytes_sent[k] - r->bytes_at_step_start[g][k]));
        }
}

/* This rank's peak memory so far: the device's, measured by the backend,
 * or the process's peak resident set on the CPU. */
static size_t mem_peak_bytes(const run *r) {
    size_t device = r->ops->mem_peak(r->ops);
    if (device > 0) return device;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (size_t)ru.ru_maxrss * 1024; /* ru_maxrss is in KiB */
}

/* Projected runs: the modeled communication that a real group hides
 * behind compute, in ms; zeros for real runs. dp and gather: the DP buckets'
 * reduction behind the backward pass and ZeRO's gather behind the next
 * forward (optim_hidden_modeled); tp: TP collectives beside the products
 * that run while they are in flight (comm_note_beside), each product taking
 * its share of the step's executed FLOPs of the measured compute time. */
typedef struct hidden_ms {
    double dp, gather, tp;
} hidden_ms;

static hidden_ms projected_hidden_ms(const run *r, double compute_ms) {
    const tg_config *c = &r->cfg;
    hidden_ms h = {0, 0, 0};
    if (!c->parallel.project) return h;
    if (r->opt) {
        const optim_hidden o = optim_hidden_modeled(r->opt, compute_ms / 1e3 / config_grad_accum(c),
                                                    strcmp(c->train.recompute, "full") == 0);
        h.dp = o.dp_s * 1e3;
        h.gather = o.gather_s * 1e3;
    }
    const double step_flops = r->executed_flops_per_token * config_tokens_per_device(c, r->tp->size, r->dp->size);
    if (step_flops > 0) h.tp = 1e3 * comm_beside_hidden_s(r->tp->beside, r->tp->n_beside, compute_ms / 1e3 / step_flops);
    return h;
}

/* The progress line's account of the communication: its ms and, in a
 * projected run, what of it the models hide (labelled: no measurement). */
static void describe_comm(char *out, size_t cap, double comm_ms, hidden_ms h) {
    const struct {
        double ms;
        const char *where;
    } part[3] = {{h.tp, "beside the TP products"}, {h.dp, "behind the backward pass"}, {h.gather, "behind the forward pass"}};
    int n = 0, at = snprintf(out, cap, " (comm %.1f", comm_ms);
    for (int i = 0; i < 3; i++) n += part[i].ms > 0;
    for (int i = 0, k = 0; i < 3; i++) {
        if (!(part[i].ms > 0) || at >= (int)cap) continue;
        const char *sep = k == 0 ? ", of which " : k == n - 1 ? " and " : ", ";
        at += snprintf(out + at, cap - at, "%s%.1f %s%s", sep, part[i].ms, k == 0 ? "hidden " : "", part[i].where);
        k++;
    }
    if (at < (int)cap) snprintf(out + at, cap - at, "%s)", n > 0 ? ": modeled" : "");
}

/* The train line of log.jsonl; `skipped` marks a step whose update was
 * dropped for a non-finite loss or gradient norm. */
static void write_train_line(run *r, float loss, double lr, double norm, double ms, double comm_ms, hidden_ms hidden,
                             double step_ms, double tps, double mfu, bool skipped) {
    const tg_config *c = &r->cfg;
    const double tokens = (double)c->train.global_batch * c->model.seq_len * r->state.step;
    jsonl_line l = jsonl_open(r->log);
    jsonl_int(&l, "step", r->state.step);
    jsonl_num(&l, "loss", "%.7g", loss);
    jsonl_num(&l, "lr", "%.7g", lr);
    jsonl_num(&l, "grad_norm", "%.7g", norm);
    if (skipped) jsonl_bool(&l, "skipped", true);
    jsonl_num(&l, "ms", "%.3f", ms);
    jsonl_num(&l, "comm_ms", "%.3f", comm_ms);
    jsonl_num(&l, "step_ms", "%.3f", step_ms);
    if (hidden.dp > 0) jsonl_num(&l, "dp_hidden_ms_modeled", "%.3f", hidden.dp);
    if (hidden.gather > 0) jsonl_num(&l, "zero_gather_hidden_ms_modeled", "%.3f", hidden.gather);
    if (hidden.tp > 0) jsonl_num(&l, "tp_hidden_ms_modeled", "%.3f", hidden.tp);
    jsonl_bool(&l, "projected", c->parallel.project);
    jsonl_num(&l, "tok_per_s", "%.1f", tps);
    jsonl_num(&l, "tokens", "%.0f", tokens);
    jsonl_num(&l, "flops_per_token", "%.0f", r->flops_per_token);
    jsonl_num(&l, "mfu", "%.6f", mfu >= 0 ? mfu : NAN);
    jsonl_uint(&l, "mem_peak_bytes", mem_peak_bytes(r));
    write_comm_bytes(r, &l);
    report_log_close(r, &l, r->state.step);
}


void report_train(run *r, float loss, double lr, double norm, double ms, bool skipped) {
    const tg_config *c = &r->cfg;
    const int s = r->state.step;
    const bool projected = c->parallel.project;
    const double comm_ms = (report_comm_seconds(r) - r->comm_s_at_step_start) * 1e3;
    const hidden_ms hidden = projected_hidden_ms(r, ms);
    const double step_ms = projected ? ms + comm_ms - hidden.dp - hidden.gather - hidden.tp : ms;
    /* A step too short for the clock has no rate (JSON has no inf). */
    const double tokens = (double)c->train.global_batch * c->model.seq_len, tps = step_ms > 0 ? tokens / (step_ms / 1e3) : 0;
    const int devices = r->tp->size * r->dp->size;
    const double mfu = r->peak_tflops > 0 && tps > 0 ? r->flops_per_token * tps / (devices * r->peak_tflops * 1e12) : -1;
    if (r->log) write_train_line(r, loss, lr, norm, ms, comm_ms, hidden, step_ms, tps, mfu, skipped);
    if (s % c->out.log_every != 0 && s != c->train.steps && !skipped) return;
    double avg = r->train_ms_total / r->train_steps_timed, eta = avg * (c->train.steps - s) / 1e3;
    char extra[256] = ""; /* communication when there is any, MFU when the peak is known */
    if (devices > 1) describe_comm(extra, sizeof extra, comm_ms, hidden);
    if (mfu >= 0) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " | MFU %.1f%%", 100 * mfu);
    printf("step %*d/%d | loss %.4f | lr %.3e | grad norm %.4f | %.1f ms%s%s | %.0f tok/s | ETA %dm%02ds%s\n",
           (int)log10(c->train.steps) + 1, s, c->train.steps, loss, lr, norm, step_ms, projected ? " projected" : "",
           extra, tps, (int)eta / 60, (int)eta % 60, skipped ? " | SKIPPED: non-finite, update dropped" : "");
    report_check_stdout(r, "the progress line", s);
}


void report_eval(run *r, float val) {
    if (r->log) {
        jsonl_line l = jsonl_open(r->log);
        jsonl_int(&l, "step", r->state.step);
        jsonl_num(&l, "val_loss", "%.7g", val);
        report_log_close(r, &l, r->state.step);
    }
    printf("step %d | val loss %.4f\n", r->state.step, val);
    report_check_stdout(r, "the validation line", r->state.step);
}

/* Every rank's peak resident memory (MiB, global rank order: the TP group
 * gathered, then the DP groups), logged by rank 0. A collective. */
void report_op_times(const run *r) {
    if (!r->timed || r->rank != 0 || ops_timed_steps(r->timed) == 0) return;
    printf("time per step by op, mean over %d steps (out.op_times; device time: CUDA events on a GPU, the wall clock on "
           "the CPU; host time: inside the call):\n",
           ops_timed_steps(r->timed));
    ops_timed_write(r->timed, stdout, false);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) return;
    char *shape = op_table_shape_line(&r->cfg, r->ops->device); /* what --plan --calibrate fits to */
    if (shape) fputs(shape, mem);
    free(shape);
    ops_timed_write(r->timed, mem, true);
    fclose(mem);
    char path[4200];
    snprintf(path, sizeof path, "%s/op_times.tsv", r->cfg.out.dir);
    tg_err e;
    if (fs_write_atomic(path, text, len, &e)) tg_warn(PROG, "%s", e.msg);
    else printf("wrote %s\n", path);
    free(text);
}

void report_peak_memory(run *r) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    float mine = (float)(ru.ru_maxrss / 1024.0); /* ru_maxrss is in KiB */
    const int n = r->cfg.parallel.project ? 1 : r->tp->size * r->dp->size; /* a projection is one process */
    float *tp_peaks = tg_malloc((size_t)r->tp->size * sizeof(float), "peaks");
    float *all = tg_malloc((size_t)r->tp->size * r->dp->size * sizeof(float), "peaks");
    tg_err e;
    if (comm_all_gather(r->tp, tp_peaks, &mine, 1, &e) ||
        comm_all_gather(r->dp, all, tp_peaks, (size_t)r->tp->size, &e))
        tg_die(PROG, &e);
    if (r->log) {
        const size_t cap = (size_t)n * 32 + 2;
        char *list = tg_malloc(cap, "peak memory list");
        size_t len = (size_t)snprintf(list, cap, "[");
        for (int i = 0; i < n; i++) len += (size_t)snprintf(list + len, cap - len, "%s%.1f", i ? "," : "", all[i]);
        snprintf(list + len, cap - len, "]");
        jsonl_line l = jsonl_open(r->log);
        jsonl_int(&l, "step", r->state.step);
        jsonl_raw(&l, "mem_peak_mib_by_rank", list);
        report_log_close(r, &l, r->state.step);
        free(list);
    }
    printf("peak resident memory per rank (MiB):");
    for (int i = 0; i < n; i++) printf(" %.1f", all[i]);
    printf("\n");
    report_check_stdout(r, "the peak memory line", r->state.step);
    free(tp_peaks);
    free(all);
}

/* train_gpt: pretrains a GPT-2 model from token shards.
 *   ./train_gpt --config FILE [--set key.path=value ...]
 *   ./train_gpt --plan | --eval | --sample | --export-llmc FILE --config FILE ...   |   --version   |   --help
 * main parses the command line, picks the mode, builds the run and loops:
 * config -> ranks -> data -> model shard -> train loop (eval, samples,
 * checkpoints, logs) in train/. */
#include <stdio.h>
#include <string.h>

#include "train/args.h"
#include "train/model_files.h"
#include "train/run.h"

int main(int argc, char **argv) {
    /* Lines, not blocks, whatever stdout is (a pipe, Slurm's file): progress
     * appears as it happens and errors (stderr) come after what preceded them. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    run r;
    memset(&r, 0, sizeof r);
    tg_err e;
    args a;
    args_parse(argc, argv, &r.cfg, &a);
    /* The other modes save nothing, so a signal simply ends them. */
    if (a.mode == MODE_PLAN) return plan_main(&r.cfg, &a.plan, a.plan_json);
    if (a.mode == MODE_EVAL) return mode_eval(&r);
    if (a.mode == MODE_SAMPLE) return mode_sample(&r, &a.sample);
    if (a.mode == MODE_HELLASWAG) return mode_hellaswag(&r, a.hellaswag);
    if (a.mode == MODE_EXPORT_LLMC) return model_files_export_llmc(&r.cfg, a.export_llmc);
    /* Training's signal watcher, before any thread exists (parsing starts
     * none): every thread inherits the blocked signals. */
    if (!(r.stop = stop_watch_start(PROG, &e))) tg_die(PROG, &e);
    run_resolve_topology(&r.cfg, &r.topo);
    run_setup(&r);
    const int status = run_train(&r);
    run_teardown(&r);
    return status;
}

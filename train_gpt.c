/* train_gpt: pretrains a GPT-2 model from token shards.
 *   ./train_gpt --config FILE [--set key.path=value ...]
 *   ./train_gpt --plan | --eval | --sample | --export-llmc FILE --config FILE ...   |   --version   |   --help
 * main parses the command line, picks the mode, builds the run and loops:
 * config -> ranks -> data -> model shard -> train loop (eval, samples,
 * checkpoints, logs) in train/. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "train/args.h"
#include "train/model_files.h"
#include "train/run.h"

/* A mode's result that never reached stdout (a full disk, /dev/full, a
 * closed pipe) is a failure, said on stderr. */
static int end_with(int status) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return status;
    fprintf(stderr, "%s: error: stdout: cannot write the output: %s\n", PROG, errno ? strerror(errno) : "write error");
    return status ? status : 1;
}

int main(int argc, char **argv) {
    /* Lines, not blocks, whatever stdout is (a pipe, Slurm's file): progress
     * appears as it happens and errors (stderr) come after what preceded them. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Past the file-size limit (ulimit -f) a write fails with EFBIG and the
     * writer names its file; the default SIGXFSZ would kill without a word. */
    if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR) {
        fprintf(stderr, "%s: error: cannot ignore SIGXFSZ: %s\n", PROG, strerror(errno));
        return 1;
    }
    run r;
    memset(&r, 0, sizeof r);
    tg_err e;
    args a;
    args_parse(argc, argv, &r.cfg, &a);
    /* The other modes save nothing, so a signal simply ends them. */
    if (a.mode == MODE_PLAN) return end_with(plan_main(&r.cfg, &a.plan, a.plan_json));
    if (a.mode == MODE_EVAL) return end_with(mode_eval(&r));
    if (a.mode == MODE_SAMPLE) return end_with(mode_sample(&r, &a.sample));
    if (a.mode == MODE_HELLASWAG) return end_with(mode_hellaswag(&r, a.hellaswag));
    if (a.mode == MODE_EXPORT_LLMC) return end_with(model_files_export_llmc(&r.cfg, a.export_llmc));
    /* Training's signal watcher, before any thread exists (parsing starts
     * none): every thread inherits the blocked signals. */
    if (!(r.stop = stop_watch_start(PROG, &e))) tg_die(PROG, &e);
    run_resolve_topology(&r.cfg, &r.topo);
    run_setup(&r);
    const int status = run_train(&r);
    run_teardown(&r);
    return end_with(status);
}

/* The command line: the mode (train, --plan, --eval, --sample), the config
 * with its --set overrides applied in order, and the modes' options. */
#ifndef TRAIN_ARGS_H
#define TRAIN_ARGS_H

#include "train/config.h"
#include "train/modes.h"
#include "train/plan.h"

typedef enum {
    MODE_TRAIN,
    MODE_PLAN,
    MODE_EVAL,        /* --eval: validation loss of model.init_from or out.dir's newest checkpoint */
    MODE_SAMPLE,      /* --sample: a continuation of --prompt */
    MODE_HELLASWAG,   /* --hellaswag FILE: accuracy on HellaSwag's examples */
    MODE_EXPORT_LLMC, /* --export-llmc FILE: the model as an llm.c gpt2_*.bin */
} run_mode;

typedef struct args {
    run_mode mode;
    plan_opts plan;        /* --devices, --device-gib */
    const char *plan_json; /* --plan-json FILE, or NULL */
    sample_opts sample;    /* --prompt, --max-tokens, --temperature, --top-k, --seed */
    const char *export_llmc; /* --export-llmc FILE, or NULL */
    const char *hellaswag;   /* --hellaswag FILE, or NULL */
} args;

/* Fills cfg (defaults, the --config file, then each --set in order) and a.
 * Answers --help, --version and --peak-tflops and exits 0; exits 2 on a malformed command line and 1 on a
 * bad config, with a message naming the argument, file or key. */
void args_parse(int argc, char **argv, tg_config *cfg, args *a);

#endif

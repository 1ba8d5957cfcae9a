#include "train/args.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "train/model_files.h"
#include "train/op_table_rates.h"
#include "train/run.h"


static void usage(FILE *f) {
    fprintf(f, "usage: %s --config FILE [--set key.path=value ...]\n"
               "       %s --plan --config FILE [--set ...] [--devices N] [--device-gib GIB] [--plan-json FILE]\n"
               "                 [--calibrate OP_TABLE]\n"
               "       %s --eval --config FILE [--set ...]\n"
               "       %s --sample --config FILE [--set ...] [--prompt TEXT] [--max-tokens N] [--temperature T]\n"
               "                 [--top-k K] [--seed S] [--num-samples N]\n"
               "       %s --hellaswag FILE --config FILE [--set ...]   (accuracy on HellaSwag's JSONL examples)\n"
               "       %s --export-llmc FILE --config FILE [--set ...]   (the model as an llm.c gpt2_*.bin)\n"
               "       %s --version   (the commit and the backends compiled in)\n"
               "       %s --peak-tflops \"DEVICE NAME\" [bf16|fp32]   (dense peak TFLOP/s; 0: unknown)\n"
               "       %s --op-rates OP_TABLE [tsv|md]   (an op table with its rates re-derived, see below)\n"
               "       %s --help\n\n"
               "Trains GPT-2 on token shards made by ./prepare. Every key below may be set in the JSON\n"
               "config (as {\"section\": {\"key\": value}}) or overridden with --set section.key=value.\n\n"
               "--plan lists the layouts (tp, sp, recompute, micro-batch, zero) the config could run with on N devices\n"
               "(default 8) of GIB GiB each (default 80): memory per device from the trainer's own budget, whether it\n"
               "fits, and a predicted step time; --plan-json also writes one JSON object per layout to FILE. The time is\n"
               "priced op by op from --calibrate OP_TABLE (the op_times.tsv of a run with out.op_times=true); without\n"
               "it a CUDA config's time is FLOPs at an assumed 50%% of peak, and a CPU config has no time model.\n"
               "--op-rates prints OP_TABLE with each op's work per step (FLOPs or bytes, from a dry step at the shape\n"
               "its first line names), rate (TFLOP/s or GB/s) and fraction of the device's ceiling: as a table\n"
               "--calibrate reads (tsv, the default) or as markdown (md).\n\n"
               "--eval prints the validation loss over out.eval_batches batches; --sample prints the prompt (default:\n"
               "<|endoftext|>, a document's start), then its continuation token by token as it is drawn: N tokens\n"
               "(default out.sample_tokens) at temperature T (default 1; 0: always the most likely token) from the K\n"
               "most likely tokens (default 0: all), keyed by seed S (default train.seed: the same text at every\n"
               "layout). --num-samples N prints N samples, each after a line \"---- sample I of N (--seed S_I) ----\":\n"
               "the first uses S itself, the others a seed derived from S and I, which --seed S_I draws again alone.\n"
               "Both use the weights of model.init_from, else of the newest checkpoint in out.dir, else the seed's\n"
               "initial weights; both run at any layout (under scripts/launch.sh as training) and write no file.\n"
               "--hellaswag scores FILE's examples (HellaSwag's JSONL: ctx, endings, label) with the same weights: each\n"
               "ending's loss after its context, the least summed (acc) and averaged over its tokens (acc_norm, as\n"
               "llm.c reports); train.micro_batch / 4 examples a forward pass, data.vocab_dir's tokenizer; writes no file.\n"
               "--export-llmc writes model.init_from (else out.dir's newest checkpoint, else the initial weights) as an\n"
               "llm.c model file (version 3, float32, vocabulary padded with zero rows to model.vocab_multiple); it\n"
               "refuses to replace FILE. model.init_from reads such files (version 3 or 5) as well as checkpoint dirs.\n"
               "Model shape keys (n_layer, n_head, n_embd, vocab_size, seq_len) left out of the config and --set come\n"
               "from the checkpoint the run starts from (its config.json or llm.c header), else the defaults below.\n\n",
            PROG, PROG, PROG, PROG, PROG, PROG, PROG, PROG, PROG, PROG);
    config_print_help(f);
}

/* --peak-tflops NAME [bf16|fp32]: prints the table's dense peak of a GPU
 * (0: not in the table), so that scripts use the trainer's one table. */
static void print_peak_tflops(int argc, char **argv, int i) {
    const char *prec = i + 2 < argc ? argv[i + 2] : "bf16";
    if (i + 1 >= argc || (strcmp(prec, "bf16") != 0 && strcmp(prec, "fp32") != 0) || i + 3 < argc) {
        fprintf(stderr, "%s: error: usage: --peak-tflops \"DEVICE NAME\" [bf16|fp32]\n", PROG);
        exit(2);
    }
    printf("%g\n", ops_peak_tflops(argv[i + 1], strcmp(prec, "fp32") == 0 ? TG_F32 : TG_BF16));
    exit(0);
}

/* --op-rates OP_TABLE [tsv|md]: the table with its rates, then exit. */
static void print_op_rates(int argc, char **argv, int i) {
    const char *format = i + 2 < argc ? argv[i + 2] : "tsv";
    if (i + 1 >= argc || (strcmp(format, "tsv") != 0 && strcmp(format, "md") != 0) || i + 3 < argc) {
        fprintf(stderr, "%s: error: usage: --op-rates OP_TABLE [tsv|md]\n", PROG);
        exit(2);
    }
    exit(op_table_rates_main(argv[i + 1], format));
}

#ifndef TG_COMMIT
#define TG_COMMIT "unknown"
#endif

/* --version: which build this is (the commit, the backends compiled in). */
static void print_version(void) {
    printf("train_gpt %s\nbackends: cpu (float32, bf16 storage emulation)%s\ncommunicators: shm, null (projection)%s\n",
           TG_COMMIT, ops_cuda_compiled() ? ", cuda (bf16, fp32; cuBLASLt)" : "; cuda not compiled in (make GPU=1)",
           ops_cuda_compiled() ? ", nccl" : "");
    exit(0);
}

/* --set takes one argument KEY=VALUE; "--set KEY VALUE" (an easy slip from
 * other launchers) is refused with the spelling to use, before VALUE would be
 * taken for an unknown argument. */
static void check_set_argument(int argc, char **argv, int i) {
    const char *arg = i + 1 < argc ? argv[i + 1] : NULL;
    if (arg && strchr(arg, '=')) return;
    fflush(stdout);
    if (!arg) fprintf(stderr, "%s: error: --set needs KEY=VALUE (e.g. --set train.steps=100)\n", PROG);
    else if (i + 2 < argc && strncmp(argv[i + 2], "--", 2) != 0)
        fprintf(stderr, "%s: error: --set %s %s: write --set %s=%s (one argument, with '=')\n", PROG, arg, argv[i + 2],
                arg, argv[i + 2]);
    else fprintf(stderr, "%s: error: --set %s: write --set %s=VALUE (one argument, with '=')\n", PROG, arg, arg);
    exit(2);
}

/* The mode an option asks for; a second, different one is refused rather
 * than the last silently winning. */
static void choose_mode(args *a, run_mode mode, const char *opt) {
    if (a->mode != MODE_TRAIN && a->mode != mode) {
        fprintf(stderr, "%s: error: %s with another mode: give one of --plan, --eval, --sample, --hellaswag, "
                        "--export-llmc\n", PROG, opt);
        exit(2);
    }
    a->mode = mode;
}

/* --eval, --sample and --sample's options; returns the arguments it took
 * (0: not one of them). */
static int parse_mode_option(int argc, char **argv, int i, args *a) {
    const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    double num;
    tg_err e;
    const run_mode mode = strcmp(opt, "--eval") == 0 ? MODE_EVAL : strcmp(opt, "--sample") == 0 ? MODE_SAMPLE : MODE_TRAIN;
    if (mode != MODE_TRAIN) {
        choose_mode(a, mode, opt);
        return 1;
    }
    if (!val) return 0;
    if (strcmp(opt, "--prompt") == 0) {
        a->sample.prompt = val;
        return 2;
    }
    const bool tokens = strcmp(opt, "--max-tokens") == 0, temp = strcmp(opt, "--temperature") == 0,
               top_k = strcmp(opt, "--top-k") == 0, seed = strcmp(opt, "--seed") == 0,
               count = strcmp(opt, "--num-samples") == 0;
    if (!tokens && !temp && !top_k && !seed && !count) return 0;
    const double max = tokens ? 1 << 20 : temp ? 100 : top_k ? 1 << 20 : count ? 1 << 20 : 9007199254740991.0;
    if (config_parse_number(opt, val, !temp, count ? 1 : 0, max, &num, &e)) tg_die(PROG, &e);
    if (tokens) a->sample.max_tokens = (int)num;
    else if (temp) a->sample.temperature = num;
    else if (top_k) a->sample.top_k = (int)num;
    else if (count) a->sample.num_samples = (int)num;
    else a->sample.seed = (long long)num;
    return 2;
}

/* Options that belong to one mode, given without it, would be ignored
 * silently: refuse them. */
static void check_mode_options(const args *a) {
    const sample_opts unset = sample_opts_default();
    const bool sample_opts_given = a->sample.prompt || a->sample.max_tokens != unset.max_tokens ||
                                   a->sample.temperature != unset.temperature || a->sample.top_k != unset.top_k ||
                                   a->sample.seed != unset.seed || a->sample.num_samples != unset.num_samples;
    if (sample_opts_given && a->mode != MODE_SAMPLE) {
        fprintf(stderr, "%s: error: --prompt, --max-tokens, --temperature, --top-k, --seed and --num-samples need "
                        "--sample\n", PROG);
        exit(2);
    }
    if (a->plan.calibrate && a->mode != MODE_PLAN) {
        fprintf(stderr, "%s: error: --calibrate needs --plan (it fits --plan's time model to an op table)\n", PROG);
        exit(2);
    }
}

void args_parse(int argc, char **argv, tg_config *cfg, args *a) {
    config_defaults(cfg);
    const char *config_path = NULL;
    double num;
    int took;
    *a = (args){MODE_TRAIN, {8, 80.0 * 1024 * 1024 * 1024, 0.5, NULL}, NULL, sample_opts_default(), NULL, NULL};
    tg_err e;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(argv[i], "--version") == 0) {
            print_version();
        } else if (strcmp(argv[i], "--peak-tflops") == 0) {
            print_peak_tflops(argc, argv, i);
        } else if (strcmp(argv[i], "--op-rates") == 0) {
            print_op_rates(argc, argv, i);
        } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            if (config_path && tg_fail(&e, "--config given twice ('%s', then '%s'): give one", config_path, argv[i + 1]))
                tg_die(PROG, &e);
            config_path = argv[++i];
        } else if (strcmp(argv[i], "--set") == 0) {
            check_set_argument(argc, argv, i);
            i++;
        } else if (strcmp(argv[i], "--plan") == 0) {
            choose_mode(a, MODE_PLAN, argv[i]);
        } else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc) {
            if (config_parse_number("--devices", argv[++i], true, 1, 1 << 20, &num, &e)) tg_die(PROG, &e);
            a->plan.devices = (int)num;
        } else if (strcmp(argv[i], "--device-gib") == 0 && i + 1 < argc) {
            if (config_parse_number("--device-gib", argv[++i], false, 1e-6, 1 << 20, &num, &e)) tg_die(PROG, &e);
            a->plan.device_bytes = num * 1024 * 1024 * 1024;
        } else if (strcmp(argv[i], "--plan-json") == 0 && i + 1 < argc) {
            a->plan_json = argv[++i];
        } else if (strcmp(argv[i], "--calibrate") == 0 && i + 1 < argc) {
            a->plan.calibrate = argv[++i];
        } else if ((took = parse_mode_option(argc, argv, i, a)) > 0) {
            i += took - 1;
        } else if (strcmp(argv[i], "--hellaswag") == 0 && i + 1 < argc) {
            choose_mode(a, MODE_HELLASWAG, argv[i]);
            a->hellaswag = argv[++i];
        } else if (strcmp(argv[i], "--export-llmc") == 0 && i + 1 < argc) {
            choose_mode(a, MODE_EXPORT_LLMC, argv[i]);
            a->export_llmc = argv[++i];
            if (!a->export_llmc[0]) {
                fprintf(stderr, "%s: error: --export-llmc: the path is empty; give the llm.c model file to write\n", PROG);
                exit(2);
            }
        } else {
            fprintf(stderr, "%s: error: unknown or incomplete argument '%s' (see --help)\n", PROG, argv[i]);
            exit(2);
        }
    }
    check_mode_options(a);
    if (!config_path) {
        fprintf(stderr, "%s: error: --config FILE is required (see --help; configs/tiny.json is a small model to start from)\n", PROG);
        exit(2);
    }
    if (config_load_file(cfg, config_path, &e)) tg_die(PROG, &e);
    for (int i = 1; i < argc; i++) /* overrides apply after the file, in order */
        if (strcmp(argv[i], "--set") == 0 && config_set(cfg, argv[++i], &e)) tg_die(PROG, &e);
    if (model_files_resolve_shape(cfg, a->mode == MODE_EXPORT_LLMC, &e)) tg_die(PROG, &e);
}

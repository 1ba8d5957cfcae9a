#include "train/args.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "train/model_files.h"
#include "train/run.h"


static void usage(FILE *f) {
    fprintf(f, "usage: %s --config FILE [--set key.path=value ...]\n"
               "       %s --plan --config FILE [--set ...] [--devices N] [--device-gib GIB] [--plan-json FILE]\n"
               "       %s --export-llmc FILE --config FILE [--set ...]   (the model as an llm.c gpt2_*.bin)\n"
               "       %s --version   (the commit and the backends compiled in)\n"
               "       %s --peak-tflops \"DEVICE NAME\" [bf16|fp32]   (dense peak TFLOP/s; 0: unknown)\n"
               "       %s --help\n\n"
               "Trains GPT-2 on token shards made by ./prepare. Every key below may be set in the JSON\n"
               "config (as {\"section\": {\"key\": value}}) or overridden with --set section.key=value.\n\n"
               "--plan lists the layouts (tp, sp, recompute, micro-batch, zero) the config could run with on N devices\n"
               "(default 8) of GIB GiB each (default 80): memory per device from the trainer's own budget, whether it\n"
               "fits, and a predicted step time; --plan-json also writes one JSON object per layout to FILE.\n\n"
               "--export-llmc writes model.init_from (else out.dir's newest checkpoint, else the initial weights) as an\n"
               "llm.c model file (version 3, float32, vocabulary padded with zero rows to model.vocab_multiple); it\n"
               "refuses to replace FILE. model.init_from reads such files (version 3 or 5) as well as checkpoint dirs.\n"
               "Model shape keys (n_layer, n_head, n_embd, vocab_size, seq_len) left out of the config and --set come\n"
               "from the checkpoint the run starts from (its config.json or llm.c header), else the defaults below.\n\n",
            PROG, PROG, PROG, PROG, PROG, PROG);
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

void args_parse(int argc, char **argv, tg_config *cfg, args *a) {
    config_defaults(cfg);
    const char *config_path = NULL;
    double num;
    *a = (args){MODE_TRAIN, {8, 80.0 * 1024 * 1024 * 1024, 0.5}, NULL, NULL};
    tg_err e;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(argv[i], "--version") == 0) {
            print_version();
        } else if (strcmp(argv[i], "--peak-tflops") == 0) {
            print_peak_tflops(argc, argv, i);
        } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            if (config_path && tg_fail(&e, "--config given twice ('%s', then '%s'): give one", config_path, argv[i + 1]))
                tg_die(PROG, &e);
            config_path = argv[++i];
        } else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc) {
            i++;
        } else if (strcmp(argv[i], "--plan") == 0) {
            a->mode = MODE_PLAN;
        } else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc) {
            if (config_parse_number("--devices", argv[++i], true, 1, 1 << 20, &num, &e)) tg_die(PROG, &e);
            a->plan.devices = (int)num;
        } else if (strcmp(argv[i], "--device-gib") == 0 && i + 1 < argc) {
            if (config_parse_number("--device-gib", argv[++i], false, 1e-6, 1 << 20, &num, &e)) tg_die(PROG, &e);
            a->plan.device_bytes = num * 1024 * 1024 * 1024;
        } else if (strcmp(argv[i], "--plan-json") == 0 && i + 1 < argc) {
            a->plan_json = argv[++i];
        } else if (strcmp(argv[i], "--export-llmc") == 0 && i + 1 < argc) {
            a->mode = MODE_EXPORT_LLMC;
            a->export_llmc = argv[++i];
        } else {
            fprintf(stderr, "%s: error: unknown or incomplete argument '%s' (see --help)\n", PROG, argv[i]);
            exit(2);
        }
    }
    if (!config_path) {
        fprintf(stderr, "%s: error: --config FILE is required (see --help; configs/tiny.json is the default model)\n", PROG);
        exit(2);
    }
    if (config_load_file(cfg, config_path, &e)) tg_die(PROG, &e);
    for (int i = 1; i < argc; i++) /* overrides apply after the file, in order */
        if (strcmp(argv[i], "--set") == 0 && config_set(cfg, argv[++i], &e)) tg_die(PROG, &e);
    if (model_files_resolve_shape(cfg, a->mode == MODE_EXPORT_LLMC, &e)) tg_die(PROG, &e);
}

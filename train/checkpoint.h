/* Checkpoints: a directory step_XXXXXXXX/ per save, written under a
 * temporary name and renamed when complete. It holds the full, unsharded
 * model (model.safetensors, Hugging Face GPT-2 names and [in, out] shapes,
 * vocabulary unpadded) with a config.json transformers accepts, the AdamW
 * moments (optimizer.safetensors, "exp_avg.NAME" / "exp_avg_sq.NAME") and
 * the run state (state.json: step, data position, seed), and the tokenizer
 * of data.vocab_dir as Hugging Face reads it (train/model_files.h). None of
 * it depends on the TP/DP layout that wrote it. */
#ifndef TRAIN_CHECKPOINT_H
#define TRAIN_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "data/shards.h"
#include "train/config.h"
#include "model/gpt.h"
#include "train/optim.h"

typedef struct ckpt_state {
    int step;
    data_pos pos;
    const shard_set *train; /* the training set the position refers to (NULL: none opened) */
    /* ckpt_load_state: the optimizer's keys whose values differ from the
     * saved run's ("train.lr 0.002 -> 0.001, ..."), empty when none */
    char changed[400];
} ckpt_state;

/* A collective over the TP and DP groups; only the writer (global rank 0)
 * touches the file system. Between steps: under ZeRO the gathered optimizer
 * state passes through g's gradient buffer (optim_export). Returns 0 when
 * written (or not the writer), 1 when that step's directory already
 * existed. */
int ckpt_save(const char *out_dir, gpt *g, const optim *o, const tg_config *c, const ckpt_state *st, bool writer,
              tg_err *e);

/* Every file a checkpoint holds: ckpt_save's four, and the tokenizer
 * model_files_write_tokenizer copies beside them. Cleanup removes these
 * and nothing else. */
extern const char *const ckpt_file_names[];
extern const size_t ckpt_n_files;

/* Newest complete checkpoint directory in out_dir: its step, or -1 if none. */
int ckpt_latest(const char *out_dir, char *path, size_t path_len);
/* The step of a checkpoint's name, exactly what "step_%08d" prints (what
 * ckpt_save writes), or -1: "step_5", "step_00000005x" and the ".tmp.XXXXXX"
 * of an interrupted save are not checkpoints. */
int ckpt_step_of_name(const char *name);

/* Weights from dir/model.safetensors (ours, or a Hugging Face GPT-2
 * directory: "transformer." prefixes, F16/BF16 and a longer wpe accepted),
 * checking dir/config.json against the model's shape when present; or, when
 * dir is a file, from an llm.c gpt2_*.bin (train/llmc.h). */
int ckpt_load_model(const char *dir, gpt *g, tg_err *e);
int ckpt_load_optim(const char *dir, const gpt *g, optim *o, tg_err *e);
/* The run state; refuses a config whose global_batch, seq_len, seed or
 * shuffling differ from the saved run's (the data position depends on them). */
int ckpt_load_state(const char *dir, const tg_config *c, ckpt_state *st, tg_err *e);

/* Fills this rank's local elements of t from the full tensor (padding: 0). */
void ckpt_full_to_local(const gpt *g, const gpt_tensor *t, const float *full, float *local);

/* A small JSON file (config.json, state.json), parsed strictly (nothing
 * after the value, no key twice); errors name the path. */
struct cJSON *ckpt_read_json(const char *path, tg_err *e);
/* A JSON number that must be a whole number in [min, max], checked before
 * the conversion; errors name the path and key. */
int ckpt_json_whole(const struct cJSON *v, const char *key, double min, double max, long long *out, const char *path,
                    tg_err *e);

#endif

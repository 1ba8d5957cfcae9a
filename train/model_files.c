#include "train/model_files.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/ops.h"
#include "parallel/comm.h"
#include "parallel/topology.h"
#include "train/checkpoint.h"
#include "train/llmc.h"
#include "train/run.h"
#include "train/safetensors.h"
#include "util/fs.h"

#define PATH_LEN 1200

int model_files_source(const tg_config *c, bool for_export, char *path, size_t n) {
    const bool resuming = c->out.resume && ckpt_latest(c->out.dir, path, n) >= 0;
    if (resuming && !(for_export && c->model.init_from[0])) return 1;
    if (c->model.init_from[0]) {
        snprintf(path, n, "%s", c->model.init_from);
        return 1;
    }
    return for_export && ckpt_latest(c->out.dir, path, n) >= 0 ? 1 : 0;
}

typedef enum { FORMAT_DIRECTORY, FORMAT_LLMC } model_format;

/* Which format path holds, or a message naming the formats read here. */
static int detect_format(const char *path, model_format *f, tg_err *e) {
    char inner[PATH_LEN + 32];
    struct stat sb;
    snprintf(inner, sizeof inner, "%s/model.safetensors", path);
    const bool is_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    const int stat_errno = errno;
    if (is_dir && access(inner, F_OK) == 0) {
        *f = FORMAT_DIRECTORY;
        return 0;
    }
    if (!is_dir && llmc_is_model_file(path)) {
        *f = FORMAT_LLMC;
        return 0;
    }
    char why[160];
    snprintf(inner, sizeof inner, "%s/pytorch_model.bin", path);
    if (is_dir && access(inner, F_OK) == 0)
        snprintf(why, sizeof why, "a directory with pytorch_model.bin but no model.safetensors: save it with "
                                  "safe_serialization=True");
    else if (is_dir) snprintf(why, sizeof why, "a directory without model.safetensors");
    else if (stat(path, &sb) != 0) snprintf(why, sizeof why, "%s", strerror(stat_errno));
    else snprintf(why, sizeof why, "a file that does not open with llm.c's magic %d", LLMC_MAGIC);
    return tg_fail(e, "model.init_from: %s is none of the model formats train_gpt reads (a train_gpt checkpoint or "
                      "Hugging Face GPT-2 directory holding model.safetensors and config.json; an llm.c gpt2_*.bin, "
                      "version 3 or 5): %s", path, why);
}

/* The shape keys' names in a config.json (Hugging Face's) and in an llm.c header. */
static const char *const HF_SHAPE_NAMES[SHAPE_KEYS] = {"n_layer", "n_head", "n_embd", "vocab_size", "n_positions"};
static const char *const LLMC_SHAPE_NAMES[SHAPE_KEYS] = {"num_layers", "num_heads", "channels", "vocab_size",
                                                         "max_seq_len"};

/* The shape in a checkpoint directory's config.json (Hugging Face's keys). */
static int shape_from_config_json(const char *dir, long long shape[SHAPE_KEYS], char *src, size_t n, tg_err *e) {
    snprintf(src, n, "%s/config.json", dir);
    cJSON *j = ckpt_read_json(src, e);
    if (!j) return tg_wrap(e, "the model shape the config leaves out comes from it");
    const char *const *keys = HF_SHAPE_NAMES;
    int rc = cJSON_IsObject(j) ? 0 : tg_fail(e, "%s: must be a JSON object (a Hugging Face GPT-2 config)", src);
    for (int k = 0; rc == 0 && k < SHAPE_KEYS; k++)
        rc = ckpt_json_whole(cJSON_GetObjectItemCaseSensitive(j, keys[k]), keys[k], 1, INT_MAX, &shape[k], src, e);
    cJSON_Delete(j);
    return rc;
}

/* What to do when a given shape key does not fit the checkpoint. */
static const char *const ADVICE_OUT_DIR =
    "out.dir holds a run of another shape; to train this shape, start it in a new out.dir (--set out.dir=DIR); to go "
    "on with that run, give its shape or leave the key out (it then comes from the checkpoint)";
static const char *const ADVICE_INIT_FROM =
    "leave the shape keys out of the config and --set to take model.init_from's, or give its values";

/* The shape of the checkpoint the weights come from (model_files_source),
 * from an llm.c header or a config.json: 1 with shape, its names there, src
 * and whether it is model.init_from; 0: none (no checkpoint, or a directory
 * without config.json while `needed` is false); -1 on error. */
typedef struct source_shape {
    long long shape[SHAPE_KEYS];
    const char *const *names;
    bool init_from;
    char src[PATH_LEN + 32];
} source_shape;

static int read_source_shape(const tg_config *c, bool for_export, bool needed, source_shape *s, tg_err *e) {
    char path[PATH_LEN];
    if (!model_files_source(c, for_export, path, sizeof path)) return 0;
    model_format f = FORMAT_DIRECTORY;
    s->init_from = strcmp(path, c->model.init_from) == 0;
    /* A checkpoint of out.dir is a directory; model.init_from may be anything. */
    if (s->init_from && detect_format(path, &f, e)) return -1;
    if (f == FORMAT_LLMC) {
        llmc_header h;
        if (llmc_read_header(path, &h, e)) return -1;
        const long long from_header[SHAPE_KEYS] = {h.n_layer, h.n_head, h.n_embd, h.vocab_size, h.max_seq_len};
        memcpy(s->shape, from_header, sizeof s->shape);
        s->names = LLMC_SHAPE_NAMES;
        snprintf(s->src, sizeof s->src, "%s (llm.c header)", path);
        return 1;
    }
    s->names = HF_SHAPE_NAMES;
    snprintf(s->src, sizeof s->src, "%s/config.json", path);
    if (!needed && access(s->src, F_OK) != 0) return 0; /* the load checks the tensors' shapes */
    return shape_from_config_json(path, s->shape, s->src, sizeof s->src, e) ? -1 : 1;
}

int model_files_resolve_shape(tg_config *c, bool for_export, tg_err *e) {
    source_shape s;
    const int found = read_source_shape(c, for_export, !config_shape_complete(c), &s, e);
    return found <= 0 ? found : config_take_shape(c, s.shape, s.src, e);
}

int model_files_check_shape(const tg_config *c, bool for_export, tg_err *e) {
    source_shape s;
    const int found = read_source_shape(c, for_export, false, &s, e);
    if (found <= 0) return found;
    /* seq_len may be shorter (wpe's first rows serve); a resume then refuses it
     * in state.json's check, which says why: the data position. */
    return config_check_shape(c, s.shape, s.names, s.src, s.init_from ? ADVICE_INIT_FROM : ADVICE_OUT_DIR, e);
}

/* ---- Hugging Face's extra entries ---- */

static bool hf_mask_buffer(const char *name, int n_layer) {
    if (strncmp(name, "h.", 2) != 0 || name[2] < '0' || name[2] > '9') return false;
    char *end;
    const long layer = strtol(name + 2, &end, 10);
    return layer < n_layer && (strcmp(end, ".attn.bias") == 0 || strcmp(end, ".attn.masked_bias") == 0);
}

bool model_files_hf_extra(const char *name, int n_layer) {
    if (strncmp(name, "transformer.", 12) == 0) name += 12;
    return strcmp(name, "lm_head.weight") == 0 || hf_mask_buffer(name, n_layer);
}

/* ---- tokenizer files ---- */

static int write_bytes(const char *path, const char *data, size_t len, tg_err *e) {
    FILE *f = fs_create_excl(path); /* into the save's new directory: nothing is there to follow or replace */
    if (!f) return tg_fail(e, "%s: cannot create: %s", path, strerror(errno));
    int ok = fwrite(data, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0) ok = 0;
    return ok ? 0 : tg_fail(e, "%s: write failed: %s", path, strerror(errno));
}

/* A file of the checkpoint dir, its checksum recorded from its bytes. */
static int write_recorded(const char *dir, const char *name, const char *data, size_t len, ckpt_files *rec, tg_err *e) {
    char path[PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ckpt_files_add_bytes(rec, name, data, len);
    return write_bytes(path, data, len, e);
}

/* Copies a regular file of at most 64 MiB (a vocabulary, not a stream)
 * into dir/name. */
static int copy_file(const char *from, const char *dir, const char *name, ckpt_files *rec, tg_err *e) {
    FILE *f = open_regular(from, e);
    if (!f) return -1;
    struct stat sb;
    int rc = fstat(fileno(f), &sb) == 0 && sb.st_size <= (64 << 20) ? 0 : tg_fail(e, "%s: larger than 64 MiB", from);
    char *buf = rc == 0 ? tg_malloc((size_t)sb.st_size + 1, "tokenizer file") : NULL;
    if (rc == 0 && fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size)
        rc = tg_fail(e, "%s: cannot read: %s", from, strerror(errno));
    fclose(f);
    if (rc == 0) rc = write_recorded(dir, name, buf, (size_t)sb.st_size, rec, e);
    free(buf);
    return rc;
}

static int write_json(const char *dir, const char *name, cJSON *j, ckpt_files *rec, tg_err *e) {
    char *text = cJSON_Print(j);
    const int rc = write_recorded(dir, name, text, strlen(text), rec, e);
    free(text);
    cJSON_Delete(j);
    return rc;
}

/* GPT-2's one special token, <|endoftext|>, as beginning, end and unknown. */
static cJSON *special_tokens(void) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "bos_token", "<|endoftext|>");
    cJSON_AddStringToObject(j, "eos_token", "<|endoftext|>");
    cJSON_AddStringToObject(j, "unk_token", "<|endoftext|>");
    return j;
}

static cJSON *tokenizer_config(const tg_config *c) {
    cJSON *j = special_tokens();
    cJSON_AddStringToObject(j, "tokenizer_class", "GPT2Tokenizer");
    cJSON_AddNumberToObject(j, "model_max_length", c->model.seq_len);
    cJSON_AddBoolToObject(j, "add_prefix_space", 0);
    cJSON_AddBoolToObject(j, "add_bos_token", 0);
    cJSON_AddStringToObject(j, "errors", "replace");
    cJSON_AddBoolToObject(j, "clean_up_tokenization_spaces", 0);
    return j;
}

int model_files_write_tokenizer(const char *dir, const tg_config *c, ckpt_files *rec, tg_err *e) {
    char enc[PATH_LEN], bpe[PATH_LEN];
    snprintf(enc, sizeof enc, "%s/encoder.json", c->data.vocab_dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", c->data.vocab_dir);
    if (!c->data.vocab_dir[0] || access(enc, F_OK) != 0 || access(bpe, F_OK) != 0) return 0;
    int rc = copy_file(enc, dir, "vocab.json", rec, e);
    if (rc == 0) rc = copy_file(bpe, dir, "merges.txt", rec, e);
    if (rc == 0) rc = write_json(dir, "tokenizer_config.json", tokenizer_config(c), rec, e);
    if (rc == 0) rc = write_json(dir, "special_tokens_map.json", special_tokens(), rec, e);
    return rc ? tg_wrap(e, "data.vocab_dir's tokenizer into the checkpoint") : 0;
}

/* ---- --export-llmc ---- */

/* Under a launcher (scripts/launch.sh, srun, mpirun) every rank runs the
 * export: rank 0 writes the file, the others only say so, where each wrote
 * it and all but the first failed on the file the first had put in place. */
static bool export_left_to_rank_0(void) {
    tg_err e;
    topology t;
    if (topology_from_env(&t, 1, &e)) tg_die(PROG, &e);
    const int rank = t.rank, world = t.world;
    topology_free(&t);
    if (rank != 0) printf("--export-llmc: rank %d of %d leaves the file to rank 0\n", rank, world);
    return rank != 0;
}

int model_files_export_llmc(const tg_config *c, const char *path) {
    if (export_left_to_rank_0()) return 0;
    tg_err e;
    gpt_dims d;
    if (gpt_dims_from_config(&d, c, 1, 0, &e)) tg_die(PROG, &e);
    const tg_ops *ops = ops_cpu();
    comm *tp = comm_null_create("tp", 0, 1);
    comm_use_memory(tp, &ops->mem);
    gpt *g = gpt_create(ops, tp, &d, 1, 1, gpt_param_count(&d)); /* activations for one token: nothing runs */
    char src[PATH_LEN];
    const bool from_checkpoint = model_files_source(c, true, src, sizeof src);
    int rc = 0;
    if (from_checkpoint) rc = ckpt_load_model(src, g, &e);
    else gpt_init_weights(g, (uint64_t)c->train.seed);
    if (rc == 0) rc = llmc_write_model(path, g, c->model.vocab_multiple, &e);
    gpt_free(g);
    comm_destroy(tp);
    if (rc) tg_die(PROG, &e);
    printf("wrote %s: llm.c model file version 3 (float32), %d layers, %d heads, width %d, vocab %d, context %d, from %s\n",
           path, d.L, d.NH, d.C, d.V, d.T, from_checkpoint ? src : "the initial weights of train.seed");
    return 0;
}

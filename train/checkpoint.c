#include "train/checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/ckpt_data.h"
#include "train/ckpt_digest.h"
#include "train/llmc.h"
#include "train/model_files.h"
#include "train/safetensors.h"
#include "util/fs.h"
#include "util/json.h"

#define CKPT_FORMAT "train_gpt checkpoint"

/* ---- layout-independent views of the TP ranks' buffers ---- */

/* Copies TP rank r's local elements of t into the full tensor (host). */
static void local_to_full(const gpt *g, const gpt_tensor *t, const float *local, int tp_rank, float *full) {
    for (size_t j = 0; j < t->numel; j++) {
        long long fi = gpt_full_index_at(g, t, j, tp_rank);
        if (fi >= 0) full[fi] = local[j];
    }
}

void ckpt_full_to_local(const gpt *g, const gpt_tensor *t, const float *full, float *local) {
    for (size_t j = 0; j < t->numel; j++) {
        long long fi = gpt_full_index(g, t, j);
        local[j] = fi >= 0 ? full[fi] : 0.0f;
    }
}

static size_t full_numel(const gpt_tensor *t) { return (size_t)t->full_rows * t->full_cols; }

static void tensor_shape(const gpt_tensor *t, st_entry *en) {
    if (t->is_1d) {
        en->ndim = 1;
        en->shape[0] = t->full_cols;
    } else {
        en->ndim = 2;
        en->shape[0] = t->full_rows;
        en->shape[1] = t->full_cols;
    }
}

/* A buffer laid out like the parameters: backend memory (read a tensor at
 * a time) or a host copy. */
typedef struct ckpt_source {
    const float *ptr;
    bool on_backend;
} ckpt_source;

static size_t max_numel(const gpt *g, bool full) {
    size_t m = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        size_t n = full ? full_numel(&g->tensors[i]) : g->tensors[i].numel;
        m = n > m ? n : m;
    }
    return m;
}

/* A checkpoint never holds a non-finite value: the loader would refuse it,
 * and a run that produced one (AdamW with eps 0, say) must stop rather
 * than overwrite good checkpoints with poison. */
static int refuse_nonfinite(const gpt_tensor *t, const float *full, tg_err *e) {
    const size_t n = full_numel(t);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(full[i]))
            return tg_fail(e, "not saving this state: tensor '%s' element %zu is %g (the weights or the AdamW moments "
                              "went non-finite)", t->name, i, full[i]);
    return 0;
}

/* Streams the full tensors of nbuf buffers, tensor by tensor: each is
 * gathered over TP and, on the writer (w != NULL), assembled and written.
 * A collective over TP; after a write error the writer goes on gathering so
 * its peers are not left waiting, and reports the error at the end. */
static int stream_tensors(const gpt *g, const ckpt_source *src, int nbuf, st_writer *w, tg_err *e) {
    const size_t n_local = max_numel(g, false);
    float *mine = tg_malloc(n_local * sizeof(float), "checkpoint tensor");
    float *all = tg_malloc((size_t)g->tp->size * n_local * sizeof(float), "checkpoint gather");
    float *full = w ? tg_malloc(max_numel(g, true) * sizeof(float), "checkpoint tensor") : NULL;
    int rc = 0, write_rc = 0;
    tg_err write_err;
    for (int b = 0; rc == 0 && b < nbuf; b++)
        for (int i = 0; rc == 0 && i < g->n_tensors; i++) {
            const gpt_tensor *t = &g->tensors[i];
            const float *local = src[b].ptr + t->offset;
            if (src[b].on_backend) {
                g->ops->download(g->ops, mine, local, t->numel * sizeof(float));
                local = mine;
            }
            if (comm_all_gather(g->tp, all, local, t->numel, e)) rc = -1;
            if (rc || !w || write_rc) continue;
            memset(full, 0, full_numel(t) * sizeof(float));
            for (int r = 0; r < g->tp->size; r++) local_to_full(g, t, all + (size_t)r * t->numel, r, full);
            write_rc = refuse_nonfinite(t, full, &write_err);
            if (write_rc == 0) write_rc = st_writer_put(w, full, &write_err);
        }
    free(mine);
    free(all);
    free(full);
    if (rc == 0 && write_rc) {
        *e = write_err;
        rc = -1;
    }
    return rc;
}

/* The header entries of a file holding nbuf buffers under their prefixes. */
static st_entry *file_entries(const gpt *g, const char *const *prefixes, int nbuf, char (**names)[128]) {
    const int n = g->n_tensors * nbuf;
    st_entry *en = tg_calloc((size_t)n, sizeof(st_entry), "checkpoint index");
    *names = tg_calloc((size_t)n, 128, "checkpoint names");
    for (int b = 0; b < nbuf; b++)
        for (int i = 0; i < g->n_tensors; i++) {
            int k = b * g->n_tensors + i;
            snprintf((*names)[k], 128, "%s%s", prefixes[b], g->tensors[i].name);
            en[k].name = (*names)[k];
            tensor_shape(&g->tensors[i], &en[k]);
        }
    return en;
}

/* One safetensors file of the checkpoint, dir/name: opened and closed by
 * the writer, which records its checksum in rec, its tensors gathered by
 * every TP rank. */
static int save_file(const char *dir, const char *name, const gpt *g, const ckpt_source *src,
                     const char *const *prefixes, int nbuf, bool writer, ckpt_files *rec, tg_err *e) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    st_writer *w = NULL;
    if (writer) {
        char(*names)[128];
        st_entry *en = file_entries(g, prefixes, nbuf, &names);
        w = st_writer_open(path, en, g->n_tensors * nbuf, e);
        free(en);
        free(names);
    }
    /* A writer that could not open the file still gathers with its peers. */
    const bool open_failed = writer && !w;
    tg_err open_err;
    if (open_failed) open_err = *e;
    int rc = stream_tensors(g, src, nbuf, w, e);
    if (w && rc == 0) {
        char hex[DIGEST_HEX_LEN];
        long long bytes;
        st_writer_digest(w, hex, &bytes);
        ckpt_files_add(rec, name, bytes, hex);
    }
    if (w && st_writer_close(w, rc ? NULL : e) && rc == 0) rc = -1;
    if (open_failed && rc == 0) {
        *e = open_err;
        rc = -1;
    }
    return rc;
}

const char *const ckpt_file_names[] = {"model.safetensors", "optimizer.safetensors", "config.json", "state.json",
                                       "vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"};
const size_t ckpt_n_files = sizeof ckpt_file_names / sizeof *ckpt_file_names;

static int write_text(const char *path, const char *text, tg_err *e) {
    FILE *f = fs_create_excl(path);
    if (!f) return tg_fail(e, "%s: cannot create: %s", path, strerror(errno));
    int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0) ok = 0;
    return ok ? 0 : tg_fail(e, "%s: write failed: %s", path, strerror(errno));
}

static char *hf_config_json(const gpt_dims *d, const tg_config *c) {
    cJSON *j = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(j, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
    cJSON_AddStringToObject(j, "model_type", "gpt2");
    cJSON_AddNumberToObject(j, "vocab_size", d->V);
    cJSON_AddNumberToObject(j, "n_positions", d->T);
    cJSON_AddNumberToObject(j, "n_ctx", d->T);
    cJSON_AddNumberToObject(j, "n_embd", d->C);
    cJSON_AddNumberToObject(j, "n_layer", d->L);
    cJSON_AddNumberToObject(j, "n_head", d->NH);
    cJSON_AddNullToObject(j, "n_inner");
    cJSON_AddStringToObject(j, "activation_function", "gelu_new");
    cJSON_AddNumberToObject(j, "layer_norm_epsilon", 1e-5);
    cJSON_AddNumberToObject(j, "initializer_range", 0.02);
    cJSON_AddNumberToObject(j, "resid_pdrop", c->model.dropout);
    cJSON_AddNumberToObject(j, "embd_pdrop", c->model.dropout);
    cJSON_AddNumberToObject(j, "attn_pdrop", c->model.dropout);
    cJSON_AddBoolToObject(j, "scale_attn_weights", 1);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", 1);
    if (d->V > 50256) { /* GPT-2's <|endoftext|>, when the vocabulary has it */
        cJSON_AddNumberToObject(j, "bos_token_id", 50256);
        cJSON_AddNumberToObject(j, "eos_token_id", 50256);
    } else { /* none: left out, transformers would default to 50256, past this vocabulary */
        cJSON_AddNullToObject(j, "bos_token_id");
        cJSON_AddNullToObject(j, "eos_token_id");
    }
    cJSON_AddStringToObject(j, "torch_dtype", "float32");
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    return s;
}

/* A small file of the checkpoint, its checksum recorded from the bytes
 * written (write_text adds the final newline). */
static int write_recorded(const char *dir, const char *name, const char *text, ckpt_files *rec, tg_err *e) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    digest_stream *d = digest_begin();
    char hex[DIGEST_HEX_LEN];
    long long bytes;
    digest_update(d, text, strlen(text));
    digest_update(d, "\n", 1);
    digest_hex(d, hex, &bytes);
    digest_end(d);
    ckpt_files_add(rec, name, bytes, hex);
    return write_text(path, text, e);
}

/* Written last: it holds the checksums of every other file. */
static char *state_json(const tg_config *c, const ckpt_state *st, const ckpt_files *rec) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", CKPT_FORMAT);
    cJSON_AddNumberToObject(j, "version", CKPT_VERSION);
    cJSON_AddNumberToObject(j, "step", st->step);
    cJSON_AddNumberToObject(j, "data_epoch", (double)st->pos.epoch);
    cJSON_AddNumberToObject(j, "data_index", (double)st->pos.index);
    cJSON_AddNumberToObject(j, "seed", (double)c->train.seed);
    char *cfg = config_to_json(c);
    cJSON_AddItemToObject(j, "config", cJSON_Parse(cfg));
    free(cfg);
    if (st->train) cJSON_AddItemToObject(j, "train_data", ckpt_data_json(st->train));
    cJSON_AddItemToObject(j, "files", ckpt_files_json(rec));
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    return s;
}

/* Creates the temporary directory of a save (FINAL.tmp.XXXXXX, a new name,
 * into tmp); 1 when the step is saved already. */
static int begin_save(const char *out_dir, const char *final, char *tmp, size_t tmp_len, tg_err *e) {
    struct stat sb;
    /* Only a run resumed from this very step gets here with the directory
     * present (train_gpt refuses to start a fresh run over checkpoints), so
     * its content is this state already. */
    if (stat(final, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return 1;
        return tg_fail(e, "%s: exists and is not a checkpoint directory; move it away", final);
    }
    return fs_mkdir_p(out_dir, e) || fs_mkdir_temp(final, tmp, tmp_len, e) ? -1 : 0;
}

int ckpt_save(const char *out_dir, gpt *g, const optim *o, const tg_config *c, const ckpt_state *st, bool writer,
              tg_err *e) {
    /* The writer is global rank 0: DP rank 0, TP rank 0. */
    char final[1024], tmp[1100] = "", p[1200];
    snprintf(final, sizeof final, "%s/step_%08d", out_dir, st->step);
    int state = writer ? begin_save(out_dir, final, tmp, sizeof tmp, e) : 0;
    if (state < 0) return -1;
    const bool write = writer && state == 0;
    /* The master weights and moments in the parameter layout: on the
     * backend, or gathered over DP into host copies under ZeRO. */
    float *m_host = NULL, *v_host = NULL, *w_host = NULL;
    ckpt_source model_src[1] = {{g->master, true}}, optim_src[2] = {{o->m, true}, {o->v, true}};
    int rc = 0;
    if (o->zero) {
        m_host = tg_malloc(g->n_params * sizeof(float), "checkpoint moments");
        v_host = tg_malloc(g->n_params * sizeof(float), "checkpoint moments");
        rc = optim_export(o, g, m_host, v_host, e);
        optim_src[0] = (ckpt_source){m_host, false};
        optim_src[1] = (ckpt_source){v_host, false};
    }
    if (rc == 0 && o->master) {
        w_host = tg_malloc(g->n_params * sizeof(float), "checkpoint master weights");
        rc = optim_export_master(o, g, w_host, e);
        model_src[0] = (ckpt_source){w_host, false};
    }
    if (rc == 0 && o->dp->rank != 0) { /* DP replicas hold the same tensors: DP rank 0's TP group writes */
        free(m_host);
        free(v_host);
        free(w_host);
        return 0;
    }
    const char *model_prefix[1] = {""}, *optim_prefixes[2] = {"exp_avg.", "exp_avg_sq."};
    ckpt_files rec = {.n = 0};
    if (rc == 0) rc = save_file(tmp, "model.safetensors", g, model_src, model_prefix, 1, write, &rec, e);
    if (rc == 0) rc = save_file(tmp, "optimizer.safetensors", g, optim_src, optim_prefixes, 2, write, &rec, e);
    free(m_host);
    free(v_host);
    free(w_host);
    if (write && rc == 0) {
        char *hf = hf_config_json(&g->d, c);
        rc = write_recorded(tmp, "config.json", hf, &rec, e);
        if (rc == 0) rc = model_files_write_tokenizer(tmp, c, &rec, e);
        char *state_text = rc == 0 ? state_json(c, st, &rec) : NULL;
        snprintf(p, sizeof p, "%s/state.json", tmp);
        if (rc == 0) rc = write_text(p, state_text, e);
        free(hf);
        free(state_text);
        if (rc == 0 && rename(tmp, final) != 0) rc = tg_fail(e, "%s: cannot rename into place: %s", final, strerror(errno));
    }
    if (write && rc != 0) fs_remove_owned_dir(tmp, ckpt_file_names, ckpt_n_files, NULL);
    return rc < 0 ? -1 : (writer && state == 1 ? 1 : 0);
}

int ckpt_step_of_name(const char *name) {
    const char *digits = name + 5;
    if (strncmp(name, "step_", 5) != 0 || strlen(digits) < 8 || strlen(digits) > 10) return -1;
    long long step = 0;
    for (const char *p = digits; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        step = step * 10 + (*p - '0');
    }
    char canonical[32];
    if (step > INT_MAX) return -1;
    snprintf(canonical, sizeof canonical, "step_%08d", (int)step);
    return strcmp(canonical, name) == 0 ? (int)step : -1;
}

int ckpt_latest(const char *out_dir, char *path, size_t path_len) {
    DIR *d = opendir(out_dir);
    if (!d) return -1;
    int best = -1;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        const int step = ckpt_step_of_name(ent->d_name);
        struct stat sb;
        /* Only a directory is a checkpoint. One with damaged contents still
         * counts, so that resuming fails loudly instead of quietly going back. */
        if (step <= best || fstatat(dirfd(d), ent->d_name, &sb, 0) != 0 || !S_ISDIR(sb.st_mode)) continue;
        best = step;
    }
    closedir(d);
    if (best >= 0) snprintf(path, path_len, "%s/step_%08d", out_dir, best);
    return best;
}

/* ---- loading ---- */

cJSON *ckpt_read_json(const char *path, tg_err *e) {
    FILE *f = open_regular(path, e);
    if (!f) return NULL;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    const int read_errno = ferror(f) ? errno : 0;
    fclose(f);
    buf[n] = '\0';
    if (read_errno) tg_fail(e, "%s: cannot read: %s", path, strerror(read_errno));
    else if (n == sizeof buf - 1) tg_fail(e, "%s: larger than 64 KiB, too large for this file", path);
    else return json_parse_exact(buf, n, path, e);
    return NULL;
}

/* (A cast of 1e20 or 2.9 would wrap or truncate silently.) */
int ckpt_json_whole(const cJSON *v, const char *key, double min, double max, long long *out, const char *path,
                      tg_err *e) {
    if (!cJSON_IsNumber(v)) return tg_fail(e, "%s: key '%s' is missing or not a number", path, key);
    const double x = v->valuedouble;
    char text[64];
    if (x != floor(x) || x < min || x > max)
        return tg_fail(e, "%s: key '%s' = %s is not a whole number from %.0f to %.0f", path, key,
                       config_number_text(x, text, sizeof text), min, max);
    *out = (long long)x;
    return 0;
}

static int check_hf_key(const cJSON *cfg, const char *key, int want, bool at_least, const char *path, tg_err *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!v) return 0;
    long long got = 0;
    if (ckpt_json_whole(v, key, 0, INT_MAX, &got, path, e)) return -1;
    if (at_least ? got < want : got != want)
        return tg_fail(e, "%s: %s = %lld does not fit this model's %s%d", path, key, got, at_least ? "at least " : "", want);
    return 0;
}

/* config.json beside a checkpoint must describe the model being loaded. */
static int check_hf_config(const char *dir, const gpt_dims *d, tg_err *e) {
    char path[1100];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (access(path, F_OK) != 0) return 0; /* optional: the tensor shapes are checked anyway */
    cJSON *cfg = ckpt_read_json(path, e);
    if (!cfg) return -1;
    int rc = cJSON_IsObject(cfg) ? 0 : tg_fail(e, "%s: must be a JSON object (a Hugging Face GPT-2 config)", path);
    if (rc == 0) rc = check_hf_key(cfg, "n_layer", d->L, false, path, e);
    if (rc == 0) rc = check_hf_key(cfg, "n_head", d->NH, false, path, e);
    if (rc == 0) rc = check_hf_key(cfg, "n_embd", d->C, false, path, e);
    if (rc == 0) rc = check_hf_key(cfg, "vocab_size", d->V, false, path, e);
    if (rc == 0) rc = check_hf_key(cfg, "n_positions", d->T, true, path, e);
    cJSON_Delete(cfg);
    return rc;
}

static const st_tensor *find_tensor(const st_file *s, const char *prefix, const char *name) {
    char full[256];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const st_tensor *t = safetensors_find(s, full);
    if (!t && prefix[0] == '\0') { /* GPT2LMHeadModel.save_pretrained adds "transformer." */
        snprintf(full, sizeof full, "transformer.%s", name);
        t = safetensors_find(s, full);
    }
    return t;
}

/* A stored tensor must have the checkpoint shape; wpe may be longer (a
 * model trained with a longer context), and its first rows are used. */
static int check_shape(const st_file *s, const st_tensor *st, const gpt_tensor *t, tg_err *e) {
    bool ok;
    if (t->is_1d) ok = st->ndim == 1 && st->shape[0] == t->full_cols;
    else
        ok = st->ndim == 2 && st->shape[1] == t->full_cols &&
             (t->kind == P_WPE ? st->shape[0] >= t->full_rows : st->shape[0] == t->full_rows);
    if (ok) return 0;
    char got[96] = "", want[64];
    for (int dd = 0; dd < st->ndim; dd++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", dd ? ", " : "", st->shape[dd]);
    if (t->is_1d) snprintf(want, sizeof want, "%d", t->full_cols);
    else snprintf(want, sizeof want, "%d, %d", t->full_rows, t->full_cols);
    return tg_fail(e, "%s: tensor '%s' has shape [%s], this model needs [%s]", s->path, st->name, got, want);
}

/* A weight or moment that is not finite (or a negative second moment,
 * whose square root AdamW takes) would poison every step after the load. */
static int check_values(const st_file *s, const st_tensor *st, const float *x, bool nonnegative, tg_err *e) {
    const long long n = st_numel(st);
    for (long long i = 0; i < n; i++)
        if (!isfinite(x[i]) || (nonnegative && x[i] < 0))
            return tg_fail(e, "%s: tensor '%s' holds %g at element %lld (%s)", s->path, st->name, x[i], i,
                           isfinite(x[i]) ? "a second moment must not be negative" : "every value must be finite");
    return 0;
}

/* Reads every tensor of the model under prefix into host memory laid out
 * like this rank's parameters, marking the file's entries it used. */
static int read_buffer(st_file *s, const gpt *g, const char *prefix, float *host, bool *used, tg_err *e) {
    const bool nonnegative = strcmp(prefix, "exp_avg_sq.") == 0;
    int rc = 0;
    for (int i = 0; rc == 0 && i < g->n_tensors; i++) {
        const gpt_tensor *t = &g->tensors[i];
        const st_tensor *st = find_tensor(s, prefix, t->name);
        if (!st) {
            rc = tg_fail(e, "%s: tensor '%s%s' is missing", s->path, prefix, t->name);
            break;
        }
        used[st - s->tensors] = true;
        if ((rc = check_shape(s, st, t, e)) != 0) break;
        float *full = tg_malloc((size_t)st_numel(st) * sizeof(float), "checkpoint tensor");
        rc = safetensors_read_f32(s, st, full, e);
        if (rc == 0) rc = check_values(s, st, full, nonnegative, e);
        if (rc == 0) ckpt_full_to_local(g, t, full, host + t->offset);
        free(full);
    }
    return rc;
}

/* A tensor the model lacks means the file holds another model (more
 * layers, say): refused by name rather than dropped. */
static int refuse_unknown(const st_file *s, const bool *used, const gpt *g, tg_err *e) {
    for (int i = 0; i < s->n; i++)
        if (!used[i] && !model_files_hf_extra(s->tensors[i].name, g->d.L))
            return tg_fail(e, "%s: tensor '%s' is not part of this model (%d layers, width %d): the file holds another "
                              "model", s->path, s->tensors[i].name, g->d.L, g->d.C);
    return 0;
}

/* Opens dir/name and reads each prefix's tensors into the hosts, refusing
 * a tensor of the file that none of them took. */
static int read_file(const char *dir, const char *name, const gpt *g, const char *const *prefixes, float **hosts,
                     int nbuf, tg_err *e) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    st_file *s = safetensors_open(path, e);
    if (!s) return -1;
    bool *used = tg_calloc((size_t)(s->n ? s->n : 1), sizeof(bool), "checkpoint index");
    int rc = 0;
    for (int b = 0; rc == 0 && b < nbuf; b++) rc = read_buffer(s, g, prefixes[b], hosts[b], used, e);
    if (rc == 0) rc = refuse_unknown(s, used, g, e);
    free(used);
    safetensors_close(s);
    return rc;
}

int ckpt_load_model(const char *dir, gpt *g, tg_err *e) {
    struct stat sb;
    if (stat(dir, &sb) == 0 && S_ISREG(sb.st_mode)) return llmc_load_model(dir, g, e);
    if (ckpt_files_verify_dir(dir, e) || check_hf_config(dir, &g->d, e)) return -1;
    float *host = tg_calloc(g->n_params, sizeof(float), "checkpoint staging"); /* the alignment gaps stay 0 */
    const char *prefix[1] = {""};
    int rc = read_file(dir, "model.safetensors", g, prefix, &host, 1, e);
    if (rc == 0) gpt_set_weights(g, host);
    free(host);
    return rc;
}

int ckpt_load_optim(const char *dir, const gpt *g, optim *o, tg_err *e) {
    float *mv[2] = {tg_calloc(g->n_params, sizeof(float), "checkpoint staging"),
                    tg_calloc(g->n_params, sizeof(float), "checkpoint staging")};
    const char *prefixes[2] = {"exp_avg.", "exp_avg_sq."};
    int rc = read_file(dir, "optimizer.safetensors", g, prefixes, mv, 2, e);
    if (rc == 0) optim_import(o, g, mv[0], mv[1]);
    free(mv[0]);
    free(mv[1]);
    return rc;
}

/* Doubles hold whole numbers exactly up to 2^53: the data position's range. */
#define JSON_EXACT_MAX 9007199254740992.0

static int json_count(const cJSON *j, const char *key, double max, long long *out, const char *path, tg_err *e) {
    return ckpt_json_whole(cJSON_GetObjectItemCaseSensitive(j, key), key, 0, max, out, path, e);
}

/* The data position counts windows of global_batch x seq_len tokens in an
 * order set by the seed and shuffling: a resumed run must keep all four. */
static int check_data_keys(const cJSON *saved, const tg_config *c, const char *path, tg_err *e) {
    const struct { const char *section, *key; double now; } keys[] = {
        {"train", "global_batch", c->train.global_batch},
        {"model", "seq_len", c->model.seq_len},
        {"train", "seed", (double)c->train.seed},
        {"data", "shuffle", c->data.shuffle},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *sec = cJSON_GetObjectItemCaseSensitive(saved, keys[i].section);
        const cJSON *v = sec ? cJSON_GetObjectItemCaseSensitive(sec, keys[i].key) : NULL;
        if (!cJSON_IsNumber(v) && !cJSON_IsBool(v))
            return tg_fail(e, "%s: the saved config lacks %s.%s (or it is not a number)", path, keys[i].section, keys[i].key);
        double was = cJSON_IsBool(v) ? cJSON_IsTrue(v) : v->valuedouble;
        if (was != keys[i].now)
            return tg_fail(e, "%s: %s.%s was %g when this checkpoint was saved and is %g now; the saved data position "
                              "depends on it: keep it to resume, or start a new out.dir (model.init_from can start from "
                              "these weights)", path, keys[i].section, keys[i].key, was, keys[i].now);
    }
    return 0;
}

/* The optimizer's keys a resume may change (the LR schedule and AdamW's
 * settings), those that differ from the saved run's config written into
 * out as "key was -> now" (empty when none): a resume takes them silently
 * otherwise, and a changed schedule changes every step after it. */
static void note_changed_keys(const cJSON *saved, const tg_config *c, char *out, size_t n) {
    static const char *const keys[] = {"steps", "lr", "min_lr", "warmup", "lr_schedule", "wsd_decay_frac",
                                       "weight_decay", "beta1", "beta2", "eps", "grad_clip"};
    out[0] = '\0';
    char *now_text = config_to_json(c);
    cJSON *now = cJSON_Parse(now_text);
    free(now_text);
    const cJSON *was_train = cJSON_GetObjectItemCaseSensitive(saved, "train");
    const cJSON *now_train = cJSON_GetObjectItemCaseSensitive(now, "train");
    size_t len = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && len < n; i++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(was_train, keys[i]);
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(now_train, keys[i]);
        if (!a || !b || cJSON_Compare(a, b, true)) continue; /* an older checkpoint may lack a key */
        char *ta = cJSON_PrintUnformatted(a), *tb = cJSON_PrintUnformatted(b);
        len += (size_t)snprintf(out + len, n - len, "%strain.%s %s -> %s", len ? ", " : "", keys[i], ta ? ta : "?",
                                tb ? tb : "?");
        cJSON_free(ta);
        cJSON_free(tb);
    }
    cJSON_Delete(now);
}

/* A checkpoint named step_%08d holds that step: another (a hand edit, a
 * copy under a new name) would save over other steps or hide later ones. */
static int check_step_name(const char *dir, long long step, const char *path, tg_err *e) {
    const char *slash = strrchr(dir, '/');
    const int named = ckpt_step_of_name(slash ? slash + 1 : dir);
    if (named >= 0 && named != step)
        return tg_fail(e, "%s: key 'step' = %lld, but the checkpoint's directory is step %d's", path, step, named);
    return 0;
}

int ckpt_load_state(const char *dir, const tg_config *c, ckpt_state *st, tg_err *e) {
    char path[1100];
    snprintf(path, sizeof path, "%s/state.json", dir);
    cJSON *j = ckpt_read_json(path, e);
    if (!j) return -1;
    long long step = 0, version = 0;
    int rc = ckpt_state_version(j, path, &version, e);
    if (rc == 0) rc = json_count(j, "step", INT_MAX, &step, path, e);
    if (rc == 0) rc = check_step_name(dir, step, path, e);
    if (rc == 0) rc = json_count(j, "data_epoch", JSON_EXACT_MAX, &st->pos.epoch, path, e);
    if (rc == 0) rc = json_count(j, "data_index", JSON_EXACT_MAX, &st->pos.index, path, e);
    if (rc == 0) rc = check_data_keys(cJSON_GetObjectItemCaseSensitive(j, "config"), c, path, e);
    if (rc == 0) rc = ckpt_data_check(cJSON_GetObjectItemCaseSensitive(j, "train_data"), c, st->train, path, e);
    if (rc == 0) note_changed_keys(cJSON_GetObjectItemCaseSensitive(j, "config"), c, st->changed, sizeof st->changed);
    st->step = (int)step;
    cJSON_Delete(j);
    return rc;
}

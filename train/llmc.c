#include "train/llmc.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/checkpoint.h"
#include "train/safetensors.h"
#include "util/dtype.h"
#include "util/fs.h"

#define HEADER_INTS 256

/* llm.c's names of the parameter kinds, for messages. */
static const char *const LLMC_NAMES[P_KINDS] = {
    [P_WTE] = "wte", [P_WPE] = "wpe", [P_LN1_W] = "ln1w", [P_LN1_B] = "ln1b", [P_QKV_W] = "qkvw",
    [P_QKV_B] = "qkvb", [P_ATTPROJ_W] = "attprojw", [P_ATTPROJ_B] = "attprojb", [P_LN2_W] = "ln2w",
    [P_LN2_B] = "ln2b", [P_FC_W] = "fcw", [P_FC_B] = "fcb", [P_FCPROJ_W] = "fcprojw", [P_FCPROJ_B] = "fcprojb",
    [P_LNF_W] = "lnfw", [P_LNF_B] = "lnfb",
};

/* The linear weights, stored [out, in] by llm.c and [in, out] here. */
static bool is_linear_weight(param_kind k) {
    return k == P_QKV_W || k == P_ATTPROJ_W || k == P_FC_W || k == P_FCPROJ_W;
}

/* A tensor's shape in the file: wte has Vp rows, wpe max_seq_len, and the
 * linear weights are transposed. */
static void file_dims(const gpt_tensor *t, int padded_vocab, int max_seq_len, long long *rows, long long *cols) {
    *rows = t->kind == P_WTE ? padded_vocab : t->kind == P_WPE ? max_seq_len : t->full_rows;
    *cols = t->full_cols;
    if (is_linear_weight(t->kind)) {
        *rows = t->full_cols;
        *cols = t->full_rows;
    }
}

bool llmc_is_model_file(const char *path) {
    tg_err e;
    FILE *f = open_regular(path, &e);
    int32_t magic = 0;
    const bool yes = f && fread(&magic, sizeof magic, 1, f) == 1 && magic == LLMC_MAGIC;
    if (f) fclose(f);
    return yes;
}

/* Elements the header's shape holds: wte, wpe, the blocks, ln_f. */
static long long param_count(const llmc_header *h) {
    const long long C = h->n_embd, L = h->n_layer;
    return (long long)h->padded_vocab * C + (long long)h->max_seq_len * C + L * (12 * C * C + 13 * C) + 2 * C;
}

/* Each header field in the range this trainer can build (the config's). */
static int check_fields(const char *path, const int32_t *raw, llmc_header *h, tg_err *e) {
    const struct { const char *name; int index; long long min, max; int *out; } fields[] = {
        {"max_seq_len", 2, 1, 1 << 20, &h->max_seq_len}, {"vocab_size", 3, 1, 65536, &h->vocab_size},
        {"num_layers", 4, 1, 1024, &h->n_layer},          {"num_heads", 5, 1, 1024, &h->n_head},
        {"channels", 6, 1, 65536, &h->n_embd},           {"padded_vocab_size", 7, 1, 1 << 20, &h->padded_vocab},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const int32_t v = raw[fields[i].index];
        if (v < fields[i].min || v > fields[i].max)
            return tg_fail(e, "%s: llm.c header field %s (int32 number %d) is %d, not from %lld to %lld", path,
                           fields[i].name, fields[i].index, v, fields[i].min, fields[i].max);
        *fields[i].out = v;
    }
    if (h->padded_vocab < h->vocab_size)
        return tg_fail(e, "%s: llm.c header field padded_vocab_size (%d) is below vocab_size (%d)", path, h->padded_vocab,
                       h->vocab_size);
    return 0;
}

/* Reads the header of an open file and checks the file's size against it. */
static int read_header(FILE *f, const char *path, llmc_header *h, tg_err *e) {
    int32_t raw[HEADER_INTS];
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || fread(raw, sizeof raw, 1, f) != 1)
        return tg_fail(e, "%s: shorter than llm.c's 1024-byte header", path);
    if (raw[0] != LLMC_MAGIC)
        return tg_fail(e, "%s: header magic %d is not llm.c's model magic %d", path, raw[0], LLMC_MAGIC);
    if (raw[1] != 3 && raw[1] != 5)
        return tg_fail(e, "%s: llm.c header field version is %d; this trainer reads version 3 (float32) and 5 (bf16), "
                          "both with padded vocabulary", path, raw[1]);
    h->version = raw[1];
    if (check_fields(path, raw, h, e)) return -1;
    const long long want = (long long)sizeof raw + param_count(h) * (h->version == 3 ? 4 : 2);
    if ((long long)st.st_size != want)
        return tg_fail(e, "%s: %lld bytes, but the llm.c header (version %d, %d layers, %d channels, vocab %d padded to "
                          "%d, max_seq_len %d) needs exactly %lld", path, (long long)st.st_size, h->version, h->n_layer,
                       h->n_embd, h->vocab_size, h->padded_vocab, h->max_seq_len, want);
    return 0;
}

int llmc_read_header(const char *path, llmc_header *h, tg_err *e) {
    FILE *f = open_regular(path, e);
    if (!f) return -1;
    const int rc = read_header(f, path, h, e);
    fclose(f);
    return rc;
}

/* The header must describe the model being loaded. */
static int check_model_shape(const char *path, const llmc_header *h, const gpt_dims *d, tg_err *e) {
    const struct { const char *field, *key; int got, want; } keys[] = {
        {"num_layers", "model.n_layer", h->n_layer, d->L}, {"num_heads", "model.n_head", h->n_head, d->NH},
        {"channels", "model.n_embd", h->n_embd, d->C},     {"vocab_size", "model.vocab_size", h->vocab_size, d->V},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (keys[i].got != keys[i].want)
            return tg_fail(e, "%s: llm.c header field %s = %d does not fit this model's %s = %d", path, keys[i].field,
                           keys[i].got, keys[i].key, keys[i].want);
    if (h->max_seq_len < d->T)
        return tg_fail(e, "%s: llm.c header field max_seq_len = %d is below this model's model.seq_len = %d", path,
                       h->max_seq_len, d->T);
    return 0;
}

/* One tensor of the file (the stream's next), as float32 in the file's layout. */
static int read_tensor(FILE *f, const char *path, int version, float *out, long long n, const gpt_tensor *t, tg_err *e) {
    size_t got;
    if (version == 3) {
        got = fread(out, sizeof(float), (size_t)n, f);
    } else { /* bf16: read into the buffer's upper half, widened front to back (each float covers halves already read) */
        uint16_t *half = (uint16_t *)out + n;
        got = fread(half, sizeof(uint16_t), (size_t)n, f);
        for (long long i = 0; i < n; i++) out[i] = tg_bf16_to_f32(half[i]);
    }
    if (got != (size_t)n) return tg_fail(e, "%s: cannot read llm.c tensor %s: the file ended early", path, LLMC_NAMES[t->kind]);
    return 0;
}

/* The file's tensor in this trainer's full layout (checkpoint shape). */
static int to_full(const char *path, const gpt_tensor *t, const float *file, float *full, tg_err *e) {
    const long long in = t->full_rows, out = t->full_cols, n = in * out;
    if (is_linear_weight(t->kind)) {
        for (long long i = 0; i < in; i++)
            for (long long o = 0; o < out; o++) full[i * out + o] = file[o * in + i];
    } else {
        memcpy(full, file, (size_t)n * sizeof(float)); /* wte and wpe: their first rows */
    }
    for (long long i = 0; i < n; i++)
        if (!isfinite(full[i]))
            return tg_fail(e, "%s: llm.c tensor %s (layer %d) holds %g (every value must be finite)", path,
                           LLMC_NAMES[t->kind], t->layer, full[i]);
    return 0;
}

static int load_tensors(FILE *f, const char *path, const llmc_header *h, gpt *g, float *host, tg_err *e) {
    long long most = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        long long r, c;
        file_dims(&g->tensors[i], h->padded_vocab, h->max_seq_len, &r, &c);
        most = r * c > most ? r * c : most;
    }
    float *file = tg_malloc((size_t)most * sizeof(float), "llm.c tensor");
    float *full = tg_malloc((size_t)most * sizeof(float), "llm.c tensor");
    int rc = 0;
    for (int i = 0; rc == 0 && i < g->n_tensors; i++) { /* the file's order is the tensor table's */
        const gpt_tensor *t = &g->tensors[i];
        long long r, c;
        file_dims(t, h->padded_vocab, h->max_seq_len, &r, &c);
        rc = read_tensor(f, path, h->version, file, r * c, t, e);
        if (rc == 0) rc = to_full(path, t, file, full, e);
        if (rc == 0) ckpt_full_to_local(g, t, full, host + t->offset);
    }
    free(file);
    free(full);
    return rc;
}

int llmc_load_model(const char *path, gpt *g, tg_err *e) {
    FILE *f = open_regular(path, e);
    if (!f) return -1;
    llmc_header h;
    int rc = read_header(f, path, &h, e);
    if (rc == 0) rc = check_model_shape(path, &h, &g->d, e);
    float *host = rc == 0 ? tg_calloc(g->n_params, sizeof(float), "llm.c staging") : NULL; /* alignment gaps stay 0 */
    if (rc == 0) rc = load_tensors(f, path, &h, g, host, e);
    fclose(f);
    if (rc == 0) {
        gpt_set_weights(g, host);
    }
    free(host);
    return rc;
}

/* One tensor in the file's layout: the full tensor from the shard, padded
 * (wte) or transposed (linear weights). */
static void file_layout(const gpt *g, const gpt_tensor *t, const float *local, float *full, float *file) {
    const long long in = t->full_rows, out = t->full_cols;
    for (size_t j = 0; j < t->numel; j++) {
        const long long fi = gpt_full_index(g, t, j);
        if (fi >= 0) full[fi] = local[j];
    }
    if (is_linear_weight(t->kind)) {
        for (long long i = 0; i < in; i++)
            for (long long o = 0; o < out; o++) file[o * in + i] = full[i * out + o];
    } else {
        memcpy(file, full, (size_t)(in * out) * sizeof(float)); /* wte: the caller zeroed the padding rows */
    }
}

static int write_tensors(FILE *f, const gpt *g, int padded_vocab, tg_err *e) {
    long long most = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        long long r, c;
        file_dims(&g->tensors[i], padded_vocab, g->d.T, &r, &c);
        most = r * c > most ? r * c : most;
        most = (long long)g->tensors[i].numel > most ? (long long)g->tensors[i].numel : most;
    }
    float *local = tg_malloc((size_t)most * sizeof(float), "llm.c export");
    float *full = tg_malloc((size_t)most * sizeof(float), "llm.c export");
    float *file = tg_calloc((size_t)most, sizeof(float), "llm.c export");
    int rc = 0;
    for (int i = 0; rc == 0 && i < g->n_tensors; i++) {
        const gpt_tensor *t = &g->tensors[i];
        long long r, c;
        file_dims(t, padded_vocab, g->d.T, &r, &c);
        g->ops->download(g->ops, local, g->master + t->offset, t->numel * sizeof(float));
        memset(file, 0, (size_t)(r * c) * sizeof(float));
        file_layout(g, t, local, full, file);
        if (fwrite(file, sizeof(float), (size_t)(r * c), f) != (size_t)(r * c))
            rc = tg_fail(e, "write failed: %s", strerror(errno));
    }
    free(local);
    free(full);
    free(file);
    return rc;
}

static int write_file(FILE *f, const gpt *g, int padded_vocab, tg_err *e) {
    int32_t header[HEADER_INTS] = {LLMC_MAGIC, 3, g->d.T, g->d.V, g->d.L, g->d.NH, g->d.C, padded_vocab};
    if (fwrite(header, sizeof header, 1, f) != 1) return tg_fail(e, "write failed: %s", strerror(errno));
    if (write_tensors(f, g, padded_vocab, e)) return -1;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) return tg_fail(e, "write failed: %s", strerror(errno));
    return 0;
}

int llmc_write_model(const char *path, const gpt *g, int vocab_multiple, tg_err *e) {
    if (g->tp->size != 1) return tg_fail(e, "%s: llm.c export needs the whole model (a TP size 1 shard)", path);
    struct stat st;
    if (lstat(path, &st) == 0) return tg_fail(e, "%s: exists; remove it or choose another name (it is not replaced)", path);
    char tmp[4200]; /* PATH.tmp.XXXXXX: a new file, never one of the user's or a link's target */
    FILE *f = fs_create_temp(path, tmp, sizeof tmp, e);
    int rc = f ? 0 : -1;
    const int padded_vocab = (g->d.V + vocab_multiple - 1) / vocab_multiple * vocab_multiple;
    if (rc == 0 && write_file(f, g, padded_vocab, e)) rc = tg_wrap(e, "%s", tmp);
    if (f && fclose(f) != 0 && rc == 0) rc = tg_fail(e, "%s: write failed: %s", tmp, strerror(errno));
    /* link() refuses to replace a file that appeared meanwhile; rename would not. */
    if (rc == 0 && link(tmp, path) != 0) rc = tg_fail(e, "%s: cannot move into place: %s", path, strerror(errno));
    if (f) unlink(tmp);
    return rc;
}

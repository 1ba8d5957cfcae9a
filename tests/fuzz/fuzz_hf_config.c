/* A Hugging Face config.json beside a checkpoint, checked by ckpt_load_model
 * against the tiny model before its weights load. The directory also holds
 * a valid model.safetensors for that model (made at start from the model's
 * own tensor list), so a config.json that passes goes on to a full load.
 * Properties besides the sanitizers: a config.json that passes is exactly one
 * JSON object without a repeated key (fuzz_json_exact), and the shape keys it
 * holds are whole numbers. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/checkpoint.h"
#include "train/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

static fuzz_model model; /* built once: loading only overwrites its buffers */

/* model.safetensors of zeros with the tiny model's names and shapes. */
static void write_weights(const char *dir) {
    const gpt *g = model.g;
    st_entry *en = calloc((size_t)g->n_tensors, sizeof *en);
    size_t most = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const gpt_tensor *t = &g->tensors[i];
        en[i].name = t->name;
        en[i].ndim = t->is_1d ? 1 : 2;
        en[i].shape[0] = t->is_1d ? t->full_cols : t->full_rows;
        en[i].shape[1] = t->full_cols;
        size_t n = (size_t)t->full_rows * t->full_cols;
        most = n > most ? n : most;
    }
    char path[2048];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    tg_err e;
    st_writer *w = st_writer_open(path, en, g->n_tensors, &e);
    float *zeros = calloc(most, sizeof *zeros);
    for (int i = 0; w && i < g->n_tensors; i++)
        if (st_writer_put(w, zeros, &e)) fuzz_violation("cannot write the fuzz weights", e.msg);
    if (!w || st_writer_close(w, &e)) fuzz_violation("cannot write the fuzz weights", e.msg);
    free(zeros);
    free(en);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_model_create(&model);
    write_weights(fuzz_scratch_dir());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch_dir();
    char path[2048];
    fuzz_write(dir, "config.json", data, size, path, sizeof path);
    tg_err e;
    if (ckpt_load_model(dir, model.g, &e) != 0) return 0;
    const char *why;
    cJSON *j = fuzz_json_exact(data, size, &why);
    if (!j) fuzz_violation("ckpt_load_model accepted a config.json although", why);
    static const char *const keys[] = {"n_layer", "n_head", "n_embd", "vocab_size", "n_positions"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, keys[i]);
        if (v && !(cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble)))
            fuzz_violation("ckpt_load_model accepted a config.json whose shape key is not a whole number", keys[i]);
    }
    cJSON_Delete(j);
    return 0;
}

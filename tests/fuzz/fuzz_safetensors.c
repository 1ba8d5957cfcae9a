/* The checkpoint loader's safetensors path: the input is written as both
 * model.safetensors and optimizer.safetensors of a checkpoint directory and
 * loaded into the tiny model (ckpt_load_model, ckpt_load_optim), then opened
 * directly and every tensor of a bounded size read as float32. */
#include <stdint.h>
#include <stdlib.h>

#include "train/checkpoint.h"
#include "train/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

#define MAX_READ_ELEMENTS (1 << 16)

static fuzz_model model; /* built once: loading only overwrites its buffers */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_model_create(&model);
    return 0;
}

static void read_every_tensor(const char *path) {
    tg_err e;
    st_file *s = safetensors_open(path, &e);
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        const st_tensor *t = &s->tensors[i];
        long long n = st_numel(t);
        if (n < 0) fuzz_violation("safetensors_open accepted a negative element count", t->name);
        if (n > MAX_READ_ELEMENTS) continue;
        float *out = malloc((size_t)(n ? n : 1) * sizeof(float));
        (void)safetensors_read_f32(s, t, out, &e);
        free(out);
    }
    safetensors_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch_dir();
    char path[2048], opt_path[2048];
    fuzz_write(dir, "model.safetensors", data, size, path, sizeof path);
    fuzz_write(dir, "optimizer.safetensors", data, size, opt_path, sizeof opt_path);
    tg_err e;
    (void)ckpt_load_model(dir, model.g, &e);
    (void)ckpt_load_optim(dir, model.g, model.o, &e);
    read_every_tensor(path);
    return 0;
}

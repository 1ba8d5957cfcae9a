#include "tests/fuzz/fuzz_util.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/tokenizer.h"
#include "kernels/ops.h"
#include "parallel/comm.h"

/* libFuzzer's entry points take no context argument, so the scratch
 * directory of the process is the one piece of state kept between calls. */
static char scratch[1024];

static void remove_scratch(void) {
    DIR *d = opendir(scratch);
    if (!d) return;
    struct dirent *ent;
    char p[2048];
    while ((ent = readdir(d)) != NULL) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", scratch, ent->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(scratch);
}

const char *fuzz_scratch_dir(void) {
    if (scratch[0]) return scratch;
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/tg_fuzz.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(scratch)) {
        fprintf(stderr, "fuzz: cannot create a scratch directory %s: %s\n", scratch, strerror(errno));
        abort();
    }
    atexit(remove_scratch);
    return scratch;
}

void fuzz_write(const char *dir, const char *name, const uint8_t *data, size_t size, char *path, size_t path_len) {
    snprintf(path, path_len, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
        abort();
    }
}

void fuzz_remove(const char *dir, const char *name) {
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
}

void fuzz_violation(const char *what, const char *detail) {
    fprintf(stderr, "fuzz: property violated: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static bool has_duplicate_name(const cJSON *j) {
    for (const cJSON *a = j->child; a; a = a->next) {
        if (cJSON_IsObject(j))
            for (const cJSON *b = a->next; b; b = b->next)
                if (strcmp(a->string, b->string) == 0) return true;
        if (has_duplicate_name(a)) return true;
    }
    return false;
}

cJSON *fuzz_json_exact(const uint8_t *data, size_t size, const char **why) {
    if (memchr(data, 0, size)) {
        *why = "it holds a NUL byte";
        return NULL;
    }
    char *text = strndup((const char *)data, size);
    cJSON *j = cJSON_ParseWithOpts(text, NULL, 1);
    free(text);
    *why = !j ? "it is not one JSON value (trailing text?)" : !cJSON_IsObject(j) ? "it is not a JSON object"
         : has_duplicate_name(j) ? "an object names a key twice" : NULL;
    if (*why) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

void fuzz_model_create(fuzz_model *m) {
    tg_config *c = &m->cfg;
    config_defaults(c);
    c->model.n_layer = 1;
    c->model.n_head = 1;
    c->model.n_embd = 4;
    c->model.vocab_size = 8;
    c->model.vocab_multiple = 4;
    c->model.seq_len = 4;
    c->train.micro_batch = 1;
    c->train.global_batch = 1;
    gpt_dims d;
    tg_err e;
    if (gpt_dims_from_config(&d, c, 1, 0, &e)) fuzz_violation("the fuzz model's dimensions", e.msg);
    comm *tp = comm_null_create("tp", 0, 1), *dp = comm_null_create("dp", 0, 1);
    m->g = gpt_create(ops_cpu(), tp, &d, 1, 4, 1);
    m->o = optim_create(ops_cpu(), m->g, dp, false, 0.0);
}

tokenizer *fuzz_load_vocab(void) {
    const char *dir = getenv("FUZZ_VOCAB_DIR");
    tg_err e;
    tokenizer *t = tokenizer_load(dir && dir[0] ? dir : "assets/vocab", &e);
    if (!t) fuzz_violation("cannot load the vocabulary (run from the repository root, or set FUZZ_VOCAB_DIR)", e.msg);
    return t;
}

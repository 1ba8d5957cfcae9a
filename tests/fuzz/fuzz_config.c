/* The run configuration as train_gpt reads it: a JSON file, then --set
 * overrides, layout resolution, validation and the derived sizes.
 *
 * Input: the config file's text, then any number of "\n--set KEY=VALUE"
 * segments (each one --set argument, cut at a NUL as argv would be).
 * Properties besides the sanitizers: a file that loads is exactly one JSON
 * object without a repeated key (fuzz_json_exact); a config that loads prints to JSON that
 * loads again and prints the same (the checkpoint's state.json relies on it),
 * and a valid config has at least one micro-batch per step. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/config.h"
#include "model/gpt.h"
#include "train/optim.h"
#include "tests/fuzz/fuzz_util.h"

#define SET_MARK "\n--set "

/* Applies each --set segment of rest[0..n); returns 0 or -1 as config_set. */
static int apply_sets(tg_config *c, const char *rest, size_t n, tg_err *e) {
    const size_t mark = strlen(SET_MARK);
    while (n > 0) {
        const char *next = memmem(rest, n, SET_MARK, mark);
        size_t len = next ? (size_t)(next - rest) : n;
        char *arg = strndup(rest, len); /* stops at a NUL, like an argv string */
        int rc = config_set(c, arg, e);
        free(arg);
        if (rc) return rc;
        if (!next) break;
        n -= len + mark;
        rest = next + mark;
    }
    return 0;
}

/* print -> load -> print must be a fixed point. */
static void check_round_trip(const tg_config *c, const char *dir) {
    char *json = config_to_json(c), path[2048];
    fuzz_write(dir, "printed.json", (const uint8_t *)json, strlen(json), path, sizeof path);
    tg_config again;
    tg_err e;
    config_defaults(&again);
    if (config_load_file(&again, path, &e)) fuzz_violation("config_to_json's output does not load", e.msg);
    char *json2 = config_to_json(&again);
    if (strcmp(json, json2) != 0) fuzz_violation("config_to_json -> config_load_file -> config_to_json changed", json2);
    free(json);
    free(json2);
}

/* What train_gpt derives from a valid config before allocating anything. */
static void check_derived(const tg_config *c) {
    if (config_grad_accum(c) < 1) fuzz_violation("a valid config has no micro-batch per step", NULL);
    if (config_padded_vocab(c) < c->model.vocab_size) fuzz_violation("the padded vocabulary is smaller", NULL);
    gpt_dims d;
    tg_err e;
    if (gpt_dims_from_config(&d, c, c->parallel.tp, 0, &e) == 0)
        (void)optim_budget(&d, c->train.micro_batch, c->model.seq_len, c->parallel.dp, c->parallel.zero == 1,
                           config_act_dtype(c), 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch_dir();
    const uint8_t *mark = memmem(data, size, SET_MARK, strlen(SET_MARK));
    size_t file_len = mark ? (size_t)(mark - data) : size;
    char path[2048];
    fuzz_write(dir, "config.json", data, file_len, path, sizeof path);
    tg_config c;
    tg_err e;
    config_defaults(&c);
    if (config_load_file(&c, path, &e)) return 0;
    const char *why;
    cJSON *parsed = fuzz_json_exact(data, file_len, &why);
    if (!parsed) fuzz_violation("config_load_file accepted a file although", why);
    cJSON_Delete(parsed);
    if (mark && apply_sets(&c, (const char *)mark + strlen(SET_MARK), size - file_len - strlen(SET_MARK), &e)) return 0;
    check_round_trip(&c, dir);
    /* The world size a launcher would give this layout (parallel.project's rule). */
    const int world = c.parallel.tp * (c.parallel.dp > 0 ? c.parallel.dp : 1);
    config_resolve_layout(&c, world);
    if (config_validate(&c, world, &e) == 0) check_derived(&c);
    return 0;
}

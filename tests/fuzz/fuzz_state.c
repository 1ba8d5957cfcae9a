/* The checkpoint's state.json through ckpt_load_state, against the default
 * config (global_batch 4, seq_len 1024, seed 1337, no shuffling). Properties
 * besides the sanitizers: a state that loads is exactly one JSON object
 * without a repeated key (fuzz_json_exact), and its step, data_epoch and
 * data_index are the whole, non-negative numbers the file holds (a step
 * below 2^31, train.steps' type). */
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdint.h>

#include "train/checkpoint.h"
#include "tests/fuzz/fuzz_util.h"

/* The loaded count must be the file's number, exactly. */
static void check_count(const cJSON *j, const char *key, long long loaded, double most) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    const double x = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!(x >= 0 && x <= most && x == (double)loaded))
        fuzz_violation("ckpt_load_state loaded a count other than the file's whole, non-negative number", key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch_dir();
    char path[2048];
    fuzz_write(dir, "state.json", data, size, path, sizeof path);
    tg_config c;
    config_defaults(&c);
    ckpt_state st = {0}; /* no training set opened: the saved one is not compared */
    tg_err e;
    if (ckpt_load_state(dir, &c, &st, &e) != 0) return 0;
    const char *why;
    cJSON *j = fuzz_json_exact(data, size, &why);
    if (!j) fuzz_violation("ckpt_load_state accepted a file although", why);
    check_count(j, "step", st.step, INT_MAX);
    check_count(j, "data_epoch", st.pos.epoch, 9007199254740992.0); /* 2^53: exact in a double */
    check_count(j, "data_index", st.pos.index, 9007199254740992.0);
    cJSON_Delete(j);
    return 0;
}

#include "train/ckpt_data.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "train/run.h"

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

cJSON *ckpt_data_json(const shard_set *s) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < shards_count(s); i++) {
        const char *path;
        long long tokens, bytes;
        shards_file(s, i, &path, &tokens, &bytes);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", base_name(path));
        cJSON_AddNumberToObject(o, "bytes", (double)bytes);
        cJSON_AddNumberToObject(o, "tokens", (double)tokens);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

/* One saved shard, checked: its name, bytes and tokens. */
static int saved_shard(const cJSON *o, int i, const char **name, double *bytes, double *tokens, const char *path,
                       tg_err *e) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "bytes");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "tokens");
    if (!cJSON_IsString(n) || !cJSON_IsNumber(b) || !cJSON_IsNumber(t) || b->valuedouble < 0 || t->valuedouble < 0 ||
        b->valuedouble != floor(b->valuedouble) || t->valuedouble != floor(t->valuedouble))
        return tg_fail(e, "%s: train_data[%d] must be {\"name\": text, \"bytes\": and \"tokens\": whole numbers}", path, i);
    *name = n->valuestring;
    *bytes = b->valuedouble;
    *tokens = t->valuedouble;
    return 0;
}

/* Appends "; " and a formatted note to what (truncated when full). */
static void note(char *what, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char *what, size_t len, const char *fmt, ...) {
    size_t used = strlen(what);
    if (used + 3 >= len) return;
    if (used) {
        strcat(what, "; ");
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what + used, len - used, fmt, ap);
    va_end(ap);
}

/* Index of the shard of s named name, or -1. */
static int find_now(const shard_set *s, const char *name) {
    for (int i = 0; i < shards_count(s); i++) {
        const char *path;
        long long tokens, bytes;
        shards_file(s, i, &path, &tokens, &bytes);
        if (strcmp(base_name(path), name) == 0) return i;
    }
    return -1;
}

/* The shards of s that saved (already checked) does not name. */
static void note_added(const cJSON *saved, const shard_set *s, char *what, size_t what_len) {
    for (int k = 0; k < shards_count(s); k++) {
        const char *path;
        long long tokens, bytes;
        shards_file(s, k, &path, &tokens, &bytes);
        bool known = false;
        for (const cJSON *o = saved->child; o && !known; o = o->next)
            known = strcmp(cJSON_GetObjectItemCaseSensitive(o, "name")->valuestring, base_name(path)) == 0;
        if (!known) note(what, what_len, "added shard '%s'", path);
    }
}

/* 0 when saved (state.json's "train_data") describes s; 1 when not, with
 * what changed in what (for example "added shard 'b.bin'; resized shard
 * 'a.bin' (...)"); -1 when saved is malformed. */
static int ckpt_data_compare(const cJSON *saved, const shard_set *s, char *what, size_t what_len, const char *path,
                      tg_err *e) {
    if (!cJSON_IsArray(saved)) return tg_fail(e, "%s: key 'train_data' is not an array", path);
    what[0] = '\0';
    const int n_saved = cJSON_GetArraySize(saved), n_now = shards_count(s);
    bool same_order = n_saved == n_now;
    int i = 0;
    for (const cJSON *o = saved->child; o; o = o->next, i++) {
        const char *name = NULL, *now_path = NULL;
        double bytes = 0, tokens = 0;
        long long now_tokens = 0, now_bytes = 0;
        if (saved_shard(o, i, &name, &bytes, &tokens, path, e)) return -1;
        const int k = find_now(s, name);
        same_order &= k == i;
        if (k < 0) {
            note(what, what_len, "removed shard '%s'", name);
            continue;
        }
        shards_file(s, k, &now_path, &now_tokens, &now_bytes);
        if ((double)now_tokens != tokens || (double)now_bytes != bytes)
            note(what, what_len, "resized shard '%s' (%.0f tokens, %.0f bytes then; %lld tokens, %lld bytes now)", name,
                 tokens, bytes, now_tokens, now_bytes);
    }
    note_added(saved, s, what, what_len);
    if (!what[0] && !same_order) note(what, what_len, "the shards come in another order");
    return what[0] ? 1 : 0;
}

int ckpt_data_check(const cJSON *saved, const tg_config *c, const shard_set *now, const char *path, tg_err *e) {
    if (!saved || !now) return 0; /* saved without training data (version 1, or train.steps 0), or none opened now */
    char what[768];
    const int changed = ckpt_data_compare(saved, now, what, sizeof what, path, e);
    if (changed <= 0) return changed;
    if (c->data.allow_changed) {
        tg_warn(PROG, "data.train (%s) is not the training set %s was saved with (%s); resuming anyway "
                      "(data.allow_changed): the saved data position now points at other tokens", c->data.train, path,
                what);
        return 0;
    }
    return tg_fail(e, "data.train (%s) is not the training set %s was saved with: %s; the saved data position would "
                      "point at other tokens: restore the shards, start a new out.dir (model.init_from can start from "
                      "these weights), or set data.allow_changed=true to resume anyway", c->data.train, path, what);
}

/* A HellaSwag file through hellaswag_load (GPT-2's vocabulary: assets/vocab,
 * or FUZZ_VOCAB_DIR). Properties besides the sanitizers, for a file that
 * loads: one example per non-blank line, each line exactly one JSON object
 * without a repeated key (fuzz_json_exact); the example's label is the
 * line's; its tokens decode to the line's "ctx" and to " " + each of its
 * four "endings", byte for byte; every token is below the vocabulary. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "data/hellaswag.h"
#include "tests/fuzz/fuzz_util.h"

static tokenizer *tok; /* loaded by the first input: read-only afterwards */

/* Whether tokens t[0..n) decode to prefix + text exactly. */
static int decodes_to(const int32_t *t, int n, const char *prefix, const char *text) {
    const size_t np = strlen(prefix), nt = strlen(text);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t k;
        const char *bytes = tokenizer_decode(tok, t[i], &k);
        if (!bytes || at + k > np + nt) return 0;
        for (size_t j = 0; j < k; j++, at++)
            if (bytes[j] != (at < np ? prefix[at] : text[at - np])) return 0;
    }
    return at == np + nt;
}

/* The loaded example x against its line's text. */
static void check_example(const hs_example *x, const uint8_t *line, size_t len) {
    const char *why;
    cJSON *j = fuzz_json_exact(line, len, &why);
    if (!j) fuzz_violation("hellaswag_load accepted a line although", why);
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(j, "ctx");
    const cJSON *ends = cJSON_GetObjectItemCaseSensitive(j, "endings");
    const cJSON *label = cJSON_GetObjectItemCaseSensitive(j, "label");
    if (!cJSON_IsString(ctx) || !cJSON_IsArray(ends) || cJSON_GetArraySize(ends) != HS_ENDINGS ||
        !cJSON_IsNumber(label) || label->valuedouble != (double)x->label)
        fuzz_violation("an accepted line lacks a field or holds another label", NULL);
    if (!decodes_to(x->tokens, x->n_ctx, "", ctx->valuestring))
        fuzz_violation("the context's tokens do not decode to \"ctx\"", NULL);
    int n = x->n_ctx;
    for (int k = 0; k < HS_ENDINGS; k++) {
        const cJSON *end = cJSON_GetArrayItem(ends, k);
        if (!cJSON_IsString(end) || !decodes_to(hellaswag_ending(x, k), x->n_end[k], " ", end->valuestring))
            fuzz_violation("an ending's tokens do not decode to \" \" + the ending", NULL);
        n += x->n_end[k];
    }
    for (int i = 0; i < n; i++)
        if (x->tokens[i] < 0 || x->tokens[i] >= tokenizer_vocab_size(tok)) fuzz_violation("a token is out of range", NULL);
    cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tok) tok = fuzz_load_vocab();
    const char *dir = fuzz_scratch_dir();
    char path[2048];
    fuzz_write(dir, "hs.jsonl", data, size, path, sizeof path);
    tg_err e;
    hs_set *s = hellaswag_load(path, tok, tokenizer_vocab_size(tok), 1 << 20, &e);
    if (!s) return 0;
    int seen = 0;
    for (size_t at = 0; at < size;) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        const size_t len = nl ? (size_t)(nl - data - at) : size - at;
        size_t blank = 0;
        while (blank < len && strchr(" \t\r", data[at + blank]) && data[at + blank]) blank++;
        if (blank < len) {
            if (seen == s->n) fuzz_violation("a non-blank line has no example", NULL);
            check_example(&s->ex[seen++], data + at, len);
        }
        at += len + 1;
    }
    if (seen != s->n) fuzz_violation("more examples than non-blank lines", NULL);
    hellaswag_free(s);
    return 0;
}

#include "data/hellaswag.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/json.h"

/* Appends text's tokens to the example's; what is wrong goes to e. */
static int append_text(const tokenizer *tok, const char *text, int32_t **toks, size_t *n, size_t *cap, tg_err *e) {
    return tokenizer_encode(tok, text, strlen(text), toks, n, cap, e);
}

/* The context's tokens, then " " + each ending's, into x; the messages
 * name the field. */
static int tokenize_example(const cJSON *ctx, const cJSON *endings, const tokenizer *tok, hs_example *x, tg_err *e) {
    size_t n = 0, cap = 0;
    if (append_text(tok, ctx->valuestring, &x->tokens, &n, &cap, e)) return tg_wrap(e, "\"ctx\"");
    x->n_ctx = (int)n;
    for (int j = 0; j < HS_ENDINGS; j++) {
        const cJSON *end = cJSON_GetArrayItem(endings, j);
        if (!cJSON_IsString(end)) return tg_fail(e, "\"endings\"[%d] must be a string", j);
        const size_t len = strlen(end->valuestring) + 2, before = n;
        char *spaced = tg_malloc(len, "a HellaSwag ending");
        snprintf(spaced, len, " %s", end->valuestring);
        const int rc = append_text(tok, spaced, &x->tokens, &n, &cap, e);
        free(spaced);
        if (rc) return tg_wrap(e, "\"endings\"[%d]", j);
        x->n_end[j] = (int)(n - before);
    }
    return 0;
}

/* The example of one parsed line, its fields checked; the messages name the
 * field (the caller adds file and line). x->tokens is the caller's to free,
 * also on failure. */
static int example_of(const cJSON *o, const tokenizer *tok, int vocab_size, int seq_len, hs_example *x, tg_err *e) {
    if (!cJSON_IsObject(o)) return tg_fail(e, "not a JSON object");
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(o, "ctx");
    const cJSON *endings = cJSON_GetObjectItemCaseSensitive(o, "endings");
    const cJSON *label = cJSON_GetObjectItemCaseSensitive(o, "label");
    if (!cJSON_IsString(ctx) || !ctx->valuestring[0]) return tg_fail(e, "\"ctx\" must be a non-empty string");
    if (!cJSON_IsArray(endings) || cJSON_GetArraySize(endings) != HS_ENDINGS)
        return tg_fail(e, "\"endings\" must be an array of %d strings", HS_ENDINGS);
    const double lv = cJSON_IsNumber(label) ? label->valuedouble : -1; /* range first: the cast below is then exact */
    if (!(lv >= 0 && lv <= HS_ENDINGS - 1 && lv == (double)(int)lv))
        return tg_fail(e, "\"label\" must be a whole number from 0 to %d (the test split has no labels)", HS_ENDINGS - 1);
    x->label = (int)lv;
    if (tokenize_example(ctx, endings, tok, x, e)) return -1;
    int n = x->n_ctx;
    for (int j = 0; j < HS_ENDINGS; j++) {
        if (x->n_end[j] >= seq_len)
            return tg_fail(e, "\"endings\"[%d] is %d tokens, and model.seq_len (%d) must exceed it", j, x->n_end[j],
                           seq_len);
        n += x->n_end[j];
    }
    for (int i = 0; i < n; i++)
        if (x->tokens[i] >= vocab_size)
            return tg_fail(e, "token %d is outside the model's vocabulary (model.vocab_size = %d)", x->tokens[i],
                           vocab_size);
    return 0;
}

/* Refuses a \u0000 escape in the line (already parsed, so every backslash
 * starts an escape inside a string): cJSON decodes it into a NUL, and the
 * text would end there without a word. */
static int refuse_nul_escape(const char *line, size_t len, tg_err *e) {
    for (size_t i = 0; i + 1 < len; i++) {
        if (line[i] != '\\') continue;
        if (line[i + 1] == 'u' && i + 6 <= len && memcmp(line + i + 2, "0000", 4) == 0)
            return tg_fail(e, "column %zu: \\u0000 (a NUL character) in a string: HellaSwag text cannot hold one", i + 1);
        i++; /* the escaped character: a 'u' after an escaped backslash is text */
    }
    return 0;
}

/* Adds a line (len bytes: a NUL byte is refused, not an end) to s,
 * growing it; blank lines add nothing. where names the file and line. */
static int add_line(hs_set *s, int *cap, const char *line, size_t len, const char *where, const tokenizer *tok,
                    int vocab_size, int seq_len, tg_err *e) {
    if (strspn(line, " \t\r\n") == len) return 0;
    cJSON *o = json_parse_exact(line, len, where, e);
    if (!o) return -1;
    if (refuse_nul_escape(line, len, e)) {
        cJSON_Delete(o);
        return tg_wrap(e, "%s", where);
    }
    if (s->n == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        s->ex = tg_realloc(s->ex, (size_t)*cap * sizeof *s->ex, "HellaSwag examples");
    }
    hs_example *x = &s->ex[s->n];
    memset(x, 0, sizeof *x);
    const int rc = example_of(o, tok, vocab_size, seq_len, x, e);
    cJSON_Delete(o);
    if (rc) {
        free(x->tokens);
        return tg_wrap(e, "%s", where);
    }
    s->n++;
    return 0;
}

hs_set *hellaswag_load(const char *path, const tokenizer *tok, int vocab_size, int seq_len, tg_err *e) {
    FILE *f = fopen(path, "r");
    if (!f) return tg_fail(e, "%s: cannot open the HellaSwag file: %s", path, strerror(errno)), NULL;
    /* A folder opens for reading but fails at the first read: say so. */
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        const int err = errno;
        fclose(f);
        return tg_fail(e, "%s: cannot inspect the HellaSwag file: %s", path, strerror(err)), NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        fclose(f);
        return tg_fail(e, "%s: is a directory, not a HellaSwag JSONL file", path), NULL;
    }
    hs_set *s = tg_calloc(1, sizeof *s, "HellaSwag set");
    char *line = NULL, where[1100];
    size_t line_cap = 0;
    ssize_t len;
    int cap = 0, no = 0, rc = 0;
    while (!rc && (len = getline(&line, &line_cap, f)) >= 0) {
        snprintf(where, sizeof where, "%s: line %d", path, ++no);
        rc = s->n == HS_MAX_EXAMPLES ? tg_fail(e, "%s: more than %d examples", where, HS_MAX_EXAMPLES)
                                     : add_line(s, &cap, line, (size_t)len, where, tok, vocab_size, seq_len, e);
    }
    free(line);
    if (!rc && ferror(f)) rc = tg_fail(e, "%s: read error after line %d: %s", path, no, strerror(errno));
    fclose(f);
    if (!rc && s->n == 0) rc = tg_fail(e, "%s: no HellaSwag example in the file", path);
    if (rc) return hellaswag_free(s), NULL;
    return s;
}

void hellaswag_free(hs_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->ex[i].tokens);
    free(s->ex);
    free(s);
}

const int32_t *hellaswag_ending(const hs_example *x, int j) {
    const int32_t *t = x->tokens + x->n_ctx;
    for (int k = 0; k < j; k++) t += x->n_end[k];
    return t;
}

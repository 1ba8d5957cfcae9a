/* The GPT-2 tokenizer's round trip: for valid UTF-8 text, encoding succeeds,
 * every token is in the vocabulary, and decoding the tokens gives the text
 * back byte for byte; ill-formed UTF-8 is refused, leaving the token array
 * as it was. The vocabulary is assets/vocab (FUZZ_VOCAB_DIR overrides). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

static tokenizer *tok; /* loaded once: read-only afterwards */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    tok = fuzz_load_vocab();
    return 0;
}

/* The oracle: well-formed UTF-8 as the Unicode standard's table 3-7 defines
 * it, written from the table's byte ranges (not from the tokenizer). */
static bool utf8_valid(const uint8_t *s, size_t n) {
    static const struct { uint8_t lo0, hi0, lo1, hi1; int len; } rows[] = {
        {0x00, 0x7F, 0, 0, 1},       {0xC2, 0xDF, 0x80, 0xBF, 2}, {0xE0, 0xE0, 0xA0, 0xBF, 3},
        {0xE1, 0xEC, 0x80, 0xBF, 3}, {0xED, 0xED, 0x80, 0x9F, 3}, {0xEE, 0xEF, 0x80, 0xBF, 3},
        {0xF0, 0xF0, 0x90, 0xBF, 4}, {0xF1, 0xF3, 0x80, 0xBF, 4}, {0xF4, 0xF4, 0x80, 0x8F, 4},
    };
    size_t i = 0;
    while (i < n) {
        int row = -1;
        for (int r = 0; r < 9; r++)
            if (s[i] >= rows[r].lo0 && s[i] <= rows[r].hi0) row = r;
        if (row < 0) return false;
        const int len = rows[row].len;
        if (n - i < (size_t)len) return false;
        if (len > 1 && (s[i + 1] < rows[row].lo1 || s[i + 1] > rows[row].hi1)) return false;
        for (int k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
        i += (size_t)len;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const bool valid = utf8_valid(data, size);
    int32_t sentinel = 7, *tokens = malloc(sizeof *tokens); /* one token already there: encode appends */
    tokens[0] = sentinel;
    size_t n = 1, cap = 1;
    tg_err e;
    int rc = tokenizer_encode(tok, (const char *)data, size, &tokens, &n, &cap, &e);
    if (!valid) {
        if (rc == 0) fuzz_violation("ill-formed UTF-8 was encoded", NULL);
        if (n != 1 || tokens[0] != sentinel) fuzz_violation("a refused encode changed the token array", e.msg);
        free(tokens);
        return 0;
    }
    if (rc != 0) fuzz_violation("valid UTF-8 was refused", e.msg);
    size_t len = 0;
    for (size_t i = 1; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= tokenizer_vocab_size(tok)) fuzz_violation("a token is out of range", NULL);
        size_t k;
        const char *bytes = tokenizer_decode(tok, tokens[i], &k);
        if (!bytes || len + k > size || memcmp(data + len, bytes, k) != 0)
            fuzz_violation("decode(encode(text)) differs from text", NULL);
        len += k;
    }
    if (len != size) fuzz_violation("decode(encode(text)) is shorter than text", NULL);
    free(tokens);
    return 0;
}

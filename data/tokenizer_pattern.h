/* GPT-2's pre-tokenization pattern, compiled by PCRE2 with tiktoken's
 * character classes. tiktoken's regex (Rust's regex-syntax 0.8.5 in the npm
 * package's WASM) classes by Unicode 16.0.0; PCRE2 by the version its
 * tables carry (14.0.0 in Debian 12's 10.42), where letters and digits added
 * since (Kawi, Nag Mundari, Garay, CJK Extensions H and I, ...) are neither
 * \p{L} nor \p{N}: " X's" would become one piece instead of " X" and "'s".
 * So \p{L} and \p{N} get the ranges of the generated data/tokenizer_unicode.h
 * added, and \s is Unicode's White_Space from the same data (PCRE2's \s, Perl
 * space, lacks U+0085). Static functions: include from tokenizer.c only. */
#ifndef DATA_TOKENIZER_PATTERN_H
#define DATA_TOKENIZER_PATTERN_H

#include <pcre2.h>
#include <stdio.h>
#include <string.h>

#include "data/tokenizer_maps.h"
#include "data/tokenizer_unicode.h"
#include "util/err.h"

#define N_RANGES(t) (sizeof(t) / sizeof(t)[0])

typedef struct pattern_buf {
    char *s;
    size_t n, cap;
} pattern_buf;

static void pattern_put(pattern_buf *b, const char *s) {
    size_t k = strlen(s);
    reserve((void **)&b->s, &b->cap, b->n, k + 1, 1, "pre-tokenization pattern");
    memcpy(b->s + b->n, s, k + 1);
    b->n += k;
}

/* Appends [first, last] ranges as class items \x{F}-\x{L}. */
static void pattern_ranges(pattern_buf *b, const uint32_t (*r)[2], size_t n) {
    char item[32];
    for (size_t i = 0; i < n; i++) {
        if (r[i][0] == r[i][1])
            snprintf(item, sizeof item, "\\x{%X}", (unsigned)r[i][0]);
        else
            snprintf(item, sizeof item, "\\x{%X}-\\x{%X}", (unsigned)r[i][0], (unsigned)r[i][1]);
        pattern_put(b, item);
    }
}

static void pattern_new_letters(pattern_buf *b) {
    pattern_ranges(b, tokenizer_new_letters, N_RANGES(tokenizer_new_letters));
}

static void pattern_new_numbers(pattern_buf *b) {
    pattern_ranges(b, tokenizer_new_numbers, N_RANGES(tokenizer_new_numbers));
}

static void pattern_space(pattern_buf *b) {
    pattern_ranges(b, tokenizer_white_space, N_RANGES(tokenizer_white_space));
}

/* GPT-2's 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with each class spelled out as above and \S as [^\s]. In [^\s\p{L}\p{N}]
 * the two properties come first: PCRE2 tries a class's items in order, and
 * most characters are letters; after the ranges they made text with few
 * letters up to 1.5x slower to split. NUL-terminated. */
static char *pattern_gpt2(void) {
    pattern_buf b = {0};
    pattern_put(&b, "'s|'t|'re|'ve|'m|'ll|'d| ?[\\p{L}");
    pattern_new_letters(&b);
    pattern_put(&b, "]+| ?[\\p{N}");
    pattern_new_numbers(&b);
    pattern_put(&b, "]+| ?[^\\p{L}\\p{N}");
    pattern_space(&b);
    pattern_new_letters(&b);
    pattern_new_numbers(&b);
    pattern_put(&b, "]+|[");
    pattern_space(&b);
    pattern_put(&b, "]+(?![^");
    pattern_space(&b);
    pattern_put(&b, "])|[");
    pattern_space(&b);
    pattern_put(&b, "]+");
    return b.s;
}

/* "major.minor.patch" as one number that orders versions; -1 if malformed. */
static long pattern_version_key(const char *v) {
    unsigned major, minor, patch;
    char tail;
    if (sscanf(v, "%u.%u.%u%c", &major, &minor, &patch, &tail) != 3 || minor > 99 || patch > 99) return -1;
    return (long)major * 10000 + minor * 100 + patch;
}

/* The added ranges give exactly tiktoken's classes only on top of the
 * classes of Unicode TOKENIZER_UNICODE_BASE up to TOKENIZER_UNICODE_TARGET:
 * an older PCRE2 lacks more letters, a newer one has letters tiktoken does
 * not. Refused rather than tokenizing apart from tiktoken unnoticed. */
static int pattern_check_pcre2(tg_err *e) {
    char uv[64] = "", pv[64] = "";
    if (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, uv) <= 0 || pcre2_config(PCRE2_CONFIG_VERSION, pv) <= 0)
        return tg_fail(e, "PCRE2 does not say which Unicode version its tables carry");
    long v = pattern_version_key(uv);
    if (v >= pattern_version_key(TOKENIZER_UNICODE_BASE) && v <= pattern_version_key(TOKENIZER_UNICODE_TARGET))
        return 0;
    return tg_fail(e,
                   "PCRE2 %s carries Unicode %s, but the tokenizer's tables (data/tokenizer_unicode.h) "
                   "complete Unicode %s to %s classes only (tiktoken's are %s): build with a PCRE2 of "
                   "Unicode %s to %s, or regenerate the tables with scripts/gen_unicode_tables.mjs",
                   pv, uv, TOKENIZER_UNICODE_BASE, TOKENIZER_UNICODE_TARGET, TOKENIZER_UNICODE_TARGET,
                   TOKENIZER_UNICODE_BASE, TOKENIZER_UNICODE_TARGET);
}

static pcre2_code *pattern_compile(tg_err *e) {
    if (pattern_check_pcre2(e)) return NULL;
    char *pat = pattern_gpt2();
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code, &off, NULL);
    free(pat);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        tg_fail(e, "PCRE2 rejects the pre-tokenization pattern at offset %zu: %s", (size_t)off, (const char *)msg);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* speed only: without JIT, same matches */
    return re;
}

#endif

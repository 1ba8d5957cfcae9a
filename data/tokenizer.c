/* GPT-2's byte-level BPE, token for token as OpenAI's GPT-2 encoder as
 * tiktoken's "gpt2" encoding gives it (the tests' oracle). Encoding a text:
 *   1. split it into pieces with GPT-2's pre-tokenization regex (PCRE2), with
 *      tiktoken's classes: \s is White_Space, \p{L} and \p{N} Unicode
 *      16.0.0's (tokenizer_pattern.h);
 *   2. a piece that is a token as a whole becomes that token; otherwise
 *   3. turn each byte into that byte's token and, while two adjacent tokens
 *      concatenate to a token, merge the pair whose token has the lowest id,
 *      leftmost first (through a heap of pairs: O(n log n) in the piece).
 * Tokens are integer ids throughout; strings appear only while loading.
 * Mergeable tokens are the 256 bytes and the results of vocab.bpe's merges
 * (not <|endoftext|>); their encoder.json ids are tiktoken's ranks.
 *
 * Before, this followed the npm package gpt-3-encoder, which differs in two
 * ways: JavaScript's \s (with U+FEFF, without U+0085), and merge ranks keyed
 * by the string "a,b", so pairs of tokens containing commas could take
 * another merge's rank. */
#define PCRE2_CODE_UNIT_WIDTH 8

#include "data/tokenizer.h"
#include "data/tokenizer_maps.h"
#include "data/tokenizer_pattern.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_file(const char *path, char **buf, size_t *len, tg_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return tg_fail(e, "cannot open %s: %s (run scripts/setup.sh to fetch the GPT-2 vocabulary)",
                       path, strerror(errno));
    size_t n = 0, cap = 0;
    char *b = NULL;
    for (;;) {
        reserve((void **)&b, &cap, n, 1 << 16, 1, path);
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(b);
        return tg_fail(e, "cannot read %s", path);
    }
    *buf = b;
    *len = n;
    return 0;
}

/* ---- the tokenizer ------------------------------------------------------ */

struct tokenizer {
    int n_vocab;
    char *tok_bytes;         /* every token's bytes, in id order */
    size_t *tok_off;         /* token i is tok_bytes[tok_off[i] .. tok_off[i+1]) */
    int32_t byte_token[256]; /* the token of each single byte */
    pairmap merges;          /* (left, right) -> rank and merged token */
    strmap ranks;            /* bytes of each mergeable token -> id */
    pcre2_code *re;
};

/* encoder.json and vocab.bpe write byte b as the code point alphabet[b]:
 * printable Latin-1 bytes as themselves, the 68 others as U+0100 upwards
 * (GPT-2's bytes_to_unicode). byte_of_cp inverts it (-1: not in it). */
#define ALPHABET_CPS 324
static void byte_alphabet(int16_t byte_of_cp[ALPHABET_CPS]) {
    int n = 0;
    for (int cp = 0; cp < ALPHABET_CPS; cp++) byte_of_cp[cp] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        byte_of_cp[printable ? b : 256 + n++] = (int16_t)b;
    }
}

/* Converts a token written in the alphabet (UTF-8 text of code points below
 * U+0144) to its raw bytes; out needs n bytes. Returns the byte count or -1. */
static long alphabet_to_bytes(const int16_t *byte_of_cp, const char *s, size_t n, char *out) {
    const unsigned char *u = (const unsigned char *)s;
    long k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned cp = u[i];
        if (cp >= 0x80) {
            if ((cp & 0xE0) != 0xC0 || i + 1 >= n || (u[i + 1] & 0xC0) != 0x80) return -1;
            cp = (cp & 0x1F) << 6 | (u[++i] & 0x3F);
            if (cp < 0x80) return -1;
        }
        if (cp >= ALPHABET_CPS || byte_of_cp[cp] < 0) return -1;
        out[k++] = (char)byte_of_cp[cp];
    }
    return k;
}

/* Checks the id of each entry and returns the entries indexed by id. */
static cJSON **encoder_entries(const cJSON *root, int n, const char *path, tg_err *e) {
    cJSON **by_id = tg_calloc((size_t)n, sizeof *by_id, "encoder.json entries");
    for (cJSON *it = root->child; it; it = it->next) {
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (!(v >= 0 && v < n && v == (int)v) || by_id[(int)v]) {
            tg_fail(e, "%s: token \"%s\" has id %s, expected a distinct integer in [0, %d)", path,
                    it->string, cJSON_IsNumber(it) ? "out of range or repeated" : "not a number", n);
            free(by_id);
            return NULL;
        }
        by_id[(int)v] = it;
    }
    return by_id;
}

/* Fills tok_bytes/tok_off and vocab (raw bytes -> id) from the parsed JSON. */
static int encoder_tables(tokenizer *t, strmap *vocab, const cJSON *root, const char *path, tg_err *e) {
    int16_t byte_of_cp[ALPHABET_CPS];
    byte_alphabet(byte_of_cp);
    int n = cJSON_GetArraySize(root);
    cJSON **by_id = encoder_entries(root, n, path, e);
    if (!by_id) return -1;
    size_t total = 0;
    for (int i = 0; i < n; i++) total += strlen(by_id[i]->string);
    t->tok_bytes = tg_malloc(total, "token bytes");
    t->tok_off = tg_malloc((size_t)(n + 1) * sizeof *t->tok_off, "token offsets");
    t->tok_off[0] = 0;
    for (int i = 0; i < n; i++) {
        const char *key = by_id[i]->string;
        char *out = t->tok_bytes + t->tok_off[i];
        long k = alphabet_to_bytes(byte_of_cp, key, strlen(key), out);
        if (k < 0 || strmap_get(vocab, out, (size_t)k, NULL, NULL)) {
            tg_fail(e, "%s: token \"%s\" (id %d) %s", path, key, i,
                    k < 0 ? "has a character outside GPT-2's byte alphabet" : "is a duplicate");
            free(by_id);
            return -1;
        }
        strmap_put(vocab, out, (size_t)k, (uint32_t)i, 0);
        t->tok_off[i + 1] = t->tok_off[i] + (size_t)k;
    }
    free(by_id);
    t->n_vocab = n;
    return 0;
}

static int load_encoder(tokenizer *t, strmap *vocab, const char *path, tg_err *e) {
    char *text;
    size_t len;
    if (read_file(path, &text, &len, e)) return -1;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    int rc = 0;
    if (!root)
        rc = tg_fail(e, "%s: not valid JSON (error near byte %ld)", path, (long)(end ? end - text : -1));
    else if (!cJSON_IsObject(root) || cJSON_GetArraySize(root) < 256)
        rc = tg_fail(e, "%s: expected a JSON object mapping at least 256 tokens to ids", path);
    else
        rc = encoder_tables(t, vocab, root, path, e);
    for (int b = 0; rc == 0 && b < 256; b++) {
        char c = (char)b;
        uint32_t id = 0;
        if (!strmap_get(vocab, &c, 1, &id, NULL))
            rc = tg_fail(e, "%s: no token for the single byte 0x%02x", path, b);
        t->byte_token[b] = (int32_t)id;
    }
    cJSON_Delete(root);
    free(text);
    return rc;
}

static int is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Splits one vocab.bpe line into its two whitespace-separated fields. */
static int split_fields(const char *s, const char *end, const char *f[2], size_t flen[2]) {
    int nf = 0;
    while (s < end) {
        while (s < end && is_ascii_space(*s)) s++;
        if (s == end) break;
        const char *w = s;
        while (s < end && !is_ascii_space(*s)) s++;
        if (nf == 2) return -1;
        f[nf] = w;
        flen[nf++] = (size_t)(s - w);
    }
    return nf == 2 ? 0 : -1;
}

/* Reads the merges and marks each one's result mergeable (bytes always are).
 * The first line (#version) is skipped, and so is anything after the last
 * newline, as tiktoken's (and gpt-3-encoder's) split("\n")[1:-1]. */
static int parse_merges(const strmap *vocab, const char *path, const char *text, size_t len,
                        unsigned char *mergeable, tg_err *e) {
    int16_t byte_of_cp[ALPHABET_CPS];
    byte_alphabet(byte_of_cp);
    const char *p = memchr(text, '\n', len), *end = text + len;
    while (end > text && end[-1] != '\n') end--;
    char *joined = NULL;
    size_t joined_cap = 0;
    int rc = 0, line = 2;
    for (; p && p + 1 < end && rc == 0; line++) {
        const char *s = p + 1, *eol = memchr(s, '\n', (size_t)(end - s));
        const char *f[2];
        size_t fl[2];
        p = eol;
        reserve((void **)&joined, &joined_cap, 0, (size_t)(eol - s), 1, "merge result");
        long a = -1, b = -1;
        uint32_t id;
        if (split_fields(s, eol, f, fl) == 0 && (a = alphabet_to_bytes(byte_of_cp, f[0], fl[0], joined)) >= 0)
            b = alphabet_to_bytes(byte_of_cp, f[1], fl[1], joined + a);
        if (b < 0)
            rc = tg_fail(e, "%s line %d: expected two tokens written in GPT-2's byte alphabet", path, line);
        else if (!strmap_get(vocab, joined, (size_t)a, NULL, NULL) ||
                 !strmap_get(vocab, joined + a, (size_t)b, NULL, NULL))
            rc = tg_fail(e, "%s line %d: merges a token missing from encoder.json", path, line);
        else if (!strmap_get(vocab, joined, (size_t)(a + b), &id, NULL))
            rc = tg_fail(e, "%s line %d: the merge result is missing from encoder.json", path, line);
        else
            mergeable[id] = 1;
    }
    free(joined);
    if (rc == 0 && line == 2) rc = tg_fail(e, "%s: no merges found", path);
    return rc;
}

/* tiktoken ranks a pair by its concatenated bytes: adjacent tokens a, b merge
 * when the bytes of a then b are a mergeable token, whose id is the rank. So
 * every split of a mergeable token into two mergeable tokens is a pair. */
static void build_pairs(tokenizer *t, const unsigned char *mergeable) {
    for (int m = 0; m < t->n_vocab; m++) {
        if (!mergeable[m]) continue;
        size_t n = 0;
        const char *s = tokenizer_decode(t, m, &n);
        strmap_put(&t->ranks, s, n, (uint32_t)m, 0);
        for (size_t c = 1; c < n; c++) {
            uint32_t a, b;
            if (strmap_get(&t->ranks, s, c, &a, NULL) && strmap_get(&t->ranks, s + c, n - c, &b, NULL))
                pair_put(&t->merges, (int32_t)a, (int32_t)b, m, m);
        }
    }
}

static int load_merges(tokenizer *t, const strmap *vocab, const char *path, tg_err *e) {
    char *text;
    size_t len;
    if (read_file(path, &text, &len, e)) return -1;
    unsigned char *mergeable = tg_calloc((size_t)t->n_vocab, 1, "mergeable tokens");
    for (int b = 0; b < 256; b++) mergeable[t->byte_token[b]] = 1;
    int rc = parse_merges(vocab, path, text, len, mergeable, e);
    if (rc == 0) build_pairs(t, mergeable);
    free(mergeable);
    free(text);
    return rc;
}

tokenizer *tokenizer_load(const char *vocab_dir, tg_err *e) {
    tokenizer *t = tg_calloc(1, sizeof *t, "tokenizer");
    strmap vocab = {0}; /* raw token bytes -> id; needed only while loading */
    char path[4096];
    snprintf(path, sizeof path, "%s/encoder.json", vocab_dir);
    int rc = load_encoder(t, &vocab, path, e);
    snprintf(path, sizeof path, "%s/vocab.bpe", vocab_dir);
    if (rc == 0) rc = load_merges(t, &vocab, path, e);
    if (rc == 0 && !(t->re = pattern_compile(e))) rc = -1;
    strmap_free(&vocab);
    if (rc) {
        tokenizer_free(t);
        return NULL;
    }
    return t;
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    free(t->tok_bytes);
    free(t->tok_off);
    free(t->merges.slots);
    strmap_free(&t->ranks);
    pcre2_code_free(t->re);
    free(t);
}

int tokenizer_vocab_size(const tokenizer *t) { return t->n_vocab; }

const char *tokenizer_decode(const tokenizer *t, int token, size_t *len) {
    if (token < 0 || token >= t->n_vocab) return NULL;
    if (len) *len = t->tok_off[token + 1] - t->tok_off[token];
    return t->tok_bytes + t->tok_off[token];
}

/* ---- encoding ----------------------------------------------------------- */

/* Returns the offset of the first ill-formed sequence (Unicode table 3-7:
 * no overlong forms, no surrogates, nothing above U+10FFFF), or len. */
static size_t utf8_first_invalid(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t need;
        unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            need = 1;
        else if (c >= 0xE0 && c <= 0xEF)
            need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4)
            need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else
            return i;
        if (len - i <= need || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += need + 1;
    }
    return len;
}

/* A piece's tokens are cached for the rest of one encode call (pieces repeat
 * a lot in text); the limits bound the cache's memory. */
#define CACHE_MAX_PIECE 64
#define CACHE_MAX_ENTRIES (1u << 18)

/* One symbol of the word being merged: a doubly linked list over the
 * positions of the piece's bytes (a symbol keeps the position of its first
 * byte); rank is that of the pair it starts (PAIR_NONE: none). */
#define PAIR_NONE INT32_MAX
typedef struct bpe_sym {
    int32_t tok, rank, prev, next; /* prev/next: -1 at the ends */
} bpe_sym;

/* Scratch state of one tokenizer_encode call. */
typedef struct encoder {
    const tokenizer *t;
    pcre2_match_data *md;
    strmap cache; /* piece bytes -> (offset in pool, token count) */
    int32_t *pool, *word;
    bpe_sym *sym;
    uint64_t *heap; /* min-heap of rank << 32 | position */
    size_t pool_n, pool_cap, word_cap, sym_cap, heap_n, heap_cap;
} encoder;

/* The heap is 4-ary: half the depth of a binary one, and a node's children
 * share a cache line, which matters once a long piece's heap outgrows the
 * caches. */
static void heap_sift_up(uint64_t *h, size_t i, uint64_t key) {
    for (; i > 0 && h[(i - 1) / 4] > key; i = (i - 1) / 4) h[i] = h[(i - 1) / 4];
    h[i] = key;
}

static void heap_sift_down(uint64_t *h, size_t n, size_t i, uint64_t key) {
    for (size_t c; (c = 4 * i + 1) < n; i = c) {
        size_t end = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < end; k++)
            if (h[k] < h[c]) c = k;
        if (h[c] >= key) break;
        h[i] = h[c];
    }
    h[i] = key;
}

static uint64_t heap_key(int32_t rank, size_t pos) { return (uint64_t)(uint32_t)rank << 32 | pos; }

static void heap_push(encoder *enc, int32_t rank, size_t pos) {
    reserve((void **)&enc->heap, &enc->heap_cap, enc->heap_n, 1, sizeof *enc->heap, "BPE heap");
    heap_sift_up(enc->heap, enc->heap_n++, heap_key(rank, pos));
}

static uint64_t heap_pop(encoder *enc) {
    uint64_t top = enc->heap[0];
    if (--enc->heap_n) heap_sift_down(enc->heap, enc->heap_n, 0, enc->heap[enc->heap_n]);
    return top;
}

/* Recomputes the rank of the pair starting at symbol i and queues it. */
static void rank_pair(encoder *enc, int32_t i) {
    bpe_sym *s = &enc->sym[i];
    const pair_slot *p = s->next < 0 ? NULL : pair_get(&enc->t->merges, s->tok, enc->sym[s->next].tok);
    s->rank = p ? p->rank : PAIR_NONE;
    if (p) heap_push(enc, p->rank, (size_t)i);
}

/* Byte tokens of s[0..n) as a linked list, every ranked pair in the heap
 * (built bottom-up: O(n)). */
static void bpe_init(encoder *enc, const unsigned char *s, size_t n) {
    reserve((void **)&enc->sym, &enc->sym_cap, 0, n, sizeof *enc->sym, "BPE symbols");
    reserve((void **)&enc->heap, &enc->heap_cap, 0, n, sizeof *enc->heap, "BPE heap");
    const tokenizer *t = enc->t;
    enc->heap_n = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t tok = t->byte_token[s[i]];
        const pair_slot *p = i + 1 < n ? pair_get(&t->merges, tok, t->byte_token[s[i + 1]]) : NULL;
        enc->sym[i] = (bpe_sym){tok, p ? p->rank : PAIR_NONE, (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1};
        if (p) enc->heap[enc->heap_n++] = heap_key(p->rank, i);
    }
    for (size_t i = enc->heap_n / 4 + 1; i-- > 0;)
        if (i < enc->heap_n) heap_sift_down(enc->heap, enc->heap_n, i, enc->heap[i]);
}

/* tiktoken's byte-pair merge: while some adjacent pair ranks, merge the
 * lowest-ranked one, the leftmost among equal ranks (a heap keyed by (rank,
 * position) gives exactly that order). Heap entries go stale when a
 * neighbour merges; popping checks the symbol still starts a pair of that
 * rank. O(n log n) for n bytes. Leaves the tokens in enc->word and returns
 * their count. */
static size_t bpe(encoder *enc, const unsigned char *s, size_t n) {
    bpe_init(enc, s, n);
    bpe_sym *sym = enc->sym;
    while (enc->heap_n) {
        uint64_t top = heap_pop(enc);
        int32_t i = (int32_t)(uint32_t)top, rank = (int32_t)(top >> 32);
        if (sym[i].rank != rank) continue; /* stale: merged or re-ranked since */
        bpe_sym *right = &sym[sym[i].next];
        sym[i].tok = pair_get(&enc->t->merges, sym[i].tok, right->tok)->merged;
        sym[i].next = right->next;
        if (right->next >= 0) sym[right->next].prev = i;
        right->rank = PAIR_NONE; /* the right symbol is gone */
        rank_pair(enc, i);
        if (sym[i].prev >= 0) rank_pair(enc, sym[i].prev);
    }
    reserve((void **)&enc->word, &enc->word_cap, 0, n, sizeof *enc->word, "BPE word");
    size_t k = 0;
    for (int32_t i = n ? 0 : -1; i >= 0; i = sym[i].next) enc->word[k++] = sym[i].tok;
    return k;
}

static void append(int32_t **arr, size_t *n, size_t *cap, const int32_t *src, size_t k) {
    reserve((void **)arr, cap, *n, k, sizeof **arr, "token array");
    memcpy(*arr + *n, src, k * sizeof *src);
    *n += k;
}

static void encode_piece(encoder *enc, const char *s, size_t n, int32_t **out, size_t *n_out,
                         size_t *cap) {
    uint32_t off, cnt;
    if (strmap_get(&enc->cache, s, n, &off, &cnt)) {
        append(out, n_out, cap, enc->pool + off, cnt);
        return;
    }
    /* tiktoken takes a piece that is itself a token as is, merges or not */
    size_t k = 1;
    reserve((void **)&enc->word, &enc->word_cap, 0, 1, sizeof *enc->word, "BPE word");
    if (strmap_get(&enc->t->ranks, s, n, &off, NULL))
        enc->word[0] = (int32_t)off;
    else
        k = bpe(enc, (const unsigned char *)s, n);
    append(out, n_out, cap, enc->word, k);
    if (n <= CACHE_MAX_PIECE && enc->cache.count < CACHE_MAX_ENTRIES) {
        strmap_put(&enc->cache, s, n, (uint32_t)enc->pool_n, (uint32_t)k);
        append(&enc->pool, &enc->pool_n, &enc->pool_cap, enc->word, k);
    }
}

/* Splits text into pieces and encodes each; text is valid UTF-8. */
static int encode_pieces(encoder *enc, const char *text, size_t len, int32_t **out, size_t *n_out,
                         size_t *cap, tg_err *e) {
    size_t pos = 0;
    while (pos < len) {
        int rc = pcre2_match(enc->t->re, (PCRE2_SPTR)text, len, pos, PCRE2_NO_UTF_CHECK, enc->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break; /* cannot happen: every character matches */
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return tg_fail(e, "pre-tokenization failed at byte offset %zu: %s", pos, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(enc->md);
        if (ov[1] <= pos) return tg_fail(e, "pre-tokenization stalled at byte offset %zu", pos);
        encode_piece(enc, text + ov[0], ov[1] - ov[0], out, n_out, cap);
        pos = ov[1];
    }
    return 0;
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int32_t **tokens,
                     size_t *n_tokens, size_t *cap, tg_err *e) {
    size_t bad = utf8_first_invalid((const unsigned char *)text, len);
    if (bad < len)
        return tg_fail(e, "invalid UTF-8 at byte offset %zu (byte 0x%02x)", bad,
                       (unsigned char)text[bad]);
    encoder enc = {.t = t, .md = pcre2_match_data_create_from_pattern(t->re, NULL)};
    if (!enc.md) return tg_fail(e, "out of memory for PCRE2 match data");
    size_t n0 = *n_tokens;
    int rc = encode_pieces(&enc, text, len, tokens, n_tokens, cap, e);
    if (rc) *n_tokens = n0;
    pcre2_match_data_free(enc.md);
    strmap_free(&enc.cache);
    free(enc.pool);
    free(enc.word);
    free(enc.sym);
    free(enc.heap);
    return rc;
}

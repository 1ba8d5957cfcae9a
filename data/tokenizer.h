/* GPT-2 byte-level BPE tokenizer (encode + decode).
 *
 * Encoding reproduces OpenAI's GPT-2 encoder, as tiktoken's "gpt2" encoding
 * (encode_ordinary) gives it, token for token on valid UTF-8 text (see
 * tokenizer.c). A loaded tokenizer is read-only: encode keeps its scratch
 * state and cache per call, so one tokenizer may be shared by several
 * threads. */
#ifndef DATA_TOKENIZER_H
#define DATA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef struct tokenizer tokenizer;

/* Loads DIR/encoder.json and DIR/vocab.bpe. On failure returns NULL and fills
 * e with a sentence naming the file and what is wrong. */
tokenizer *tokenizer_load(const char *vocab_dir, tg_err *e);
void tokenizer_free(tokenizer *t);

/* Number of token ids (50257 for GPT-2). */
int tokenizer_vocab_size(const tokenizer *t);

/* Encodes len bytes of UTF-8 text (no NUL terminator needed), appending the
 * tokens to the growable array *tokens (n_tokens used, cap allocated; start
 * with NULL, 0, 0; free() it when done). Returns 0, or -1 with e filled:
 * invalid UTF-8 gives "invalid UTF-8 at byte offset N ..." where N is the
 * offset of the first byte of the first ill-formed sequence. On failure the
 * array keeps the tokens it had before the call. */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int32_t **tokens,
                     size_t *n_tokens, size_t *cap, tg_err *e);

/* The raw bytes of one token (not NUL-terminated, *len set); NULL for ids
 * out of range. Token 50256 decodes to the text "<|endoftext|>". */
const char *tokenizer_decode(const tokenizer *t, int token, size_t *len);

#endif

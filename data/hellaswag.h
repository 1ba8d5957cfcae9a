/* HellaSwag (Zellers et al., 2019), the multiple-choice benchmark llm.c
 * reports for its GPT-2 runs: a file of one JSON object a line, as the
 * dataset's hellaswag_val.jsonl, each with "ctx" (a non-empty context),
 * "endings" (four strings) and "label" (the right ending, 0 to 3). An
 * example is tokenized as llm.c's and build-nanogpt's evaluations do it:
 * the context, then " " + each ending as a text of its own. */
#ifndef DATA_HELLASWAG_H
#define DATA_HELLASWAG_H

#include <stdint.h>

#include "data/tokenizer.h"
#include "util/err.h"

#define HS_ENDINGS 4
#define HS_MAX_EXAMPLES ((1 << 22) - 1) /* four rows each: the counts of rows stay exact in float32 */

typedef struct hs_example {
    int32_t *tokens;            /* the context's n_ctx tokens, then each ending's, in order */
    int n_ctx, n_end[HS_ENDINGS];
    int label;
} hs_example;

typedef struct hs_set {
    hs_example *ex;
    int n;
} hs_set;

/* Reads and tokenizes every example of path (blank lines skipped), for a
 * model of vocab_size tokens and seq_len positions. Returns NULL with e
 * naming the file, the line and the field: not an object, a missing or
 * mistyped field (the test split's unlabelled lines too), an empty context,
 * invalid UTF-8, a token at or above vocab_size, an ending of seq_len tokens
 * or more (its first token would lose the context), no example, or more
 * than HS_MAX_EXAMPLES. */
hs_set *hellaswag_load(const char *path, const tokenizer *tok, int vocab_size, int seq_len, tg_err *e);
void hellaswag_free(hs_set *s);

/* Ending j's tokens (n_end[j] of them) of x. */
const int32_t *hellaswag_ending(const hs_example *x, int j);

#endif

/* The token shard reader: the input is one shard file (llm.c format), opened
 * through shards_open and read window by window with shards_next, in order
 * and shuffled, with windows of a few sizes. Properties besides the
 * sanitizers: every token shards_next returns is below the vocabulary. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "data/shards.h"
#include "tests/fuzz/fuzz_util.h"

#define VOCAB 50257
#define MAX_WINDOWS 16 /* per layout: enough to wrap small shards, bounded for large ones */

typedef struct layout {
    long long window, advance;
    bool shuffle;
} layout;

/* global_batch*T + 1 tokens a window, global_batch*T apart (README). */
static const layout LAYOUTS[] = {{2, 1, false}, {9, 8, true}, {65, 64, false}, {257, 256, true}};

static void read_windows(const char *path, const layout *l) {
    tg_err e;
    shard_set *s = shards_open(path, l->window, l->advance, l->shuffle, 1337, &e);
    if (!s) return;
    const long long per_epoch = shards_windows_per_epoch(s);
    if (per_epoch < 1) fuzz_violation("shards_open accepted a shard set without a window", NULL);
    long long n = per_epoch + 1 < MAX_WINDOWS ? per_epoch + 1 : MAX_WINDOWS; /* +1: into the next epoch */
    int32_t *tokens = malloc((size_t)l->window * sizeof *tokens);
    data_pos pos = {0, 0};
    for (long long i = 0; i < n; i++) {
        if (shards_next(s, &pos, VOCAB, tokens, &e)) break;
        for (long long k = 0; k < l->window; k++)
            if (tokens[k] < 0 || tokens[k] >= VOCAB) fuzz_violation("shards_next returned a token out of range", NULL);
    }
    free(tokens);
    shards_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[2048];
    fuzz_write(fuzz_scratch_dir(), "shard_000000.bin", data, size, path, sizeof path);
    for (size_t i = 0; i < sizeof LAYOUTS / sizeof LAYOUTS[0]; i++) read_windows(path, &LAYOUTS[i]);
    return 0;
}

/* Token shards (llm.c format) read as one stream of fixed-size windows.
 * Window w of an epoch starts `advance` tokens after window w-1 within a
 * shard; a shard with fewer tokens left than a window moves on to the next
 * shard (sorted filename order); after the last shard the stream restarts.
 * With shuffling, each epoch visits the same windows in a seeded order. */
#ifndef DATA_SHARDS_H
#define DATA_SHARDS_H

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

typedef struct shard_set shard_set;

/* Where the stream stands: the next window is window `index` of `epoch`. */
typedef struct data_pos {
    long long epoch, index;
} data_pos;

/* Opens every file matching the glob, checking each header (magic, version,
 * token count against the file size). window = tokens per window (a global
 * batch: global_batch*T + 1), advance = global_batch*T. */
shard_set *shards_open(const char *pattern, long long window, long long advance, bool shuffle, uint64_t seed,
                       tg_err *e);
void shards_close(shard_set *s);

long long shards_windows_per_epoch(const shard_set *s);
int shards_count(const shard_set *s);
long long shards_total_tokens(const shard_set *s);
/* Shard i of the set (in glob order): its path, its header's token count
 * and its size in bytes (header and tokens, as checked when opened). */
void shards_file(const shard_set *s, int i, const char **path, long long *tokens, long long *bytes);

/* Reads the window at pos into out (window int32 tokens), checks every token
 * is below vocab_size, and advances pos. */
int shards_next(shard_set *s, data_pos *pos, int vocab_size, int32_t *out, tg_err *e);

#endif

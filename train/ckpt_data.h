/* The training set a checkpoint's data position refers to: each train
 * shard's name (without its directory), size and header token count, in
 * order, recorded in state.json as "train_data". A resume compares it with
 * the shards data.train matches now, since an added, removed or resized
 * shard moves every window after it: the saved position would then read
 * other tokens. */
#ifndef TRAIN_CKPT_DATA_H
#define TRAIN_CKPT_DATA_H

#include <stddef.h>

#include "data/shards.h"
#include "util/err.h"

struct cJSON *ckpt_data_json(const shard_set *s);

/* 0 when saved (state.json's "train_data") describes s; 1 when not, with
 * what changed in what (for example "added shard 'b.bin'; resized shard
 * 'a.bin' (2000 to 2100 tokens)"); -1 when saved is malformed. */
int ckpt_data_compare(const struct cJSON *saved, const shard_set *s, char *what, size_t what_len, const char *path,
                      tg_err *e);

#endif

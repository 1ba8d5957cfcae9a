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
#include "train/config.h"
#include "util/err.h"

struct cJSON *ckpt_data_json(const shard_set *s);

/* The training set now against the one the saved position refers to
 * (path: the state.json): refused when it changed, unless
 * data.allow_changed (then a warning saying what changed). Nothing to
 * compare when either is missing (NULL). */
int ckpt_data_check(const struct cJSON *saved, const tg_config *c, const shard_set *now, const char *path, tg_err *e);

#endif

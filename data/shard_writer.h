/* The shard writer of ./prepare: a token stream cut into llm.c-format shards
 * (PREFIX_val_000000.bin first, then PREFIX_train_NNNNNN.bin). Every shard is
 * written under a new PATH.tmp.XXXXXX and renamed only by shard_writer_finish,
 * so a run that fails leaves the outputs of an earlier run as they were. */
#ifndef DATA_SHARD_WRITER_H
#define DATA_SHARD_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/err.h"

typedef struct shard_out {
    char final[4096], tmp[4200];
    int64_t count;
} shard_out;

typedef struct shard_writer {
    const char *prefix;
    int64_t val_left, shard_tokens;
    int n_train;
    FILE *f;         /* the last of outs while it is being filled, else NULL */
    int64_t limit;   /* capacity of the open shard */
    shard_out *outs; /* every shard of this run, in order */
    size_t n_outs, cap_outs;
} shard_writer;

/* val_tokens: tokens of the val shard (0: none); shard_tokens: the most in
 * one train shard. */
void shard_writer_init(shard_writer *w, const char *prefix, int64_t val_tokens, int64_t shard_tokens);

/* Appends n tokens (each below 65536) to the stream. */
int shard_writer_push(shard_writer *w, const int32_t *tok, size_t n, tg_err *e);

/* Closes the open shard and gives every shard its final name. */
int shard_writer_finish(shard_writer *w, tg_err *e);

/* Closes and removes every temporary file (after a failure). */
void shard_writer_abort(shard_writer *w);

void shard_writer_free(shard_writer *w);

#endif

/* llm.c's model files (gpt2_*.bin, as llm.c's train_gpt2.py writes and its
 * trainers read): a header of 256 little-endian int32 (magic 20240326,
 * version 3 = float32 or 5 = bf16, max_seq_len, vocab_size, num_layers,
 * num_heads, channels, padded_vocab_size), then every parameter in llm.c's
 * order: wte [Vp, C] (rows past the vocabulary are padding), wpe [maxT, C],
 * then each per-layer kind for all layers (ln1w, ln1b, qkvw, qkvb, attprojw,
 * attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb), then lnfw, lnfb. That is
 * this trainer's kind order (model/gpt.h); but llm.c's linear weights are
 * [out, in], the transpose of the Hugging Face Conv1D [in, out] kept here. */
#ifndef TRAIN_LLMC_H
#define TRAIN_LLMC_H

#include <stdbool.h>

#include "model/gpt.h"
#include "util/err.h"

#define LLMC_MAGIC 20240326

typedef struct llmc_header {
    int version; /* 3: float32, 5: bf16 */
    int max_seq_len, vocab_size, n_layer, n_head, n_embd, padded_vocab;
} llmc_header;

/* True when path is a regular file that opens with llm.c's model magic. */
bool llmc_is_model_file(const char *path);

/* Reads and checks the header, and that the file holds exactly the
 * parameters it describes; errors name the file and the header field. */
int llmc_read_header(const char *path, llmc_header *h, tg_err *e);

/* Weights from an llm.c file into this rank's shard (any TP layout). The
 * header must describe the model's shape; max_seq_len may exceed the
 * context (wpe's first rows are used), as with a Hugging Face wpe. */
int llmc_load_model(const char *path, gpt *g, tg_err *e);

/* Writes the whole model (a TP size 1 shard, holding its master weights:
 * no optimizer shapes it) as a version 3 (float32) file,
 * the vocabulary padded with zero rows to a multiple of vocab_multiple:
 * path.tmp, fsync, renamed into place. Refuses to replace an existing file. */
int llmc_write_model(const char *path, const gpt *g, int vocab_multiple, tg_err *e);

#endif

/* The files around a model: which format a checkpoint path holds, the shape
 * a config that leaves it out takes from the checkpoint the run starts from,
 * the tokenizer files a checkpoint directory carries (so that Hugging Face's
 * AutoTokenizer.from_pretrained and pipeline("text-generation") load it),
 * and --export-llmc. */
#ifndef TRAIN_MODEL_FILES_H
#define TRAIN_MODEL_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include "train/ckpt_digest.h"
#include "train/config.h"
#include "util/err.h"

/* The checkpoint the weights come from: for training, out.dir's newest when
 * out.resume, else model.init_from; for --export-llmc (for_export),
 * model.init_from, else out.dir's newest. Returns 1 with its path, or 0:
 * none (the initial weights of train.seed). */
int model_files_source(const tg_config *c, bool for_export, char *path, size_t n);

/* Fills the shape keys the config and --set left out (config.h) from that
 * checkpoint: its config.json, or an llm.c file's header. A model.init_from
 * that is none of the formats read here is refused, naming them, before any
 * rank starts. */
int model_files_resolve_shape(tg_config *c, bool for_export, tg_err *e);

/* Checks the shape keys the config and --set gave against that checkpoint
 * (for_export: the one the modes read, model.init_from first), so that a
 * misfit is refused with advice before the run is built, not when its
 * tensors are read. */
int model_files_check_shape(const tg_config *c, bool for_export, tg_err *e);

/* Writes vocab.json and merges.txt (data.vocab_dir's encoder.json and
 * vocab.bpe, byte for byte: the same formats), tokenizer_config.json and
 * special_tokens_map.json into a checkpoint directory; nothing when
 * data.vocab_dir lacks the two files. Each file's checksum goes into rec. */
int model_files_write_tokenizer(const char *dir, const tg_config *c, ckpt_files *rec, tg_err *e);

/* Entries of Hugging Face GPT-2 files that are no parameter of the model
 * (with or without "transformer."): the causal-mask buffers
 * h.N.attn.bias and h.N.attn.masked_bias of its n_layer layers, and
 * lm_head.weight, tied to wte. */
bool model_files_hf_extra(const char *name, int n_layer);

/* --export-llmc FILE: builds the whole model on the CPU from its source
 * (above), writes it in llm.c's format (version 3, train/llmc.h) and
 * returns the exit status. */
int model_files_export_llmc(const tg_config *c, const char *path);

#endif

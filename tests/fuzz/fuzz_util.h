/* Shared by the libFuzzer harnesses: the parsers take paths, so each
 * process writes its inputs into a private scratch directory and calls the
 * real entry points on them. */
#ifndef TESTS_FUZZ_FUZZ_UTIL_H
#define TESTS_FUZZ_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpt.h"
#include "train/optim.h"

/* A fresh directory under $TMPDIR (or /tmp), removed at exit; aborts when it
 * cannot be made (no fuzzing without it). */
const char *fuzz_scratch_dir(void);

/* Writes data to dir/name (replacing it) and returns the full path in
 * path; aborts on failure, which would be the harness's fault. */
void fuzz_write(const char *dir, const char *name, const uint8_t *data, size_t size, char *path, size_t path_len);

/* Removes dir/name if present. */
void fuzz_remove(const char *dir, const char *name);

/* GPT-2's tokenizer from assets/vocab (FUZZ_VOCAB_DIR overrides), for the
 * harnesses' LLVMFuzzerInitialize; aborts when it cannot be loaded. */
struct tokenizer *fuzz_load_vocab(void);

/* Reports a broken property of the code under test and aborts, so libFuzzer
 * saves the input as a crash. */
void fuzz_violation(const char *what, const char *detail) __attribute__((noreturn));

/* The oracle for JSON files a loader accepted: the bytes must be exactly
 * one JSON object, with no NUL byte (text after one is never read) and no
 * name twice in any object (which of the two would count?). Returns the
 * parsed object (cJSON_Delete it), or NULL with why in *why. */
struct cJSON *fuzz_json_exact(const uint8_t *data, size_t size, const char **why);

/* The tiny model the checkpoint harnesses load into: 1 layer, 1 head,
 * width 4, vocabulary 8 (padded to 8), context 4 (tests/fuzz/README.md has
 * the tensor shapes). One rank, CPU float32. */
typedef struct fuzz_model {
    tg_config cfg;
    gpt *g;
    optim *o;
} fuzz_model;
void fuzz_model_create(fuzz_model *m);

#endif

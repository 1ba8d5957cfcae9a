/* The checksums of a checkpoint's files: recorded in state.json (written
 * last) as "files": {NAME: {"bytes": N, "xxh3_128": HEX}}, and verified
 * before anything in the directory is used. A damaged file is named with
 * what was expected and found. */
#ifndef TRAIN_CKPT_DIGEST_H
#define TRAIN_CKPT_DIGEST_H

#include <stddef.h>

#include "util/digest.h"
#include "util/err.h"

/* Version 2 records each file's checksum and the training set in
 * state.json; version 1 (neither) still loads, with a warning that its
 * files are unverified. */
#define CKPT_VERSION 2
#define CKPT_VERSION_UNVERIFIED 1

#define CKPT_FILES_MAX 16
#define CKPT_FILE_NAME_MAX 64

typedef struct ckpt_file_record {
    char name[CKPT_FILE_NAME_MAX];
    long long bytes;
    char digest[DIGEST_HEX_LEN];
} ckpt_file_record;

/* What a save wrote, file by file, in the order written. */
typedef struct ckpt_files {
    ckpt_file_record rec[CKPT_FILES_MAX];
    int n;
} ckpt_files;

void ckpt_files_add(ckpt_files *f, const char *name, long long bytes, const char digest[DIGEST_HEX_LEN]);
/* A small file recorded from the bytes it was written from (no read back). */
void ckpt_files_add_bytes(ckpt_files *f, const char *name, const void *data, size_t len);

/* state.json's "files" object. */
struct cJSON *ckpt_files_json(const ckpt_files *f);

/* Checks every file state.json's "files" lists in dir (size, then digest),
 * and that it lists the files a load reads (model.safetensors,
 * optimizer.safetensors, config.json). state_path names state.json in
 * messages. */
int ckpt_files_verify(const char *dir, const struct cJSON *files, const char *state_path, tg_err *e);

/* A train_gpt checkpoint (a directory holding state.json; a Hugging Face
 * one holds none) has every file checked against the checksums state.json
 * records before anything in it is read (version 1: a warning instead). */
int ckpt_files_verify_dir(const char *dir, tg_err *e);

/* The version of a parsed state.json: CKPT_VERSION or CKPT_VERSION_UNVERIFIED. */
int ckpt_state_version(const struct cJSON *j, const char *path, long long *version, tg_err *e);

#endif

/* The safetensors format: 8-byte little-endian header length, a JSON header
 * mapping names to {dtype, shape, data_offsets}, then the raw data. */
#ifndef TRAIN_SAFETENSORS_H
#define TRAIN_SAFETENSORS_H

#include <stddef.h>
#include <stdio.h>

#include "util/digest.h"
#include "util/err.h"

#define ST_MAX_DIMS 4

typedef struct st_entry {
    const char *name;
    int ndim;
    long long shape[ST_MAX_DIMS];
} st_entry;

/* Writes float32 tensors one at a time, so a checkpoint never needs the
 * whole model in host memory: the header first, then st_writer_put for each
 * entry in order; close flushes and fsyncs (the caller renames the file
 * into place). */
typedef struct st_writer st_writer;
st_writer *st_writer_open(const char *path, const st_entry *entries, int n, tg_err *e);
int st_writer_put(st_writer *w, const float *data, tg_err *e);
/* The digest and size of what was written so far (the whole file once every
 * tensor is put): hashed as written, so a save never reads its file back. */
void st_writer_digest(const st_writer *w, char hex[DIGEST_HEX_LEN], long long *bytes);
int st_writer_close(st_writer *w, tg_err *e);

typedef struct st_tensor {
    char name[128];
    char dtype[8];
    int ndim;
    long long shape[ST_MAX_DIMS];
    long long begin, end; /* byte offsets into the data section */
} st_tensor;

typedef struct st_file {
    char path[1024];
    FILE *f;
    long long data_start;
    int n;
    st_tensor *tensors;
} st_file;

/* Opens a regular file for reading (refusing a FIFO, directory or device
 * without blocking on it); errors name the path. */
FILE *open_regular(const char *path, tg_err *e);

/* Checks the header (each entry, and data_offsets that tile the data
 * section exactly: sorted by begin, the first at 0, each where the previous
 * ends, the last at its end), naming the file and tensors on refusal. */
st_file *safetensors_open(const char *path, tg_err *e);
void safetensors_close(st_file *s);
const st_tensor *safetensors_find(const st_file *s, const char *name);
/* Reads a tensor as float32, converting from F16 or BF16. */
int safetensors_read_f32(st_file *s, const st_tensor *t, float *out, tg_err *e);
long long st_numel(const st_tensor *t);

#endif

/* JSON Lines for ./prepare: one JSON object per line (RFC 8259), from which
 * one top-level string field is taken as a document. Its own small parser
 * rather than cJSON, because a document may hold "\u0000", which a
 * NUL-terminated string would cut short. */
#ifndef DATA_JSONL_H
#define DATA_JSONL_H

#include <stddef.h>

#include "util/err.h"

/* A growable byte buffer; start with {0} and free(data) when done. */
typedef struct jsonl_buf {
    char *data;
    size_t len, cap;
} jsonl_buf;

/* Parses line[0..len) (without its newline) as one JSON object and decodes
 * the string value of its top-level key `field` into out (the last one when
 * the key repeats, as Python's json and JavaScript's JSON.parse do). Sets
 * *found to whether the key is there. Returns 0, or -1 with e filled: "column
 * N: what is wrong" (N counts bytes from 1), also when the value is not a
 * string or a \u escape is a lone UTF-16 surrogate. Bytes of 0x80 and above
 * are copied as they are (the tokenizer checks the UTF-8). */
int jsonl_string_field(const char *line, size_t len, const char *field, jsonl_buf *out, int *found,
                       tg_err *e);

#endif

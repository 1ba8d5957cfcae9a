/* Where ./prepare's documents come from: files named on the command line,
 * lists of files (--inputs-from, one path a line), standard input ("-"), and
 * with --jsonl-field FIELD every one of those read as JSON Lines (each line an
 * object whose FIELD is one document). The source hands the documents out in
 * input order; a whole file is read later by whichever thread encodes it. */
#ifndef DATA_PREPARE_INPUTS_H
#define DATA_PREPARE_INPUTS_H

#include <stddef.h>
#include <stdio.h>

#include "data/jsonl.h"
#include "util/err.h"

typedef enum { PREP_INPUT_FILE, PREP_INPUT_LIST } prep_input_kind;

/* One --input or --inputs-from of the command line, in order. */
typedef struct prep_input {
    prep_input_kind kind;
    const char *path; /* "-": standard input */
} prep_input;

/* One document. Every pointer is owned (prep_doc_free). */
typedef struct prep_doc {
    char *path;       /* the file to read it from (prep_doc_read), or NULL: text holds it */
    char *text;       /* its bytes, once read */
    size_t len;
    size_t size_hint; /* its size as the file system tells it before reading */
    char *label;      /* what messages call it: the path, "stdin", "FILE line N" */
    char *origin;     /* NULL, or "LIST line N" for a file named in a list */
    int on_command_line; /* a file named by --input (it gets its own line of output) */
} prep_doc;

typedef struct prep_source {
    const prep_input *inputs;
    int n_inputs, next_input;
    const char *jsonl_field; /* NULL: every file is one document */
    FILE *list;              /* the list being read, if any */
    const char *list_path;
    long list_line;
    FILE *jsonl;             /* the JSON Lines file being read, if any */
    char *jsonl_path;
    long jsonl_line;
    char *line;              /* getline's buffer */
    size_t line_cap;
    jsonl_buf field;         /* the decoded document of the current line */
} prep_source;

void prep_source_init(prep_source *s, const prep_input *inputs, int n_inputs, const char *jsonl_field);

/* The next document into *d (zeroed first): returns 1, 0 when there are no
 * more, or -1 with e filled (naming the file, and the line for lists and
 * JSON Lines). */
int prep_source_next(prep_source *s, prep_doc *d, tg_err *e);

void prep_source_close(prep_source *s);

/* Reads d->path into d->text (safe to call from several threads on
 * different documents). */
int prep_doc_read(prep_doc *d, tg_err *e);

void prep_doc_free(prep_doc *d);

/* The whole of the file at path ("-": standard input) in a malloc'd buffer. */
int prep_read_whole(const char *path, char **buf, size_t *len, tg_err *e);

#endif

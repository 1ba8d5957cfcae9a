/* log.jsonl: one JSON object per line, always valid JSON (a value that is
 * not finite is written as null), and after a resume holding each step once. */
#ifndef TRAIN_RUNLOG_H
#define TRAIN_RUNLOG_H

#include <stdbool.h>
#include <stdio.h>

#include "util/err.h"

/* One line being written: jsonl_open, then members, then jsonl_close. The
 * members gather in memory (text) and reach f's file in one write at the
 * close, so that a failed write can be cut back whole. */
typedef struct jsonl_line {
    FILE *f;
    char *text;
    size_t len, cap;
    int members;
} jsonl_line;

/* Begins a line with "time": wall-clock Unix seconds with milliseconds.
 * f is only written through jsonl_close (its descriptor, O_APPEND). */
jsonl_line jsonl_open(FILE *f);
/* A number printed with fmt (e.g. "%.7g"), or null when it is not finite. */
void jsonl_num(jsonl_line *l, const char *key, const char *fmt, double v);
void jsonl_int(jsonl_line *l, const char *key, long long v);
void jsonl_uint(jsonl_line *l, const char *key, unsigned long long v);
void jsonl_bool(jsonl_line *l, const char *key, bool v);
/* A string, escaped as JSON requires (paths may hold any byte). */
void jsonl_str(jsonl_line *l, const char *key, const char *v);
/* An already-formatted JSON value (an object or array the caller built). */
void jsonl_raw(jsonl_line *l, const char *key, const char *json);
/* Ends the line and writes it to the file, so a crash loses at most this
 * line. Returns 0, or -1 with e saying why (ENOSPC, EFBIG, EIO...) after
 * cutting the file back to where the line began: a torn line never stays. */
int jsonl_close(jsonl_line *l, tg_err *e);

/* A resume from the checkpoint of `step`: drops the lines of later steps
 * (written by the run that died after that checkpoint) and any torn last
 * line, rewriting the file atomically. A missing file is fine. */
int runlog_truncate_after(const char *path, int step, tg_err *e);

#endif

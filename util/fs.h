/* File-system helpers that never go through a shell: a path may hold any
 * byte a file name can (quotes, spaces, $(), backticks, newlines). */
#ifndef UTIL_FS_H
#define UTIL_FS_H

#include "util/err.h"

/* mkdir -p: creates path and its missing parents (mode 0755). Fails, naming
 * the component, when one exists and is not a directory. */
int fs_mkdir_p(const char *path, tg_err *e);

/* Writes text to path atomically: path.tmp, fsync, rename over path. */
int fs_write_atomic(const char *path, const char *text, size_t len, tg_err *e);

#endif

/* File-system helpers that never go through a shell: a path may hold any
 * byte a file name can (quotes, spaces, $(), backticks, newlines).
 * What this program writes is created new (O_CREAT|O_EXCL|O_NOFOLLOW), so
 * no planted link or file of the user's is ever opened, followed or
 * replaced; temporary names are unique, and cleanup removes only the files
 * it was told it made. */
#ifndef UTIL_FS_H
#define UTIL_FS_H

#include <stdbool.h>
#include <stdio.h>

#include "util/err.h"

/* mkdir -p: creates path and its missing parents (mode 0755). Fails, naming
 * the component, when one exists and is not a directory. */
int fs_mkdir_p(const char *path, tg_err *e);

/* Writes text to path atomically: a unique temporary file beside it
 * (fs_create_temp), fsync, rename over path. */
int fs_write_atomic(const char *path, const char *text, size_t len, tg_err *e);

/* path opened for writing as a new regular file (mode 0666 less the umask):
 * fails (NULL, errno EEXIST) when anything, a link included, is there. */
FILE *fs_create_excl(const char *path);

/* A new, empty file beside target, named TARGET.tmp.XXXXXX (6 characters
 * chosen until the name is free), created as fs_create_excl does; its name
 * goes into tmp (tmp_len bytes). NULL with e set on failure. */
FILE *fs_create_temp(const char *target, char *tmp, size_t tmp_len, tg_err *e);

/* A new directory (mode 0755 less the umask) beside target, named as
 * fs_create_temp names a file. */
int fs_mkdir_temp(const char *target, char *tmp, size_t tmp_len, tg_err *e);

/* Removes directory dir and its files, when it holds nothing but regular
 * files whose names are among names[0..n_names). Never follows a link:
 * dir itself a link, or holding a link, a subdirectory or another name, is
 * refused whole (nothing removed) with a message naming what is in the way.
 * A dir that does not exist is 0. */
int fs_remove_owned_dir(const char *dir, const char *const *names, size_t n_names, tg_err *e);

/* An advisory lock (flock, exclusive) on path, created if missing, held
 * until fs_unlock or the process's end; the file records "PID HOST" of the
 * holder. 0 when taken; 1 when another process holds it (refused at once,
 * e naming the holder's pid and host); -1 on another failure. */
typedef struct fs_lock {
    int fd;
    bool held;
} fs_lock;
int fs_lock_take(const char *path, fs_lock *lock, tg_err *e);
void fs_unlock(fs_lock *lock);

#endif

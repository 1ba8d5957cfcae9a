/* Error reporting without global state: a failing function writes one human
 * sentence (naming the file and the field) into a caller-owned tg_err and
 * returns -1. Callers either add context and pass it up, or print and exit. */
#ifndef UTIL_ERR_H
#define UTIL_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_err {
    char msg[1024];
} tg_err;

/* Formats the message into e (if non-NULL) and returns -1, so that
 * `return tg_fail(e, "...", ...);` reads as one line. */
int tg_fail(tg_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes the existing message with more context ("while loading X: ..."). */
int tg_wrap(tg_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "prog: error: msg" to stderr and exits with status 1. Both flush
 * stdout first, so a message never jumps ahead of output printed before it. */
void tg_die(const char *prog, const tg_err *e) __attribute__((noreturn));
/* Prints "prog: warning: msg" to stderr and goes on. */
void tg_warn(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Allocation that aborts with a message naming what was being allocated. */
void *tg_malloc(size_t bytes, const char *what);
void *tg_calloc(size_t n, size_t size, const char *what);
void *tg_realloc(void *p, size_t bytes, const char *what);

#ifdef __cplusplus
}
#endif

#endif

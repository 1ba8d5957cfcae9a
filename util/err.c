#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tg_fail(tg_err *e, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int tg_wrap(tg_err *e, const char *fmt, ...) {
    if (!e) return -1;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[sizeof e->msg];
    memcpy(old, e->msg, sizeof old);
    snprintf(e->msg, sizeof e->msg, "%.500s: %.500s", prefix, old);
    return -1;
}

void tg_die(const char *prog, const tg_err *e) {
    fflush(stdout); /* the error comes after what the run already said, pipe or terminal */
    fprintf(stderr, "%s: error: %s\n", prog, e ? e->msg : "unknown error");
    exit(1);
}

void tg_warn(const char *prog, const char *fmt, ...) {
    fflush(stdout);
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: warning: %s\n", prog, msg);
}

void *tg_malloc(size_t bytes, const char *what) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fflush(stdout);
        fprintf(stderr, "error: out of memory allocating %zu bytes for %s\n", bytes, what);
        exit(1);
    }
    return p;
}

void *tg_calloc(size_t n, size_t size, const char *what) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fflush(stdout);
        fprintf(stderr, "error: out of memory allocating %zu x %zu bytes for %s\n", n, size, what);
        exit(1);
    }
    return p;
}

void *tg_realloc(void *p, size_t bytes, const char *what) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) {
        fflush(stdout);
        fprintf(stderr, "error: out of memory allocating %zu bytes for %s\n", bytes, what);
        exit(1);
    }
    return q;
}

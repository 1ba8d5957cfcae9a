/* The line a C test prints for each check, as tests/run.sh counts them:
 * "ok NAME", or "not ok NAME - WHY", which also sets *failed. */
#ifndef TESTS_TAP_H
#define TESTS_TAP_H

#include <stdio.h>

/* The line alone, flushed (a test killed by its clock, as a GPU sitting
 * stops one that hangs, still leaves every line before); returns 1 when
 * the check failed (for tests that OR the results of their checks
 * together). */
static inline int tap_result(int pass, const char *name, const char *why) {
    if (pass) printf("ok %s\n", name);
    else printf("not ok %s - %s\n", name, why);
    fflush(stdout);
    return !pass;
}

static inline void tap_check(int *failed, const char *name, int pass, const char *why) {
    if (tap_result(pass, name, why)) *failed = 1;
}

#endif

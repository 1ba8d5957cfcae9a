/* The line a C test prints for each check, as tests/run.sh counts them:
 * "ok NAME", or "not ok NAME - WHY", which also sets *failed. */
#ifndef TESTS_TAP_H
#define TESTS_TAP_H

#include <stdio.h>

static inline void tap_check(int *failed, const char *name, int pass, const char *why) {
    if (pass) {
        printf("ok %s\n", name);
    } else {
        printf("not ok %s - %s\n", name, why);
        *failed = 1;
    }
}

#endif

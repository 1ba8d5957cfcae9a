/* Shared by the communicator tests that run the same collectives in several
 * modes (blocking, non-blocking, grouped, ...): the byte accounting of every
 * mode must equal the blocking calls' (mode 0). */
#ifndef TESTS_COMM_MODES_H
#define TESTS_COMM_MODES_H

#include <stdint.h>
#include <stdio.h>

#include "parallel/comm.h"

/* sent[m][k]: the bytes mode m counted for collective kind k. 0 when every
 * mode counted what mode 0 did; else 1, with why naming the first
 * difference (n: the test's element count, for the message). */
static inline int comm_modes_sent_differ(int modes, uint64_t (*sent)[COLL_KINDS], const char *const *mode_names,
                                         size_t n, char *why, size_t cap) {
    for (int m = 1; m < modes; m++)
        for (int k = 0; k < COLL_KINDS; k++)
            if (sent[0][k] != sent[m][k]) {
                snprintf(why, cap, "n=%zu: %s: %llu bytes counted %s, %llu blocking", n, comm_kind_name((coll_kind)k),
                         (unsigned long long)sent[m][k], mode_names[m], (unsigned long long)sent[0][k]);
                return 1;
            }
    return 0;
}

#endif

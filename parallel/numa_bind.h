/* Places a rank's threads and memory on one NUMA node (libnuma). */
#ifndef PARALLEL_NUMA_BIND_H
#define PARALLEL_NUMA_BIND_H

#include <stddef.h>

/* mode "auto": bind local rank r to node r % nodes when the machine has
 * more than one node; "off": nothing. Writes what it did into msg. */
void numa_bind_rank(const char *mode, int local_rank, char *msg, size_t msg_len);

#endif

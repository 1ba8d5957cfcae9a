#include "parallel/numa_bind.h"

#include <numa.h>
#include <stdio.h>
#include <string.h>

void numa_bind_rank(const char *mode, int local_rank, char *msg, size_t msg_len) {
    if (strcmp(mode, "off") == 0) {
        snprintf(msg, msg_len, "numa: off (parallel.numa)");
        return;
    }
    if (numa_available() < 0) {
        snprintf(msg, msg_len, "numa: this kernel offers no NUMA support; binding is a no-op");
        return;
    }
    int nodes = numa_num_configured_nodes();
    if (nodes <= 1) {
        snprintf(msg, msg_len, "numa: one NUMA node; binding is a no-op");
        return;
    }
    int node = local_rank % nodes;
    numa_run_on_node(node);
    numa_set_preferred(node);
    snprintf(msg, msg_len, "numa: %d nodes; local rank r runs on node r %% %d", nodes, nodes);
}

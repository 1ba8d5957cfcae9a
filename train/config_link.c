/* The modeled links of projected runs and --plan (train/config.h): the
 * link inside a node (interconnect.bus_gbps and latency_us, or an
 * nccl-tests table), and the network a group crosses when its ranks are on
 * more than one node (interconnect.node_*). */
#include "train/config.h"

int config_link(const tg_config *c, comm_link *l, tg_err *e) {
    *l = comm_link_flat(c->interconnect.bus_gbps * 1e9, c->interconnect.latency_us * 1e-6);
    if (!c->interconnect.table[0]) return 0;
    if (comm_link_load(l, c->interconnect.table, e)) {
        char where[CFG_PATH_MAX + 64];
        return tg_wrap(e, "%s", config_key_named(c, "interconnect.table", where, sizeof where));
    }
    return 0;
}

bool config_group_crosses_nodes(const tg_config *c, bool dp_group, int tp, int dp) {
    const int per_node = c->interconnect.node_gpus;
    const long long world = (long long)tp * dp;
    if (per_node == 0 || world <= per_node) return false;
    if (dp_group) return dp > 1; /* its ranks are tp apart and span the world */
    return tp > per_node || per_node % tp != 0; /* adjacent ranks: some group straddles a node's end */
}

int config_group_link(const tg_config *c, bool dp_group, int tp, int dp, comm_link *l, tg_err *e) {
    if (config_link(c, l, e)) return -1;
    if (!config_group_crosses_nodes(c, dp_group, tp, dp)) return 0;
    /* The groups that cross one node's network at once share it: a node holds one rank of each of
     * min(tp, node_gpus) DP groups; a TP group wider than a node has the node to itself. */
    const int per_node = c->interconnect.node_gpus;
    const int sharing = dp_group ? (tp < per_node ? tp : per_node) : 1;
    double bus = c->interconnect.node_gbps * 1e9 / sharing;
    if (bus > c->interconnect.bus_gbps * 1e9) bus = c->interconnect.bus_gbps * 1e9;
    *l = comm_link_flat(bus, c->interconnect.node_latency_us * 1e-6);
    return 0;
}

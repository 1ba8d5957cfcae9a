/* comm_nccl_create in a build without NCCL (no make GPU=1). */
#include "parallel/comm.h"

comm *comm_nccl_create(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index,
                       const comm_memory *mem, double timeout_s, tg_err *e) {
    (void)bs; (void)group_ranks; (void)group_size; (void)my_index; (void)mem; (void)timeout_s;
    tg_fail(e, "communicator %s: this train_gpt was built without NCCL: rebuild with make GPU=1", name);
    return NULL;
}

comm *comm_nccl_create_at_size_1(bootstrap *bs, const char *name, const int *group_ranks, int group_size, int my_index,
                                 const comm_memory *mem, double timeout_s, tg_err *e) {
    return comm_nccl_create(bs, name, group_ranks, group_size, my_index, mem, timeout_s, e);
}

/* What every build has of the backends: destruction, and in a build
 * without CUDA (no make GPU=1) the answer that CUDA is missing. */
#include "model/ops.h"

void ops_destroy(const tg_ops *o) {
    if (o && o->destroy) o->destroy((tg_ops *)o);
}

#ifndef TG_CUDA
int ops_cuda_compiled(void) { return 0; }

int ops_cuda_device_count(void) { return 0; }

tg_ops *ops_cuda_create(int device, tg_dtype act, tg_err *e) {
    (void)device;
    (void)act;
    tg_fail(e, "this train_gpt was built without CUDA: rebuild with make GPU=1");
    return NULL;
}
#endif

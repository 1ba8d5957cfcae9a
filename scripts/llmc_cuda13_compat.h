/* Force-included (nvcc -include, through NVCC_APPEND_FLAGS) by scripts/build_llmc.sh
 * when it builds llm.c, which the user's source is never edited for. CUDA 13 changed
 * cudaMemAdvise's last argument from a device number to a cudaMemLocation; llm.c
 * (its out-of-memory fallback to managed memory, llmc/cuda_utils.cuh) still passes the
 * number. This overload takes the number and forwards it; below CUDA 13 it is absent.
 * Nothing else changes: the fallback is never taken when the model fits. */
#include <cuda_runtime.h>
#if defined(__cplusplus) && CUDART_VERSION >= 13000
static inline cudaError_t cudaMemAdvise(const void *ptr, size_t bytes, cudaMemoryAdvise advice, int device) {
    cudaMemLocation where;
    where.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    where.id = device == cudaCpuDeviceId ? 0 : device;
    return cudaMemAdvise(ptr, bytes, advice, where);
}
#endif

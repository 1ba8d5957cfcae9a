/* Whether the machine code the device runs has sm_90a's features (wgmma,
 * setmaxnreg, the bulk tensor copies), which the Hopper attention kernels
 * need: compiled without them, their bodies are a trap. Compute capability
 * 9.0 does not say so. A build for sm_90 (CUDA_SM=90) has plain sm_90
 * code, and a device may run compute_80's PTX, compiled by its driver;
 * only the compiler of the code that runs knows which it built, so a kernel
 * of this build answers. Asked once, when the backend opens. */
#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"

namespace {

__global__ void sm90a_probe_kernel(int *has) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *has = 1;
#elif defined(EMU_CUDA_EMU_H)
    *has = ::emu::sm90a_code() ? 1 : 0;
#else
    *has = 0;
#endif
}

} // namespace

cudaError_t cuda_sm90a_code(cudaStream_t stream, int *has) {
    *has = 0;
    int *flag = NULL;
    cudaError_t err = cudaMalloc((void **)&flag, sizeof *flag);
    if (err != cudaSuccess) return err;
    sm90a_probe_kernel<<<1, 1, 0, stream>>>(flag);
    err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaMemcpyAsync(has, flag, sizeof *has, cudaMemcpyDeviceToHost, stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    const cudaError_t freed = cudaFree(flag);
    return err != cudaSuccess ? err : freed;
}

// Kernel launches with optional programmatic dependent launch (PDL, sm_90).
//
// Why: in the actor's graph every kernel node waits for the previous one to
// finish before the device even starts launching it, ~1-2 µs per node at
// these sizes. With PDL the next grid is launched while the previous one
// runs, and waits on the device instead, so only the wait remains.
//
// Contract that makes it safe: every kernel launched through launch_kernel
// calls pdl_enter() before its first global-memory access.
// griddepcontrol.wait returns once the preceding grid has completed and its
// writes are visible (immediately when the launch had no PDL dependency), and
// only then does the kernel allow its own dependents to launch, so at most
// two grids are resident at once and the chain is transitive.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

__device__ __forceinline__ void pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when
// pdl is set, and the launch checked.
template <class... Params, class... Args>
void launch_kernel(bool pdl, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  MAMBARL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...));
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda

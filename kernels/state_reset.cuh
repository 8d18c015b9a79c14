// Per-env reset of the recurrent state outside a step (CpuActor::reset's
// twin): rows b with mask[b] != 0 of a (B, row) array become zero. Every
// state component resets to zero (policy/mixer.hpp), so this needs no mixer
// knowledge. Inside a step, episode_start is handled by the step kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mambarl::cuda {

//   mask (B) on the device, data (B, row)
void zero_masked_rows(int B, size_t row, const uint8_t* mask, float* data, cudaStream_t stream);

}  // namespace mambarl::cuda

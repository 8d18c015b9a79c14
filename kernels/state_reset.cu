#include "kernels/state_reset.cuh"

#include <algorithm>

#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocksPerRow = 64;

// grid (B, blocks per row): a block never straddles two envs, so the mask is
// one broadcast load and untouched envs are not read or written at all.
__global__ void zero_masked_rows_kernel(size_t row, const uint8_t* __restrict__ mask,
                                        float* __restrict__ data) {
  if (!mask[blockIdx.x]) return;
  float* r = data + static_cast<size_t>(blockIdx.x) * row;
  for (size_t i = static_cast<size_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < row;
       i += static_cast<size_t>(gridDim.y) * blockDim.x)
    r[i] = 0.f;
}

}  // namespace

void zero_masked_rows(int B, size_t row, const uint8_t* mask, float* data, cudaStream_t stream) {
  MAMBARL_CHECK(B > 0, "zero_masked_rows: batch must be positive, got " << B);
  if (row == 0) return;
  const size_t per_row = std::min((row + kThreads - 1) / kThreads, kMaxBlocksPerRow);
  zero_masked_rows_kernel<<<dim3(static_cast<unsigned>(B), static_cast<unsigned>(per_row)),
                            kThreads, 0, stream>>>(row, mask, data);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda

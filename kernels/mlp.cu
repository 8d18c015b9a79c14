#include <cstddef>

#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/mlp.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void bias_silu_kernel(size_t total, int E, float* __restrict__ pre, const float* __restrict__ b,
                                 float* __restrict__ act) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const float v = pre[i] + b[i % E];
  pre[i] = v;
  act[i] = v * sigmoidf_ref(v);
}

__global__ void silu_backward_kernel(size_t total, const float* __restrict__ pre, float* __restrict__ d) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const float v = pre[i], s = sigmoidf_ref(v);
  d[i] *= s * (1.f + v * (1.f - s));
}

unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

void mlp_bias_silu(int M, int E, float* pre, const float* b, float* act, cudaStream_t stream) {
  MAMBARL_CHECK(M > 0 && E > 0, "mlp_bias_silu: sizes must be positive (M " << M << ", E " << E << ")");
  const size_t total = static_cast<size_t>(M) * E;
  bias_silu_kernel<<<blocks_for(total), kThreads, 0, stream>>>(total, E, pre, b, act);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void mlp_silu_backward(int M, int E, const float* pre, float* d, cudaStream_t stream) {
  MAMBARL_CHECK(M > 0 && E > 0, "mlp_silu_backward: sizes must be positive (M " << M << ", E " << E << ")");
  const size_t total = static_cast<size_t>(M) * E;
  silu_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(total, pre, d);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda

#include <cstddef>

#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/launch.cuh"
#include "kernels/mlp.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kStepThreads = 128;  // mlp_step: one block per env

__device__ __forceinline__ float silu(float v) { return v * sigmoidf_ref(v); }

__global__ void bias_silu_kernel(size_t total, int E, float* __restrict__ pre, const float* __restrict__ b,
                                 float* __restrict__ act) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const float v = pre[i] + b[i % E];
  pre[i] = v;
  act[i] = silu(v);
}

__global__ void silu_backward_kernel(size_t total, const float* __restrict__ pre, float* __restrict__ d) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const float v = pre[i], s = sigmoidf_ref(v);
  d[i] *= s * (1.f + v * (1.f - s));
}

__global__ void __launch_bounds__(kStepThreads)
    step_kernel(int D, int E, StepFlags flags, const float* __restrict__ pre, const float* __restrict__ b1,
                const float* __restrict__ b2, float* __restrict__ act, float* __restrict__ h) {
  pdl_enter();
  const int b = blockIdx.x;
  float* a = act + static_cast<size_t>(b) * E;
  if (flags.skip(b)) {  // the whole block is one env
    for (int e = threadIdx.x; e < E; e += blockDim.x) a[e] = 0.f;
    return;
  }
  __shared__ float red[32];
  float* hb = h + static_cast<size_t>(b) * D;
  // Every thread has read h before block_rms_inv returns (it syncs), so the writes below are safe.
  const float r = block_rms_inv(hb, D, red);
  const float* p = pre + static_cast<size_t>(b) * E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) a[e] = silu(r * p[e] + b1[e]);
  for (int j = threadIdx.x; j < D; j += blockDim.x) hb[j] += b2[j];
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

void mlp_step(int B, int D, int E, StepFlags flags, const float* pre, const float* b1, const float* b2,
              float* act, float* h, cudaStream_t stream, bool pdl) {
  MAMBARL_CHECK(B > 0 && D > 0 && E > 0,
                "mlp_step: sizes must be positive (B " << B << ", D " << D << ", E " << E << ")");
  launch_kernel(pdl, step_kernel, static_cast<unsigned>(B), kStepThreads, 0, stream, D, E, flags, pre, b1, b2,
                act, h);
}

}  // namespace mambarl::cuda

#include "kernels/base/check.hpp"
#include "kernels/cuda_check.cuh"
#include "kernels/loss_scale.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void scale_by_kernel(size_t n, const float* __restrict__ s, bool inverse, float* __restrict__ x) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  x[i] = inverse ? x[i] / *s : x[i] * *s;
}

__global__ void loss_scale_update_kernel(LossScale* st, const int* loss_not_finite,
                                         const int* grad_not_finite) {
  st->used = st->scale;
  if (*loss_not_finite) return;
  if (*grad_not_finite) {
    st->scale = fmaxf(st->scale * 0.5f, kLossScaleMin);
    st->good_steps = 0;
    return;
  }
  if (++st->good_steps >= st->growth_interval) {
    st->scale *= 2.f;
    st->good_steps = 0;
  }
}

}  // namespace

void scale_by(size_t n, const float* s, bool inverse, float* x, cudaStream_t stream) {
  MAMBARL_CHECK(n > 0, "scale_by: n must be positive");
  scale_by_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(n, s,
                                                                                                 inverse, x);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void loss_scale_update(LossScale* state, const int* loss_not_finite, const int* grad_not_finite,
                       cudaStream_t stream) {
  loss_scale_update_kernel<<<1, 1, 0, stream>>>(state, loss_not_finite, grad_not_finite);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda

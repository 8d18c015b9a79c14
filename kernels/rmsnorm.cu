#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/rmsnorm.cuh"

namespace mambarl::cuda {

namespace {

// d_model is 16..1024 in practice: 128 threads cover a row in one or a few strides.
constexpr int kThreads = 128;

__global__ void rmsnorm_forward_kernel(int n, const float* __restrict__ X, const float* __restrict__ w,
                                       float* __restrict__ Y, float* __restrict__ rstd) {
  __shared__ float scratch[32];
  const size_t row = blockIdx.x;
  const float* x = X + row * n;
  const float r = block_rms_inv(x, n, scratch);
  float* y = Y + row * n;
  // Same association as the CPU: (x * w) * r.
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i] * w[i] * r;
  if (threadIdx.x == 0) rstd[row] = r;
}

__global__ void rmsnorm_backward_kernel(int n, const float* __restrict__ X, const float* __restrict__ w,
                                        const float* __restrict__ rstd, const float* __restrict__ dY,
                                        float* __restrict__ dX, bool accumulate,
                                        float* __restrict__ dw_terms) {
  __shared__ float scratch[32];
  const size_t row = blockIdx.x;
  const float* x = X + row * n;
  const float* dy = dY + row * n;
  const float r = rstd[row];
  float dot = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) dot += x[i] * (dy[i] * w[i]);
  dot = block_sum(dot, scratch);
  const float c = r * r * r * dot / static_cast<float>(n);
  float* dx = dX + row * n;
  float* dwt = dw_terms + row * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float g = dy[i] * w[i];
    const float v = r * g - x[i] * c;
    dx[i] = accumulate ? dx[i] + v : v;
    dwt[i] = dy[i] * x[i] * r;
  }
}

}  // namespace

void rmsnorm_forward(int M, int n, const float* X, const float* w, float* Y, float* rstd,
                     cudaStream_t stream) {
  MAMBARL_CHECK(M > 0 && n > 0, "rmsnorm_forward: sizes must be positive (M " << M << ", n " << n << ")");
  rmsnorm_forward_kernel<<<M, kThreads, 0, stream>>>(n, X, w, Y, rstd);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void rmsnorm_backward(int M, int n, const float* X, const float* w, const float* rstd, const float* dY,
                      float* dX, bool accumulate, float* dw_terms, cudaStream_t stream) {
  MAMBARL_CHECK(M > 0 && n > 0, "rmsnorm_backward: sizes must be positive (M " << M << ", n " << n << ")");
  rmsnorm_backward_kernel<<<M, kThreads, 0, stream>>>(n, X, w, rstd, dY, dX, accumulate, dw_terms);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda

#include "kernels/linear.cuh"

#include <cstddef>

#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(size_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

__global__ void linear_small_kernel(int M, int in, int out, const float* __restrict__ X,
                                    const float* __restrict__ W, const float* __restrict__ b,
                                    float* __restrict__ Y) {
  const size_t idx = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<size_t>(M) * out) return;
  const int m = static_cast<int>(idx / out), o = static_cast<int>(idx % out);
  const float* x = X + static_cast<size_t>(m) * in;
  const float* wr = W + static_cast<size_t>(o) * in;
  float acc = 0.f;
  for (int i = 0; i < in; ++i) acc += __ldg(wr + i) * x[i];
  Y[idx] = acc + __ldg(b + o);
}

__global__ void fold_norm_kernel(int rows, int cols, const float* __restrict__ W,
                                 const float* __restrict__ w, float* __restrict__ out) {
  const size_t idx = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<size_t>(rows) * cols) return;
  out[idx] = W[idx] * w[idx % cols];
}

}  // namespace

void gemm_rows(cublasHandle_t handle, int M, int in, int out, const float* X, const float* W,
               float beta, float* Y) {
  MAMBARL_CHECK(M > 0 && in > 0 && out > 0,
                "gemm_rows: sizes must be positive (M " << M << ", in " << in << ", out " << out << ")");
  // Column-major view: Y^T (out, M) = W (as (in, out) col-major)^T · X^T (in, M).
  const float alpha = 1.f;
  MAMBARL_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, M, in, &alpha, W, in, X,
                                   in, &beta, Y, out));
}

void linear_small(int M, int in, int out, const float* X, const float* W, const float* b, float* Y,
                  cudaStream_t stream) {
  MAMBARL_CHECK(M > 0 && in > 0 && out > 0, "linear_small: sizes must be positive");
  linear_small_kernel<<<blocks_for(static_cast<size_t>(M) * out), kThreads, 0, stream>>>(M, in, out,
                                                                                        X, W, b, Y);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void fold_norm(int rows, int cols, const float* W, const float* w, float* out, cudaStream_t stream) {
  MAMBARL_CHECK(rows > 0 && cols > 0, "fold_norm: sizes must be positive");
  fold_norm_kernel<<<blocks_for(static_cast<size_t>(rows) * cols), kThreads, 0, stream>>>(rows, cols,
                                                                                         W, w, out);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda

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

void gemm(cublasHandle_t handle, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
          const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  MAMBARL_CHECK(M > 0 && N > 0 && K > 0,
                "gemm: sizes must be positive (M " << M << ", N " << N << ", K " << K << ")");
  MAMBARL_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N,
                "gemm: a leading dimension is smaller than its row (lda " << lda << ", ldb " << ldb
                                                                          << ", ldc " << ldc << ")");
  // A row-major matrix is its transpose in column-major order with the same
  // leading dimension, so row-major C = op(A) op(B) is column-major
  // C^T = op(B)^T op(A)^T: swap the operands, keep each one's own op.
  MAMBARL_CUBLAS_CHECK(cublasSgemm(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb, A,
                                   lda, &beta, C, ldc));
}

void gemm_rows(cublasHandle_t handle, int M, int in, int out, const float* X, const float* W,
               float beta, float* Y) {
  gemm(handle, false, true, M, out, in, 1.f, X, in, W, in, beta, Y, out);
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

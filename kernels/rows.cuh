// Small whole-matrix helpers over token rows (M, N), used by the learner and
// the GPU mixers:
//   fill           out (n) = value (the ones vector of column_sum);
//   add            out = a + b elementwise (the residual stream h + mixer(h));
//   add_bias_rows  Y (M, N) += b (N) on every row (a Linear's bias after its GEMM);
//   column_sum     out (N) += Σ_rows X (M, N): a bias or norm-weight gradient.
//                  It is the GEMM ones(1, M) · X through cuBLAS, so the sum
//                  over tokens runs in one fixed order (deterministic, no
//                  atomics) at GEMM speed.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace mambarl::cuda {

void fill(size_t n, float value, float* out, cudaStream_t stream);

//   a, b, out (n); out may alias a or b
void add(size_t n, const float* a, const float* b, float* out, cudaStream_t stream);

//   Y (M, N), b (N)
void add_bias_rows(int M, int N, float* Y, const float* b, cudaStream_t stream);

//   X (M, N) with row stride ldx, ones (M) all 1.f, out (N) accumulated.
//   The handle is bound to the caller's stream (linear.cuh).
void column_sum(cublasHandle_t handle, int M, int N, const float* X, int ldx, const float* ones, float* out);

}  // namespace mambarl::cuda

// Small whole-matrix helpers over token rows (M, N), used by the learner and
// the GPU mixers:
//   fill           out (n) = value (the ones vector of column_sum);
//   add            out = a + b elementwise (the residual stream h + mixer(h));
//   add_bias_rows  Y (M, N) += b (N) on every row (a Linear's bias after its GEMM);
//   flags_to_mask  out (n) = 1.f where flags (u8) is set, else 0.f;
//   column_sum     out (N) += Σ_rows w_m X (M, N) for weights w (M): with w all
//                  ones a bias or norm-weight gradient; with a flags mask
//                  the episode-start embedding's.
//                  It is the GEMM ones(1, M) · X through cuBLAS, so the sum
//                  over tokens runs in one fixed order (deterministic, no
//                  atomics) at GEMM speed.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mambarl::cuda {

void fill(size_t n, float value, float* out, cudaStream_t stream);

//   a, b, out (n); out may alias a or b
void add(size_t n, const float* a, const float* b, float* out, cudaStream_t stream);

//   Y (M, N), b (N)
void add_bias_rows(int M, int N, float* Y, const float* b, cudaStream_t stream);

void flags_to_mask(size_t n, const uint8_t* flags, float* out, cudaStream_t stream);

//   X (M, N) with row stride ldx, w (M) the row weights, out (N) accumulated.
//   The handle is bound to the caller's stream (linear.cuh).
void column_sum(cublasHandle_t handle, int M, int N, const float* X, int ldx, const float* w, float* out);

}  // namespace mambarl::cuda

// RMSNorm over token rows for the learner's chunk (CPU twin: policy/ops.hpp
// rmsnorm_forward / rmsnorm_backward):
//   forward   Y = X ⊙ w · r,  r = 1/sqrt(mean(X²) + eps), r saved per row;
//   backward  dX = r g - X r³ (X·g)/n with g = w ⊙ dY, written or added
//             (added is the residual stream's dh += dn without a second
//             pass); the weight gradient's per-token terms dY ⊙ X r go to a
//             (M, n) scratch that the caller column-sums (cuda::column_sum),
//             so the reduction over tokens is a fixed-order GEMM, no atomics.
// One block per row; the row sums are block_reduce.cuh's deterministic tree.
#pragma once

#include <cuda_runtime.h>

namespace mambarl::cuda {

//   X (M, n), w (n) -> Y (M, n), rstd (M)
void rmsnorm_forward(int M, int n, const float* X, const float* w, float* Y, float* rstd,
                     cudaStream_t stream);

//   X (M, n), w (n), rstd (M), dY (M, n) -> dX (M, n) (= or += by `accumulate`),
//   dw_terms (M, n) = dY ⊙ X r
void rmsnorm_backward(int M, int n, const float* X, const float* w, const float* rstd, const float* dY,
                      float* dX, bool accumulate, float* dw_terms, cudaStream_t stream);

}  // namespace mambarl::cuda

// Linear layers of the GPU step, W (out, in) row-major as nn.Linear stores
// it and X, Y token rows (CPU twin: policy/ops.hpp linear_forward):
//   gemm_rows      Y (M, out) = X W^T + beta Y through cuBLAS, f32 throughout
//                  (default math mode: no TF32, the CPU parity bound is 1e-4);
//                  beta = 1 adds the residual for free;
//   linear_small   Y = X W^T + b for a small `in` (the observation projection),
//                  one thread per output: cheaper than a GEMM launch;
//   fold_norm      W' = W diag(w): RMSNorm(h; w) followed by W equals
//                  r(h) · (W' h) with r = 1/rms(h), so the step kernels apply
//                  r themselves and no normalised copy of h is ever written.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace mambarl::cuda {

// The handle must already be bound to the stream the caller captures/launches on.
void gemm_rows(cublasHandle_t handle, int M, int in, int out, const float* X, const float* W,
               float beta, float* Y);

void linear_small(int M, int in, int out, const float* X, const float* W, const float* b, float* Y,
                  cudaStream_t stream);

//   W (rows, cols), w (cols) -> out (rows, cols)
void fold_norm(int rows, int cols, const float* W, const float* w, float* out, cudaStream_t stream);

}  // namespace mambarl::cuda

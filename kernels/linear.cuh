// Linear layers on the GPU, W (out, in) row-major as nn.Linear stores it and
// X, Y token rows (CPU twin: policy/ops.hpp linear_forward):
//   gemm           the general row-major product C = alpha op(A) op(B) + beta C
//                  with leading dimensions, so a column block of a wider
//                  activation (x of [x z]) is an operand without a copy; the
//                  learner's three forms are gemm(N,T) forward, gemm(N,N)
//                  for dX = dY W and gemm(T,N) for dW += dY^T X;
//   linear_rows    Y (M, out) = X W^T + beta Y for the actor's skinny step
//                  GEMMs (M = envs, in/out = d_model or a projection width):
//                  a tiled SIMT kernel, W in f32 or bf16, f32 FMA accumulation
//                  in a fixed k order (deterministic, no TF32: the f32 CPU
//                  parity bound is 1e-4); beta = 1 adds the residual for free.
//                  cuBLAS took ~23 µs for 1024x128 -> 512 on the H200 (it
//                  picks a kernel for big problems); this needs ~3 µs;
//   to_bf16        round-to-nearest-even bf16 shadows of f32 weights;
//   linear_small   Y = X W^T + b for a small `in` (the observation projection),
//                  one thread per output: cheaper than a GEMM launch;
//   fold_norm      W' = W diag(w): RMSNorm(h; w) followed by W equals
//                  r(h) · (W' h) with r = 1/rms(h), so the step kernels apply
//                  r themselves and no normalised copy of h is ever written.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace mambarl::cuda {

// Row-major: op(A) (M, K), op(B) (K, N), C (M, N); lda/ldb/ldc are the row
// strides of A, B and C as stored. f32 with f32 accumulation, cuBLAS's default
// math mode (no TF32). The handle must already be bound to the stream the
// caller captures/launches on, with its workspace set.
void gemm(cublasHandle_t handle, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
          const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc);

// Y (M, out) = X (M, in) W^T + beta Y through gemm: a layer applied to token rows.
void gemm_rows(cublasHandle_t handle, int M, int in, int out, const float* X, const float* W,
               float beta, float* Y);

// The step launchers below take pdl: launch with programmatic dependent
// launch (kernels/launch.cuh).
//
// Y (M, out) = X (M, in) W^T + beta Y; Wt = float or __nv_bfloat16. With
// beta = 0, Y is not read. X and Y must not overlap.
template <class Wt>
void linear_rows(int M, int in, int out, const float* X, const Wt* W, float beta, float* Y,
                 cudaStream_t stream, bool pdl = false);

//   in (n) f32 -> out (n) bf16
void to_bf16(size_t n, const float* in, __nv_bfloat16* out, cudaStream_t stream);

void linear_small(int M, int in, int out, const float* X, const float* W, const float* b, float* Y,
                  cudaStream_t stream, bool pdl = false);

//   W (rows, cols), w (cols) -> out (rows, cols)
void fold_norm(int rows, int cols, const float* W, const float* w, float* out, cudaStream_t stream);

}  // namespace mambarl::cuda

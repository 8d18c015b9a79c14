// Linear layers on the GPU, W (out, in) row-major as nn.Linear stores it and
// X, Y token rows (CPU twin: policy/ops.hpp linear_forward):
//   gemm           the general row-major product C = alpha op(A) op(B) + beta C
//                  with leading dimensions, so a column block of a wider
//                  activation (x of [x z]) is an operand without a copy; the
//                  learner's three forms are gemm(N,T) forward, gemm(N,N)
//                  for dX = dY W and gemm(T,N) for dW += dY^T X; its
//                  GemmPrecision picks f32 inputs (SGEMM) or 16-bit inputs
//                  (bf16/f16, cublasGemmEx, f32 accumulation into f32 C):
//                  an operand with a 16-bit shadow (the weights, refreshed
//                  after each optimizer step) is read from it, any other is
//                  cast into the precision's scratch first;
//   linear_rows    Y (M, out) = X W^T + beta Y for the actor's skinny step
//                  GEMMs (M = envs, in/out = d_model or a projection width):
//                  a tiled SIMT kernel, W in f32 or bf16, f32 FMA accumulation
//                  in a fixed k order (deterministic, no TF32: the f32 CPU
//                  parity bound is 1e-4); beta = 1 adds the residual for free.
//                  cuBLAS took ~23 µs for 1024x128 -> 512 on the H200 (it
//                  picks a kernel for big problems); this needs ~3 µs;
//   to_bf16        round-to-nearest-even bf16 shadows of f32 weights;
//   to_half        the same into bf16 or f16 by a runtime Precision (the
//                  learner's shadows, stored as raw 16-bit words);
//   linear_small   Y = X W^T + b for a small `in` (the observation projection),
//                  one thread per output: cheaper than a GEMM launch;
//   fold_norm      W' = W diag(w): RMSNorm(h; w) followed by W equals
//                  r(h) · (W' h) with r = 1/rms(h), so the step kernels apply
//                  r themselves and no normalised copy of h is ever written.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/precision.hpp"

namespace mambarl::cuda {

// One GEMM input: its f32 values and, where the caller keeps one, their
// 16-bit shadow in the GEMM's precision with the same layout (row stride).
// Implicit from a plain f32 pointer: an activation without a shadow.
struct GemmOperand {
  GemmOperand(const float* values) : f32(values) {}  // NOLINT(google-explicit-constructor)
  GemmOperand(const float* values, const uint16_t* shadow) : f32(values), low(shadow) {}
  const float* f32 = nullptr;
  const uint16_t* low = nullptr;
};

// The precision a GEMM reads its inputs in, and where a 16-bit GEMM casts
// the operands that have no shadow: `scratch` (scratch_elems 16-bit words,
// at least gemm_cast_elems of both cast operands) on `stream`, the stream
// the cuBLAS handle is bound to, so casts and GEMMs stay in order and one
// scratch serves every GEMM of the stream. Unused for float32.
struct GemmPrecision {
  Precision type = Precision::float32;
  uint16_t* scratch = nullptr;
  size_t scratch_elems = 0;
  cudaStream_t stream = nullptr;
};

// The scratch words a 16-bit gemm needs to cast operands of a_elems and
// b_elems values (0 for one with a shadow): each padded to a 128-byte start.
size_t gemm_cast_elems(size_t a_elems, size_t b_elems);

// Row-major: op(A) (M, K), op(B) (K, N), C (M, N); lda/ldb/ldc are the row
// strides of A, B and C as stored. f32 accumulation and f32 C in every
// precision, cuBLAS's default math mode (no TF32 for float32: the CPU parity
// bound is 1e-4). The handle must already be bound to the stream the caller
// captures/launches on (prec.stream), with its workspace set.
void gemm(cublasHandle_t handle, const GemmPrecision& prec, bool trans_a, bool trans_b, int M, int N, int K,
          float alpha, GemmOperand A, int lda, GemmOperand B, int ldb, float beta, float* C, int ldc);

// Y (M, out) = X (M, in) W^T + beta Y through gemm: a layer applied to token rows.
void gemm_rows(cublasHandle_t handle, const GemmPrecision& prec, int M, int in, int out, GemmOperand X,
               GemmOperand W, float beta, float* Y);

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

//   in (n) f32 -> out (n) 16-bit words of `type` (bfloat16 or float16), round to nearest even
void to_half(Precision type, size_t n, const float* in, uint16_t* out, cudaStream_t stream);

// A vector added to the rows of Y that `rows` flags (u8, M); both null: none.
// The model's episode-start embedding (policy/actor_critic.hpp).
struct RowEmbedding {
  const uint8_t* rows = nullptr;
  const float* vec = nullptr;  // (out)
};

void linear_small(int M, int in, int out, const float* X, const float* W, const float* b, float* Y,
                  cudaStream_t stream, bool pdl = false, RowEmbedding embed = {});

//   W (rows, cols), w (cols) -> out (rows, cols)
void fold_norm(int rows, int cols, const float* W, const float* w, float* out, cudaStream_t stream);

}  // namespace mambarl::cuda

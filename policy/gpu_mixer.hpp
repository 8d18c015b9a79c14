// The training role of a sequence mixer on the GPU: the twin of Mixer<float>
// (policy/mixer.hpp) for the learner's chunk, with the same semantics so that
// tests compare the two directly.
//
// A GpuMixer maps the normed residual stream U (T*B, D) to Y (T*B, D) for one
// layer, in_proj and out_proj included, from the initial state each sequence
// started with, with episode_start resets inside the chunk; backward() sends
// dY back to dU and accumulates every parameter gradient of the layer. No
// gradient flows through a reset or into the initial state (policy/MATH.md "Episode boundaries").
//
// Memory: prepare(T, B) allocates everything forward/backward need for that
// chunk shape, once (kernels/cuda_graph.cuh: a captured graph bakes pointers
// in); forward/backward only enqueue work on exec.stream (kernels and cuBLAS
// calls, no allocation, no synchronisation), so the learner can capture them.
// bindings() names those buffers so a replay can refuse if one moved.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda_graph.cuh"
#include "kernels/linear.cuh"
#include "policy/mixer.hpp"

namespace mambarl {

// Where a mixer enqueues its work and in what GEMM precision. The cuBLAS
// handle is bound to `stream` and has its workspace set (before any capture).
// With a 16-bit precision, params_low is the (P) shadow of the flat
// parameter buffer in that precision (same offsets) and precision.scratch
// holds at least every mixer's gemm_cast_elems().
struct GpuExec {
  GpuExec(cudaStream_t s, cublasHandle_t h, const cuda::GemmPrecision& p = {}, const uint16_t* low = nullptr)
      : stream(s), cublas(h), precision(p), params_low(low) {}

  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cuda::GemmPrecision precision;         // float32 unless the learner runs 16-bit GEMMs
  const uint16_t* params_low = nullptr;  // (P) or null for float32

  // The weight at `offset` of the flat buffer as a GEMM operand (with its shadow).
  cuda::GemmOperand weight(const float* params, size_t offset) const {
    return {params + offset, params_low ? params_low + offset : nullptr};
  }
  // cuda::gemm / gemm_rows (kernels/linear.cuh) on this handle in this precision.
  void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, cuda::GemmOperand A, int lda,
            cuda::GemmOperand B, int ldb, float beta, float* C, int ldc) const {
    cuda::gemm(cublas, precision, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  void gemm_rows(int M, int in, int out, cuda::GemmOperand X, cuda::GemmOperand W, float beta,
                 float* Y) const {
    cuda::gemm_rows(cublas, precision, M, in, out, X, W, beta, Y);
  }
};

class GpuMixer {
 public:
  virtual ~GpuMixer() = default;

  virtual std::string type() const = 0;  // as the CPU mixer's type()
  virtual size_t state_size() const = 0;  // floats per env for this layer, the CPU mixer's layout

  // Allocates the scratch for chunks of T x B (T*B token rows); a later call
  // with the same shape keeps the buffers. Never called during capture.
  virtual void prepare(int T, int B) = 0;

  // Device pointers:
  //   params  the model's flat f32 parameter buffer (the model's ParamLayout)
  //   U       (T*B, D) normed input, row t*B + b; must stay unchanged until backward()
  //   starts  (T*B) episode_start flags (0/1)
  //   state0  env b's initial state for this layer at state0 + b * state_stride (read only)
  //   Y       (T*B, D) written (not accumulated)
  virtual void forward(const float* params, const float* U, const uint8_t* starts,
                       const float* state0, size_t state_stride, float* Y,
                       const GpuExec& exec) = 0;

  // Backward of the last forward():
  //   dY     (T*B, D)
  //   grads  flat, same layout as params: this layer's gradients are ADDED
  //   dU     (T*B, D) written (not accumulated)
  virtual void backward(const float* params, const float* dY, float* grads, float* dU,
                        const GpuExec& exec) = 0;

  // The 16-bit scratch words (kernels/linear.cuh gemm_cast_elems) the
  // largest of this mixer's GEMMs casts in a 16-bit precision, its weights
  // read from their shadows, for the prepared shape.
  virtual size_t gemm_cast_elems() const = 0;

  // The buffers prepare() allocated, for CudaGraph's replay check.
  virtual void bindings(std::vector<GraphBinding>& out) const = 0;
};

// The GPU twin of one layer's CPU mixer (`mixer` is layer `layer` of a model
// whose parameters follow `layout`). Throws mambarl::Error naming the type
// when there is no GPU training engine for it.
std::unique_ptr<GpuMixer> make_gpu_mixer(const Mixer<float>& mixer, const ParamLayout& layout,
                                         int layer);

// The mixer types make_gpu_mixer knows, in table order: what the GPU learner
// can train and what `bench train --device cuda` measures.
std::vector<std::string> gpu_mixer_types();

}  // namespace mambarl

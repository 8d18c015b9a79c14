// The Mamba-1 mixer's training role on the GPU (GpuMixer, policy/gpu_mixer.hpp):
// the twin of Mamba1Mixer<float> (policy/mamba1.cpp) for one layer over the
// learner's chunk, with the same parameters (read in place from the model's
// flat buffer by name), the same state layout and the same reset rules.
//
// Forward: xz = U W_in^T (cuBLAS) -> conv + silu (kernel) -> [δ B C] = xc W_x^T
// -> dt_lin = δ W_dt^T (cuBLAS) -> Δ, scan, y, gate (kernel) -> Y = gated W_out^T.
// Backward runs the same stages in reverse (kernels/mamba1_scan.cuh), the
// GEMMs' transposes through cuda::gemm. Every buffer is carved out of one
// arena at prepare(); forward/backward only enqueue work on exec.stream.
//
// Memory: the forward keeps the scan's state H (N*E floats) only every
// segment_len() tokens, and the backward recomputes the states in between
// (kernels/mamba1_scan.cuh): at T=32, B=16384, E=128, N=16 that is 3 kept
// states per env instead of 31, 0.4 GB per layer instead of 4.3. Besides
// that, about 16 floats per token and channel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device_buffer.cuh"
#include "kernels/mamba1_scan.cuh"
#include "policy/gpu_mixer.hpp"
#include "policy/mamba1.hpp"

namespace mambarl {

class GpuMamba1Mixer final : public GpuMixer {
 public:
  // `cpu` is layer `layer` of a model whose parameters follow `layout`;
  // throws mambarl::Error if a parameter is missing or its shape disagrees
  // with the mixer's config. segment_len: the scan's segment (0: the longest
  // the backward's shared memory holds, the default; 1 keeps every state,
  // which the tests compare the recompute against).
  GpuMamba1Mixer(const Mamba1Mixer<float>& cpu, const ParamLayout& layout, int layer,
                 int segment_len = 0);

  std::string type() const override { return "mamba1"; }
  size_t state_size() const override { return state_size_; }

  void prepare(int T, int B) override;
  void forward(const float* params, const float* U, const uint8_t* starts, const float* state0,
               size_t state_stride, float* Y, const GpuExec& exec) override;
  void backward(const float* params, const float* dY, float* grads, float* dU,
                const GpuExec& exec) override;
  size_t gemm_cast_elems() const override;
  void bindings(std::vector<GraphBinding>& out) const override;
  int segment_len() const { return act_.seg_len; }

 private:
  // Offsets of the layer's tensors in the flat parameter (and gradient) buffer.
  struct Offsets {
    size_t in_proj = 0, conv_w = 0, conv_b = 0, x_proj = 0, dt_w = 0, dt_b = 0, a_log = 0,
           d_skip = 0, out_proj = 0;
  };
  cuda::Mamba1Weights<float> weights(const float* params) const;

  cuda::Mamba1Dims d_;
  size_t state_size_ = 0;
  Offsets off_;

  // Set by prepare(): the chunk shape and the arena every buffer below lives in.
  int T_ = 0, B_ = 0;
  DeviceBuffer<float> arena_;
  float* a_ = nullptr;  // (E, N) A = -exp(A_log), derived by each forward
  cuda::Mamba1Activations act_;
  cuda::Mamba1Backward bwd_;

  // What the last forward() ran on; backward() reads them again.
  const float* U_ = nullptr;  // (T*B, D)
  cuda::Mamba1Chunk chunk_;
};

}  // namespace mambarl

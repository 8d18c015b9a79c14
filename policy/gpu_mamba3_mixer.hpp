// The Mamba-3 SISO mixer's training engine on the GPU: the GpuMixer twin of
// Mamba3Mixer<float> (policy/mamba3.cpp), same parameter names and layout,
// same per-env state layout (S (H,P,N), k_prev (H,N), v_prev (H,P), φ (H,Na)).
//
// Forward: in_proj GEMM -> the chunk kernels (kernels/mamba3_scan.cuh: head
// scalars, B/C norms, angle scan and rotation, trapezoid recurrence, gate) ->
// out_proj GEMM. Backward: out_proj's dX and dW GEMMs -> the chunk kernels'
// backward -> column sums of the per-token terms into the small parameters'
// gradients (a GEMM with a ones vector: a fixed summation order, so graph
// replays and eager launches agree bit for bit) -> in_proj's dW and dX GEMMs.
//
// Memory: prepare(T, B) carves every activation out of one device
// allocation, so a captured graph's pointers never move. The state S (E*N
// floats per env) is kept only every segment_len() steps; the backward scan
// rebuilds the steps in between (kernels/mamba3_scan.cuh).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/device_buffer.cuh"
#include "kernels/mamba3_scan.cuh"
#include "policy/gpu_mixer.hpp"
#include "policy/mamba3.hpp"

namespace mambarl {

class GpuMamba3Mixer final : public GpuMixer {
 public:
  // `cpu` is layer `layer` of a model whose parameters follow `layout`;
  // parameters are found by name ("layers.<layer>.mixer.in_proj.weight", ...)
  // and their shapes checked against cpu's config. Needs a CUDA device.
  // segment_len: the scan's segment (0: the longest the backward's shared
  // memory holds, the default; 1 keeps every state, which the tests compare
  // the rebuild against).
  GpuMamba3Mixer(const Mamba3Mixer<float>& cpu, const ParamLayout& layout, int layer,
                 int segment_len = 0);

  std::string type() const override { return "mamba3"; }
  size_t state_size() const override { return state_size_; }
  void prepare(int T, int B) override;
  void forward(const float* params, const float* U, const uint8_t* starts, const float* state0,
               size_t state_stride, float* Y, const GpuExec& exec) override;
  void backward(const float* params, const float* dY, float* grads, float* dU,
                const GpuExec& exec) override;
  size_t gemm_cast_elems() const override;
  void bindings(std::vector<GraphBinding>& out) const override;
  int segment_len() const { return chunk_.seg_len; }

 private:
  // Offsets (in floats) of the layer's parameters in the flat buffer.
  struct Offsets {
    size_t in_proj, dt_bias, b_bias, c_bias, b_norm, c_norm, d_skip, norm, out_proj;
  };
  static constexpr size_t kNoNorm = static_cast<size_t>(-1);

  cuda::Mamba3Weights weights(const float* params) const;
  // Points chunk_ into base (or, with base null, only counts); returns floats.
  size_t carve(float* base);

  cuda::Mamba3Dims d_;
  int R_ = 0;                    // in_proj rows
  int o_dt_ = 0;                 // dd_dt's column in zx
  size_t state_size_ = 0;        // floats per env
  Offsets off_{};
  int T_ = 0, B_ = 0;            // the prepared chunk shape
  DeviceBuffer<float> scratch_;  // every buffer of chunk_, ones_
  cuda::Mamba3Chunk chunk_;
  float* ones_ = nullptr;        // (max(T*B*G, T*B, B*P)) for the column sums
  size_t ones_n_ = 0;
  const float* U_ = nullptr;     // the forward's input, read again by backward (dW_in)
};

}  // namespace mambarl

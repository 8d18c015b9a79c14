// The MLP baseline's training engine on the GPU (CPU twin: MlpMixer<float>,
// policy/mlp_mixer.cpp):  Y = W2 silu(W1 U + b1) + b2, hidden width E.
// Four cuBLAS GEMMs forward+backward plus the weight-gradient GEMMs, two
// elementwise kernels (kernels/mlp.cuh) and the bias gradients as
// fixed-order column sums (kernels/rows.cuh): deterministic, no atomics.
// It carries no state and ignores the episode starts, as its CPU twin.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/device_buffer.cuh"
#include "policy/gpu_mixer.hpp"
#include "policy/mlp_mixer.hpp"

namespace mambarl {

class GpuMlpMixer final : public GpuMixer {
 public:
  // `mixer` is layer `layer` of a model whose parameters follow `layout`.
  GpuMlpMixer(const MlpMixer<float>& mixer, const ParamLayout& layout, int layer);

  std::string type() const override { return "mlp"; }
  size_t state_size() const override { return 0; }
  void prepare(int T, int B) override;
  void forward(const float* params, const float* U, const uint8_t* starts, const float* state0,
               size_t state_stride, float* Y, const GpuExec& exec) override;
  void backward(const float* params, const float* dY, float* grads, float* dU, const GpuExec& exec) override;
  size_t gemm_cast_elems() const override;
  void bindings(std::vector<GraphBinding>& out) const override;

 private:
  int D_, E_;
  size_t fc1_w_, fc1_b_, fc2_w_, fc2_b_;  // offsets into the flat params/grads
  int M_ = 0;                             // T*B of the prepared shape
  const float* U_ = nullptr;              // the last forward's input, kept for dW1
  DeviceBuffer<float> pre_;               // (M, E) W1 U + b1
  DeviceBuffer<float> act_;               // (M, E) silu(pre)
  DeviceBuffer<float> dact_;              // (M, E) dL/dact, then dL/dpre
  DeviceBuffer<float> ones_;              // (M) for the bias column sums
};

}  // namespace mambarl

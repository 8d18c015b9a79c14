// The GRU baseline's training engine on the GPU (CPU twin: GruMixer<float>,
// policy/gru.cpp): the learner's chunk forward from the initial state with
// per-env resets inside it, and the backward through time.
//
// Work split, as the CPU's: the input side W_ih u has no recurrence, so it is
// one GEMM over all T*B rows up front; the recurrence through W_hh is one
// kernel launch for the whole chunk (kernels/gru.cuh: one block per env walks
// its steps), not a GEMM and a gate kernel per step, whose launches dominated
// at 1024-step learner sequences. The backward is one launch too, carrying
// dL/dh inside, and records the gate gradients of every row, so all four
// parameter gradients and dU are whole-chunk GEMMs and fixed-order column sums
// at the end: deterministic, no atomics. That is why h_{t-1} of every row is
// kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device_buffer.cuh"
#include "policy/gpu_mixer.hpp"
#include "policy/gru.hpp"

namespace mambarl {

class GpuGruMixer final : public GpuMixer {
 public:
  // `mixer` is layer `layer` of a model whose parameters follow `layout`;
  // throws mambarl::Error if a parameter is missing or has another shape.
  GpuGruMixer(const GruMixer<float>& mixer, const ParamLayout& layout, int layer);

  std::string type() const override { return "gru"; }
  size_t state_size() const override { return static_cast<size_t>(D_); }  // h (D)
  void prepare(int T, int B) override;
  void forward(const float* params, const float* U, const uint8_t* starts, const float* state0,
               size_t state_stride, float* Y, const GpuExec& exec) override;
  void backward(const float* params, const float* dY, float* grads, float* dU, const GpuExec& exec) override;
  size_t gemm_cast_elems() const override;
  void bindings(std::vector<GraphBinding>& out) const override;

 private:
  int D_;
  bool w_hh_shared_;                  // the forward keeps W_hh in shared memory (gru_sequence_configure)
  size_t w_ih_, w_hh_, b_ih_, b_hh_;  // offsets into the flat params/grads
  int T_ = 0, B_ = 0;                 // the prepared chunk shape
  // What the last forward() ran on; backward() reads them again.
  const float* U_ = nullptr;         // (T*B, D)
  const uint8_t* starts_ = nullptr;  // (T*B)
  DeviceBuffer<float> gates_;        // (T*B, 3D) W_ih u, then r z n after the forward
  DeviceBuffer<float> hn_;           // (T*B, D) W_hn h_{t-1} + b_hn
  DeviceBuffer<float> h_prev_;       // (T*B, D) h entering step t, zero at a start
  DeviceBuffer<float> dgi_;          // (T*B, 3D) dL/d(W_ih u + b_ih)
  DeviceBuffer<float> dgh_;          // (T*B, 3D) dL/d(W_hh h + b_hh)
  DeviceBuffer<float> ones_;         // (T*B) for the bias column sums
};

}  // namespace mambarl

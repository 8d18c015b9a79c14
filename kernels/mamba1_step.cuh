// Mamba-1 mixer, T=1 step on the GPU: everything between in_proj and
// out_proj of one layer in one kernel (MATH.md "Mamba-1 mixer"; CPU twin:
// policy/mamba1.cpp). One block per env:
//   r = 1/rms(h)  ->  x, z = r · xz'  (the layer's RMSNorm weight is folded
//   into in_proj, see kernels/linear.cuh)  ->  causal conv over the carried
//   window + silu  ->  [δ B C] = W_x xc  ->  Δ = softplus(W_dt δ + b_dt)  ->
//   H = exp(Δ A) H + (Δ xc) ⊗ B,  y = H C + D xc  ->  gated = y silu(z).
// The state slice (H (E×N) then the window (d_conv-1)×E, oldest first) is
// read once and written once; an episode start reads zeros instead.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mambarl::cuda {

struct Mamba1Dims {
  int D = 0, E = 0, N = 0, K = 0, R = 0;  // d_model, d_inner, d_state, d_conv, dt_rank
};

// Device pointers into the flat parameter buffer (a: the derived A).
struct Mamba1Weights {
  const float* conv_w = nullptr;  // (E, K)
  const float* conv_b = nullptr;  // (E)
  const float* x_proj = nullptr;  // (R+2N, E)
  const float* dt_w = nullptr;    // (E, R)
  const float* dt_b = nullptr;    // (E)
  const float* a = nullptr;       // (E, N) A = -exp(A_log)
  const float* d_skip = nullptr;  // (E)
};

constexpr int kMamba1MaxConv = 8;  // Mamba1Config::validate bounds d_conv to [1, 8]

// A = -exp(A_log) (n = E*N), once per weight upload, as the CPU computes it
// per forward: the step then spends one exp per state element, not two.
void mamba1_derive_a(int n, const float* a_log, float* a, cudaStream_t stream);

// Validates the dims and raises the kernel's shared-memory limit if it needs
// more than the default; call once before any launch (not during capture).
void mamba1_step_configure(const Mamba1Dims& d);

//   h       (B, D)   the layer's input (residual stream)
//   xz      (B, 2E)  (W_in ⊙ w_norm) h
//   starts  (B)      episode_start flags
//   state   env b's layer slice at state_in/out + b * stride; in place when equal
//   gated   (B, E)   out_proj input
void mamba1_step(const Mamba1Dims& d, const Mamba1Weights& w, int B, const float* h,
                 const float* xz, const uint8_t* starts, const float* state_in, float* state_out,
                 size_t stride, float* gated, cudaStream_t stream);

}  // namespace mambarl::cuda

// Mamba-3 SISO mixer, T=1 step on the GPU: everything between in_proj and
// out_proj of one layer in one kernel (policy/MATH.md "Mamba-3 SISO mixer"; CPU
// twin: policy/mamba3.cpp). One block per env:
//   r = 1/rms(h), the in_proj row scaled by r (the layer's RMSNorm weight is
//   folded into in_proj) and split into z, x, B, C, dd_dt, dd_A, λ, θ  ->
//   per-head dt, A, λ, α, β, γ  ->  B/C RMSNorm per group + per-head bias  ->
//   angle update φ = (φ + π tanh(θ) dt) mod 2π and pair rotation of k, q  ->
//   S = α S + β v_prev ⊗ k_prev + γ x ⊗ k,  y = S q + D x  ->  gate.
// The state slice (S (H×P×N), k_prev (H×N), v_prev (H×P), φ (H×Na)) is read
// once and written once; an episode start reads zeros instead.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/step_flags.cuh"

namespace mambarl::cuda {

struct Mamba3Dims {
  int D = 0, E = 0, N = 0, P = 0, H = 0, G = 0, Na = 0;  // d_model, d_inner, d_state, headdim,
                                                         // heads, groups, rope angles
  float a_floor = 1e-4f;
  int in_rows() const { return 2 * E + 2 * G * N + 3 * H + Na; }  // z x B C dd_dt dd_A λ θ
};

// Device pointers into the flat parameter buffer.
struct Mamba3Weights {
  const float* dt_bias = nullptr;  // (H)
  const float* b_bias = nullptr;   // (H, N)
  const float* c_bias = nullptr;   // (H, N)
  const float* b_norm = nullptr;   // (N)
  const float* c_norm = nullptr;   // (N)
  const float* d_skip = nullptr;   // (H)
  const float* norm = nullptr;     // (E) gated RMSNorm weight, or null: plain y ⊙ silu(z)
};

// Validates the dims and raises the kernel's shared-memory limit if it needs
// more than the default; call once before any launch (not during capture).
void mamba3_step_configure(const Mamba3Dims& d);

//   h       (B, D)              the layer's input (residual stream)
//   zx      (B, d.in_rows())    (W_in ⊙ w_norm) h
//   flags   episode starts, and the envs to step (kernels/step_flags.cuh)
//   state   env b's layer slice at state_in/out + b * stride; in place when
//           equal; state_out null: a peek, the new state is not stored
//   gated   (B, E)              out_proj input
//   pdl     programmatic dependent launch (kernels/launch.cuh)
void mamba3_step(const Mamba3Dims& d, const Mamba3Weights& w, int B, const float* h, const float* zx,
                 StepFlags flags, const float* state_in, float* state_out, size_t stride, float* gated,
                 cudaStream_t stream, bool pdl = false);

}  // namespace mambarl::cuda

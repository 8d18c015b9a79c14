// Mamba-1 mixer, T=1 step on the GPU: everything between in_proj and
// out_proj of one layer (policy/MATH.md "Mamba-1 mixer"; CPU twin: policy/mamba1.cpp),
// as two kernels shaped by what each phase reads:
//   pre    a tile of kMamba1PreEnvs envs per block at large batches (one
//          env per block below 512 envs, where tiles would leave SMs idle),
//          so the small matrices W_x and W_dt are read from L2 once per
//          tile, not once per env:
//          r = 1/rms(h)  ->  x, z = r · xz'  (the layer's RMSNorm weight is
//          folded into in_proj, see kernels/linear.cuh)  ->  causal conv over
//          the carried window + silu  ->  [δ B C] = W_x xc  ->
//          Δ = softplus(W_dt δ + b_dt); it also shifts the conv window (a
//          small part of the state) and writes per env the row act =
//          [xc | Δ | silu(z) | B | C] (a few KB);
//   state  the bandwidth part, 4 lanes per (env, channel e) streaming
//          H[e, 0..N) through registers with coalesced 16-byte accesses:
//          H = exp(Δ A) H + (Δ xc) B, y = H C + D xc (the lanes' partial
//          sums added by a fixed shuffle tree), gated = y silu(z).
// The state slice (H (E×N) then the window (d_conv-1)×E, oldest first) is
// read once and written once, each element by one thread; an episode start
// reads zeros instead.
//
// Weights: the two small matrices of the pre kernel come as Wt = float or
// __nv_bfloat16 (bf16 shadows, f32 arithmetic); the per-channel vectors and A
// stay f32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/base/host_device.hpp"
#include "kernels/kernel_limits.hpp"  // kMamba1MaxConv
#include "kernels/step_flags.cuh"

namespace mambarl::cuda {

struct Mamba1Dims {
  int D = 0, E = 0, N = 0, K = 0, R = 0;  // d_model, d_inner, d_state, d_conv, dt_rank
  // The act row of one env: xc, Δ, silu(z) at 0, E, 2E; B and C at
  // b_off() and c_off(), each rounded up to 4 floats so 16-byte loads stay aligned.
  MAMBARL_HD int b_off() const { return (3 * E + 3) / 4 * 4; }
  MAMBARL_HD int c_off() const { return b_off() + (N + 3) / 4 * 4; }
  MAMBARL_HD int act_floats() const { return c_off() + (N + 3) / 4 * 4; }
};

// Device pointers into the flat parameter buffer (a: the derived A; x_proj
// and dt_w: the parameters themselves or their bf16 shadows).
template <class Wt>
struct Mamba1Weights {
  const float* conv_w = nullptr;  // (E, K)
  const float* conv_b = nullptr;  // (E)
  const Wt* x_proj = nullptr;     // (R+2N, E)
  const Wt* dt_w = nullptr;       // (E, R)
  const float* dt_b = nullptr;    // (E)
  const float* a = nullptr;       // (E, N) A = -exp(A_log)
  const float* d_skip = nullptr;  // (E)
};

constexpr int kMamba1PreEnvs = 4;  // envs per block of the pre kernel

// A = -exp(A_log) (n = E*N), as the CPU computes it per forward: once per
// weight upload in the actor (the step then spends one exp per state element,
// not two) and once per forward in the learner.
void mamba1_derive_a(int n, const float* a_log, float* a, cudaStream_t stream);

// Validates the dims and raises the pre kernel's shared-memory limit if it
// needs more than the default; call once before any launch (not during capture).
void mamba1_step_configure(const Mamba1Dims& d);

// The two kernels of one step, in this order (mamba1_step launches both;
// they are public so the bench can time each). pdl: programmatic dependent
// launch (kernels/launch.cuh).
//   h       (B, D)                the layer's input (residual stream)
//   xz      (B, 2E)               (W_in ⊙ w_norm) h
//   flags   episode starts, and the envs to step (kernels/step_flags.cuh)
//   state   env b's layer slice at state_in/out + b * stride; in place when
//           equal; state_out null: a peek, the new state is not stored
//   act     (B, d.act_floats())   scratch between the two kernels
//   gated   (B, E)                out_proj input
template <class Wt>
void mamba1_pre(const Mamba1Dims& d, const Mamba1Weights<Wt>& w, int B, const float* h, const float* xz,
                StepFlags flags, const float* state_in, float* state_out, size_t stride, float* act,
                cudaStream_t stream, bool pdl = false);
template <class Wt>
void mamba1_state(const Mamba1Dims& d, const Mamba1Weights<Wt>& w, int B, StepFlags flags,
                  const float* state_in, float* state_out, size_t stride, const float* act, float* gated,
                  cudaStream_t stream, bool pdl = false);

template <class Wt>
void mamba1_step(const Mamba1Dims& d, const Mamba1Weights<Wt>& w, int B, const float* h, const float* xz,
                 StepFlags flags, const float* state_in, float* state_out, size_t stride, float* act,
                 float* gated, cudaStream_t stream, bool pdl = false);

}  // namespace mambarl::cuda

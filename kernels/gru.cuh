// The GRU baseline mixer's kernels on the GPU (CPU twin: policy/gru.cpp,
// PyTorch's nn.GRU, gate order r, z, n). The input GEMM (W_ih u for every row)
// and the weight gradients are the caller's (cuBLAS in the learner,
// linear_rows in the actor); the recurrence is here. One device function holds
// the cell's gate math, shared by the learner's chunk (gru_sequence_forward)
// and the actor's step (gru_step):
//   r  = σ(gi_r + gh_r)      gi = W_ih u + b_ih
//   z  = σ(gi_z + gh_z)      gh = W_hh h + b_hh
//   n  = tanh(gi_n + r ⊙ gh_n)
//   h' = (1 - z) ⊙ n + z ⊙ h
//
//   gru_prev_rows      hp (B, D) = h entering the step: 0 for an env that
//                      starts (or is skipped), else its row of src (row
//                      stride `stride`: the packed state, or the previous
//                      step's output). W_hh hp is then 0 at a start, as the
//                      CPU's zeroed h_{t-1}.
//   gru_sequence_forward   the learner's whole chunk in one launch (one block
//                      per env walks its T steps): the gates from gi (raw
//                      input GEMM rows, b_ih added here) and W_hh h_{t-1},
//                      saving r z n in place of gi, h_{t-1} and gh_n for the
//                      backward. The matrix-vector products are float32
//                      whatever the learner's GEMM precision.
//   gru_sequence_backward  the backward through time of the same chunk, in
//                      one launch: the gate gradients of every step, with
//                      dL/dh carried back through W_hh inside the kernel.
//   gru_step           the actor's T=1 cell: gi from the norm-folded input
//                      GEMM (scaled by 1/rms(h) here), h (B, D) += h' (the
//                      residual add) and h' stored as the env's state.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/step_flags.cuh"

namespace mambarl::cuda {

//   flags.starts/only (B) or null, src env b at src + b*stride, hp (B, D) written
void gru_prev_rows(int B, int D, StepFlags flags, const float* src, size_t stride, float* hp,
                   cudaStream_t stream, bool pdl = false);

// Sets both sequence kernels' shared-memory limit, as the Mamba blocks'
// *_configure do: once, when a mixer is made, so that no CUDA call but the
// launches runs while the learner's update is captured. Returns whether the
// forward keeps W_hh in shared memory for d_model D (it fits the device's
// per-block limit); gru_sequence_forward takes that back as w_shared.
bool gru_sequence_configure(int D);

// Rows are time-major: row t*B + b is env b at step t.
//   starts (T*B) episode starts: h_{t-1} = 0 there
//   state0 env b's initial h at + b*stride;  w_hh (3D, D) float32;  b_ih, b_hh (3D)
//   gates  (T*B, 3D) in: W_ih u (no bias), out: [r z n]
//   hp, hn, y (T*B, D) written: h_{t-1}, W_hn h_{t-1} + b_hn (the part r gates), h_t
void gru_sequence_forward(int T, int B, int D, bool w_shared, const uint8_t* starts, const float* state0,
                          size_t stride, const float* w_hh, const float* b_ih, const float* b_hh,
                          float* gates, float* hp, float* hn, float* y, cudaStream_t stream);

//   gates, hn, hp as the forward left them;  dy (T*B, D) dL/dY
//   dgi, dgh (T*B, 3D) written: dL/d(W_ih u + b_ih), dL/d(W_hh h + b_hh) of every step
//   (dL/dh_{t-1} is carried inside; at t = 0 it is not formed: the initial state is data)
void gru_sequence_backward(int T, int B, int D, const uint8_t* starts, const float* w_hh, const float* gates,
                           const float* hn, const float* hp, const float* dy, float* dgi, float* dgh,
                           cudaStream_t stream);

//   gi (B, 3D) (W_ih diag(norm_w)) h, no bias;  gh (B, 3D) W_hh hp, no bias;  hp (B, D)
//   h (B, D) in/out;  state_out env b's h' at + b*stride, or null (a peek)
//   Skipped envs (flags.only) leave h and the state as they are.
void gru_step(int B, int D, StepFlags flags, const float* gi, const float* gh, const float* b_ih,
              const float* b_hh, const float* hp, float* h, float* state_out, size_t stride,
              cudaStream_t stream, bool pdl = false);

}  // namespace mambarl::cuda

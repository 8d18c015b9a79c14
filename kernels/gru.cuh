// The elementwise parts of the GRU baseline mixer on the GPU (CPU twin:
// policy/gru.cpp, PyTorch's nn.GRU, gate order r, z, n). Its GEMMs are the
// caller's (cuBLAS in the learner, linear_rows in the actor); these kernels
// sit between them. One device function holds the cell's gate math, shared
// by the learner's chunk (gru_gates_forward) and the actor's step (gru_step):
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
//   gru_gates_forward  one step of the chunk: the gates from gi (raw input
//                      GEMM rows, b_ih added here) and gh (raw W_hh hp),
//                      saving r z n in place of gi and gh_n for the backward.
//   gru_gates_backward one step of the backward through time (equations in
//                      gru.cu) from dL/dh_t: the gate gradients of the step
//                      and dh ⊙ z, to which the caller's GEMM adds dgh W_hh.
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

//   gates (B, 3D) in: W_ih u (no bias), out: [r z n]
//   gh    (B, 3D) W_hh hp (no bias);  b_ih, b_hh (3D);  hp (B, D)
//   hn    (B, D)  written: W_hn hp + b_hn (the part r gates)
//   y     (B, D)  written: h'
void gru_gates_forward(int B, int D, float* gates, const float* gh, const float* b_ih, const float* b_hh,
                       const float* hp, float* hn, float* y, cudaStream_t stream);

//   gates (B, 3D) r z n;  hn, hp (B, D);  dy (B, D) dL/dY of the step
//   dh    (B, D) in: dL/dh_t carried from step t+1 (read unless `last`, and
//         taken as 0 for envs with cut[b] = 1: they start at t+1, so h_t
//         did not feed it); out: dh ⊙ z, the direct part of dL/dh_{t-1}
//   cut   (B) the episode starts of step t+1, or null
//   dgi, dgh (B, 3D) written: dL/d(W_ih u + b_ih), dL/d(W_hh h + b_hh)
void gru_gates_backward(int B, int D, const float* gates, const float* hn, const float* hp, const float* dy,
                        const uint8_t* cut, bool last, float* dh, float* dgi, float* dgh,
                        cudaStream_t stream);

//   gi (B, 3D) (W_ih diag(norm_w)) h, no bias;  gh (B, 3D) W_hh hp, no bias;  hp (B, D)
//   h (B, D) in/out;  state_out env b's h' at + b*stride, or null (a peek)
//   Skipped envs (flags.only) leave h and the state as they are.
void gru_step(int B, int D, StepFlags flags, const float* gi, const float* gh, const float* b_ih,
              const float* b_hh, const float* hp, float* h, float* state_out, size_t stride,
              cudaStream_t stream, bool pdl = false);

}  // namespace mambarl::cuda

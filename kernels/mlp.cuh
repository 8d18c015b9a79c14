// The elementwise middle of the MLP baseline mixer (CPU twin:
// policy/mlp_mixer.cpp); its two Linears are cuBLAS GEMMs in
// policy/gpu_mlp_mixer.cpp (the learner) and linear_rows in the actor:
//   bias_silu      pre (M, E) += b1, act = silu(pre) = pre σ(pre);
//   silu_backward  d (M, E) *= silu'(pre) = σ (1 + pre (1 - σ)), in place;
//   mlp_step       the actor's T=1 middle, one block per env: act =
//                  silu(r · pre + b1) with r = 1/rms(h) (the pre-norm weight
//                  is folded into fc1, kernels/linear.cuh fold_norm), and
//                  h += b2, so that the fc2 GEMM with beta = 1 completes
//                  h += fc2(act) without a bias pass of its own.
#pragma once

#include <cuda_runtime.h>

#include "kernels/step_flags.cuh"

namespace mambarl::cuda {

//   pre (M, E) in/out, b (E), act (M, E) written
void mlp_bias_silu(int M, int E, float* pre, const float* b, float* act, cudaStream_t stream);

//   pre (M, E), d (M, E) in/out
void mlp_silu_backward(int M, int E, const float* pre, float* d, cudaStream_t stream);

//   h (B, D) in/out, pre (B, E) (fc1 diag(norm_w)) h, b1 (E), b2 (D), act (B, E) written.
//   Skipped envs (flags.only) get a zero act row and keep h; starts do not matter (no state).
void mlp_step(int B, int D, int E, StepFlags flags, const float* pre, const float* b1, const float* b2,
              float* act, float* h, cudaStream_t stream, bool pdl = false);

}  // namespace mambarl::cuda

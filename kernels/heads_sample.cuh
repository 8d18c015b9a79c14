// Final RMSNorm, policy and value heads, and action sampling on the GPU
// (policy/MATH.md "Actor-critic model"; CPU twins: ActorCritic::forward's heads,
// CpuActor::act, policy/distributions.hpp). One block per env:
//   f = RMSNorm(h; w_f),  head = W_π f + b_π,  V = w_v · f + b_v,
// then, when sampling, one draw from env b's own Rng exactly as the CPU
// does it: categorical = one uniform and the inverse CDF over softmax
// probabilities in action order (double cumulative sum); Gaussian = one
// Box-Muller normal per action dimension. Same generator and same draw
// order, so actions agree with the CPU's except where a uniform lands within
// rounding of a CDF boundary.
#pragma once

#include <cuda_runtime.h>

#include "kernels/base/rng.hpp"

namespace mambarl::cuda {

struct HeadDims {
  int D = 0, A = 0;  // d_model, action_dim (discrete: actions; continuous: dimensions)
  bool discrete = true;
};

struct HeadWeights {
  const float* norm_f = nullptr;   // (D)
  const float* pi_w = nullptr;     // (A, D)
  const float* pi_b = nullptr;     // (A)
  const float* log_std = nullptr;  // (A) continuous only
  const float* v_w = nullptr;      // (D)
  const float* v_b = nullptr;      // (1)
};

// Validates and raises the shared-memory limit if needed (not during capture).
void heads_sample_configure(const HeadDims& d);

//   h        (B, D)
//   rngs     (B)              advanced only when sample is true
//   actions  (B, act_width)   written only when sample is true; act_width = discrete ? 1 : A
//   logp     (B)              written only when sample is true
//   values   (B)
//   pdl      programmatic dependent launch (kernels/launch.cuh)
void heads_sample(const HeadDims& d, const HeadWeights& w, int B, const float* h, Rng* rngs,
                  bool sample, float* actions, float* logp, float* values, cudaStream_t stream,
                  bool pdl = false);

}  // namespace mambarl::cuda

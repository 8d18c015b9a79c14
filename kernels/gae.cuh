// GAE(λ) over a (T, B) device chunk (MATH.md "PPO"), the twin of
// tools/gae.cpp's compute_gae: the same formula with the bootstrap on
// truncation, evaluated in double in the same order (one thread per env,
// t walking backwards), so the two agree to the rounding of the stored
// floats. Inputs and outputs are device memory; the launch is capturable.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mambarl::cuda {

struct GaeArgs {
  int T = 0, B = 0;
  const float* rewards = nullptr;       // (T, B)
  const float* values = nullptr;        // (T, B)   V(o_t) under the acting policy
  const uint8_t* terminated = nullptr;  // (T, B)
  const uint8_t* truncated = nullptr;   // (T, B)
  const float* final_values = nullptr;  // (T, B)   V(final obs), read where truncated
  const float* next_values = nullptr;   // (B)      V(o_T): the obs after the chunk
  float* advantages = nullptr;          // (T, B)   out
  float* returns = nullptr;             // (T, B)   out: Â + V
};

void gae(const GaeArgs& a, double gamma, double lambda, cudaStream_t stream);

}  // namespace mambarl::cuda

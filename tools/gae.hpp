// Generalised advantage estimation over a [T, B] chunk (policy/MATH.md "PPO with GAE"), with
// the bootstrap on truncation: a time-limit end is not a terminal state, so
// its TD target uses V(final obs), while a terminal state contributes 0.
#pragma once

#include <cstdint>
#include <vector>

namespace mambarl {

struct GaeInputs {
  int T = 0, B = 0;
  const float* rewards = nullptr;       // (T, B)
  const float* values = nullptr;        // (T, B)   V(o_t) under the acting policy
  const uint8_t* terminated = nullptr;  // (T, B)
  const uint8_t* truncated = nullptr;   // (T, B)
  const float* final_values = nullptr;  // (T, B)   V(final obs), read where truncated
  const float* next_values = nullptr;   // (B)      V(o_T): the obs after the chunk
};

// Writes advantages and returns (R = Â + V), each (T, B).
void compute_gae(const GaeInputs& in, double gamma, double lambda, float* advantages, float* returns);

}  // namespace mambarl

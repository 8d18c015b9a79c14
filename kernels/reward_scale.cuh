// Reward scaling by the running std of the discounted return on the device,
// the twin of tools/reward_scaler.hpp's RewardScaler::scale for one worker's
// (T, B) chunk: per env G = γ G + r, running mean/var of G over every (t, b)
// seen so far, rewards divided by sqrt(var + 1e-8) after each t's update, G
// reset where the episode ended.
//
// The CPU updates its Welford statistics one element at a time in (t, b)
// order; here each t is one batch: a deterministic block reduction (fixed
// tree, no atomics) gives the batch mean and sum of squared deviations, and
// Chan et al.'s parallel merge folds them into the running (mean, var,
// count), all in double. Mathematically the same statistics, so the result
// matches the CPU to rounding (relative ~1e-12 on var), not bitwise.
//
// State (device, double): stats (3) = mean, var, count (var = population
// variance; count 0 means "no data", as the CPU's initial (0, 1, 0)), and
// G (B), the layout of RewardScaler::state() for one worker.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mambarl::cuda {

struct RewardScaleArgs {
  int T = 0, B = 0;
  float* rewards = nullptr;             // (T, B) scaled in place
  const uint8_t* terminated = nullptr;  // (T, B)
  const uint8_t* truncated = nullptr;   // (T, B)
  double* stats = nullptr;              // (3) mean, var, count; updated
  double* returns = nullptr;            // (B) discounted return G of the running episode; updated
};

void scale_rewards(const RewardScaleArgs& a, double gamma, cudaStream_t stream);

}  // namespace mambarl::cuda

// One rollout step's bookkeeping on the device, after the env step: copies
// the env's reward and flags into row t of the (T, B) chunk, V(final obs)
// where the episode was truncated (0 elsewhere, as tools/rollout.cpp), the
// finished episodes' return and length (0 where not done), and the next
// step's episode_start = terminated | truncated. One launch instead of six
// copies and a mask in the rollout graph; no policy logic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mambarl::cuda {

struct EnvStepRecord {
  int B = 0;
  // The env's outputs of this step, (B) each.
  const float* reward = nullptr;
  const uint8_t* terminated = nullptr;
  const uint8_t* truncated = nullptr;
  const float* episode_return = nullptr;
  const int32_t* episode_length = nullptr;
  const float* final_value = nullptr;  // V(final obs) of every env (evaluated for all; kept where truncated)
  // Row t of the chunk, (B) each.
  float* row_reward = nullptr;
  uint8_t* row_terminated = nullptr;
  uint8_t* row_truncated = nullptr;
  float* row_final_value = nullptr;
  float* row_episode_return = nullptr;
  int32_t* row_episode_length = nullptr;
  uint8_t* next_starts = nullptr;  // (B) episode_start of the next step
};

void record_env_step(const EnvStepRecord& r, cudaStream_t stream);

}  // namespace mambarl::cuda

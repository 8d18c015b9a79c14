// A Chunk: the [T, B] record of one actor's envs under one policy version,
// what a rollout worker fills and the learner trains on (tools/rollout.hpp),
// with the previous chunks' context when algo.bptt_len > algo.chunk_len.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mambarl {

struct Chunk {
  int T = 0, B = 0, obs_dim = 0, act_width = 0;
  int context_T = 0;                 // steps of the previous chunks before this one (algo.bptt_len)
  size_t state_size = 0;
  long long policy_version = -1;     // weights the actor used
  int worker = 0;                    // which actor filled it
  std::vector<float> obs;            // (T, B, obs_dim)
  std::vector<float> actions;        // (T, B, act_width)
  std::vector<float> logp, values;   // (T, B)
  std::vector<float> rewards;        // (T, B)
  std::vector<uint8_t> starts, terminated, truncated;  // (T, B)
  std::vector<float> final_values;   // (T, B) V(final obs) where truncated
  std::vector<float> next_values;    // (B)    V(obs after the chunk)
  std::vector<float> initial_state;  // (B, state_size) at the first context step, else at step 0
  std::vector<float> context_obs;    // (context_T, B, obs_dim), oldest first (tools/rollout_context.hpp)
  std::vector<uint8_t> context_starts;  // (context_T, B)
  std::vector<float> advantages, returns;  // (T, B), filled by the learner
  std::vector<float> episode_returns;      // episodes that ended in this chunk
  std::vector<int32_t> episode_lengths;

  void allocate(int T, int B, int obs_dim, int act_width, size_t state_size, int context_T = 0);
};

}  // namespace mambarl

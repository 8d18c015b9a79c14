// The context of algo.bptt_len > algo.chunk_len on the host: the previous
// chunks' observations, episode_start flags and start states of one worker's
// envs, which the learner replays before each chunk (loss-free steps that
// carry recurrent state and gradient, plugin/mambarl_plugin.h, ABI 7).
//
// It holds the last K = context_T / T chunks, oldest first:
//   obs (context_T, B, obs_dim), starts (context_T, B), states (K, B, state_size),
// states[k] being the actor state when chunk k began. Before the first chunk
// of a run it is zeros: the run's first step starts every episode, which
// resets the state, so the zeros reach neither the loss nor the gradient.
// (The GPU rollout keeps the same window in device memory, tools/device_rollout.hpp.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tools/chunk.hpp"

namespace mambarl {

class RolloutContext {
 public:
  RolloutContext() = default;  // no context
  RolloutContext(int chunk_len, int context_T, int B, int obs_dim, size_t state_size);

  int context_T() const { return context_T_; }
  // With context_T > 0 only: the chunk's context (its context_obs,
  // context_starts) and the state its learner sequences start from, states[0].
  void fill(Chunk& c, const std::vector<float>& chunk_start) const;
  // Drops the oldest chunk and appends c (its obs and starts) begun in `chunk_start`.
  void push(const Chunk& c, const std::vector<float>& chunk_start);

  // What a bit-exact resume needs (sizes fixed by the constructor).
  std::vector<float>& obs() { return obs_; }
  std::vector<uint8_t>& starts() { return starts_; }
  std::vector<float>& states() { return states_; }

 private:
  int T_ = 0, context_T_ = 0;
  std::vector<float> obs_;
  std::vector<uint8_t> starts_;
  std::vector<float> states_;
};

}  // namespace mambarl

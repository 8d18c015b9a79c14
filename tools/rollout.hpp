// Rollout side of the actor-learner loop: a Chunk is the [T, B] record of one
// actor's envs under one policy version, and a RolloutWorker fills chunks by
// stepping its vectorised envs with the actor role (T=1 steps, per-env reset
// on episode_start), recording the recurrent state each sequence started with.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "envs/vec_env.hpp"
#include "plugin/plugin_host.hpp"

namespace mambarl {

struct Chunk {
  int T = 0, B = 0, obs_dim = 0, act_width = 0;
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
  std::vector<float> initial_state;  // (B, state_size)
  std::vector<float> advantages, returns;  // (T, B), filled by the learner
  std::vector<float> episode_returns;      // episodes that ended in this chunk
  std::vector<int32_t> episode_lengths;

  void allocate(int T, int B, int obs_dim, int act_width, size_t state_size);
};

class RolloutWorker {
 public:
  RolloutWorker(std::unique_ptr<VecEnv> env, std::unique_ptr<ActorHandle> actor, uint64_t env_seed);

  VecEnv& env() { return *env_; }
  ActorHandle& actor() { return *actor_; }
  // Steps T times into `chunk` (allocated by the caller for this worker's B).
  void collect(Chunk& chunk);

  // What a bit-exact resume needs besides env and actor state.
  std::vector<float>& obs() { return obs_; }          // (B, obs_dim) next observation
  std::vector<uint8_t>& starts() { return starts_; }  // (B) next episode_start flags
  // Env steps (vector steps x B) this worker has taken; readable from any thread
  // (the stalled-actor report says where an actor got stuck).
  long long env_steps() const { return env_steps_.load(std::memory_order_relaxed); }

 private:
  std::unique_ptr<VecEnv> env_;
  std::unique_ptr<ActorHandle> actor_;
  std::vector<float> obs_, peek_;    // (B, obs_dim), (B)
  std::vector<uint8_t> starts_;      // (B)
  std::atomic<long long> env_steps_{0};
};

}  // namespace mambarl

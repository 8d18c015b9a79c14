// The actor role on the CPU: one recurrent state slot per env, the T=1 step
// with per-env reset on episode_start, and action sampling (or, for greedy
// evaluation, the distribution's mode from the same forward pass). Holds its own copy
// of the weights (refreshed from the learner with a version number), so actor
// threads never read weights the learner is writing.
#pragma once

#include <memory>
#include <vector>

#include "kernels/base/rng.hpp"
#include "policy/actor_critic.hpp"

namespace mambarl {

class CpuActor {
 public:
  // Env b samples from stream first_env + b of `seed`: a data-parallel rank's
  // envs [first_env, first_env + num_envs) sample as in one whole-batch actor.
  CpuActor(std::shared_ptr<const ActorCritic<float>> model, int num_envs, uint64_t seed,
           uint64_t first_env = 0);

  int num_envs() const { return B_; }
  void set_weights(const float* w, size_t n, long long version);
  long long weights_version() const { return version_; }

  void reset(const uint8_t* mask);  // (B)
  // greedy: act() takes the mode (argmax of the logits, the Gaussian's mean)
  // instead of sampling; the Rngs are not drawn from. logp is that action's.
  void set_greedy(bool greedy) { greedy_ = greedy; }
  // obs (B, obs_dim), episode_start (B) -> actions (B, act_width), logp (B), values (B).
  // Env b with episode_start[b] = 1 has its state zeroed before the step.
  void act(const float* obs, const uint8_t* episode_start, float* actions, float* logp,
           float* values);
  // V(obs) from the current state without advancing it (bootstrap of truncated episodes).
  void peek_values(const float* obs, float* values);

  AlignedVec<float>& state() { return state_; }  // (B, state_size)
  std::vector<Rng>& rngs() { return rngs_; }        // one per env: sampling is independent of B

 private:
  std::shared_ptr<const ActorCritic<float>> model_;
  int B_;
  AlignedVec<float> params_;
  long long version_ = -1;
  bool greedy_ = false;
  AlignedVec<float> state_, peek_state_;  // (B, state_size)
  std::vector<Rng> rngs_;
  std::vector<uint8_t> no_starts_;       // (B) zeros, for peek
  ActorCritic<float>::Cache cache_;
  Mat<float> obs_, head_;                // (B, obs_dim), (B, A)
  Vec<float> values_;                    // (B)
  std::vector<float> logp_scratch_;      // (A)
};

}  // namespace mambarl

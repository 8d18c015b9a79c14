// EnvBatch<Env>: the (B, ·) buffers of a batch of one env type, and the one
// definition of what resetting and stepping env b does to them: the time
// limit, auto-reset inside step, final_obs and the per-episode return/length
// bookkeeping (Gymnasium's vector env + TimeLimit). The CPU BatchedEnv
// (envs/batched_env.hpp) and the CUDA kernel (envs/gpu_batched_env.cuh) both
// call these MAMBARL_HD functions over their own memory, so the two backends
// cannot drift apart: from the same seed and actions they write the same
// values (bit for bit, except cartpole's cos/sin: see gpu_batched_env.cuh).
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>

#include "kernels/rng.hpp"

namespace mambarl {

struct EnvStepResult {
  float reward = 0.0f;
  bool terminated = false;
};

// A discrete action is an integral value in [0, n). Written so that NaN fails
// too (every comparison with NaN is false).
MAMBARL_HD inline bool is_valid_action(float a, int n) {
  return a >= 0.0f && a < static_cast<float>(n) && a == floorf(a);
}

// Plain pointers into memory the owner keeps fixed (host vectors or device
// buffers); a value type, so a kernel takes it by value.
template <typename Env>
struct EnvBatch {
  Env* envs;                // (B): the state of each env's episode
  Rng* rngs;                // (B): env b's stream, Rng(seed, b)
  float* obs;               // (B, obs_dim)
  float* final_obs;         // (B, obs_dim)
  float* reward;            // (B)
  uint8_t* terminated;      // (B)
  uint8_t* truncated;       // (B)
  float* episode_return;    // (B)
  int32_t* episode_length;  // (B)
  double* running_return;   // (B): of the episode in progress
  int32_t* running_length;  // (B)
  int obs_dim;
  int max_episode_steps;  // 0: no time limit

  // Starts env b's stream and first episode; its outputs read "nothing happened".
  MAMBARL_HD void reset_env(int b, uint64_t seed) const {
    float* o = obs + static_cast<size_t>(b) * obs_dim;
    rngs[b] = Rng(seed, static_cast<uint64_t>(b));
    envs[b].reset(rngs[b], o);
    copy_obs(o, final_obs + static_cast<size_t>(b) * obs_dim);
    reward[b] = 0.0f;
    terminated[b] = 0;
    truncated[b] = 0;
    episode_return[b] = 0.0f;
    episode_length[b] = 0;
    running_return[b] = 0.0;
    running_length[b] = 0;
  }

  // Steps env b with a valid action; auto-resets it where the episode ended.
  MAMBARL_HD void step_env(int b, int action) const {
    float* o = obs + static_cast<size_t>(b) * obs_dim;
    float* fin = final_obs + static_cast<size_t>(b) * obs_dim;
    const EnvStepResult r = envs[b].step(action, fin);
    // The episode's return sums in double: 600 steps of 1/600 must give 1 to float precision.
    running_return[b] += r.reward;
    running_length[b] += 1;
    const bool trunc = max_episode_steps > 0 && running_length[b] >= max_episode_steps;
    reward[b] = r.reward;
    terminated[b] = r.terminated;
    truncated[b] = trunc;
    if (r.terminated || trunc) {
      episode_return[b] = static_cast<float>(running_return[b]);
      episode_length[b] = running_length[b];
      running_return[b] = 0.0;
      running_length[b] = 0;
      envs[b].reset(rngs[b], o);
    } else {
      episode_return[b] = 0.0f;
      episode_length[b] = 0;
      copy_obs(fin, o);
    }
  }

 private:
  MAMBARL_HD void copy_obs(const float* from, float* to) const {
    for (int i = 0; i < obs_dim; ++i) to[i] = from[i];
  }
};

}  // namespace mambarl

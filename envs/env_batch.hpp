// EnvBatch<Env>: the (B, ·) buffers of a batch of one env type, and the one
// definition of what resetting and stepping env b does to them: the time
// limit, auto-reset inside step, final_obs and the per-episode return/length
// bookkeeping (Gymnasium's vector env + TimeLimit). The CPU BatchedEnv
// (envs/batched_env.hpp) and the CUDA kernel (envs/gpu_batched_env.cuh) both
// call these MAMBARL_HD functions over their own memory, so the two backends
// cannot drift apart: from the same seed and actions they write the same
// values (bit for bit, except cartpole's cos/sin: see gpu_batched_env.cuh).
//
// The previous-action wrapper (env.prev_action, as POPGym's baselines wrap
// every env) lives here too, so that it is one definition on both backends:
// with prev_action_n = n > 0 each obs row is the env's own observation
// followed by a one-hot of the action that led to it (all zeros on an
// episode's first observation), and the spec grows by n entries in [0, 1]
// (with_prev_action below).
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>

#include "envs/vec_env.hpp"
#include "kernels/base/rng.hpp"

namespace mambarl {

// out[0, n) = the one-hot code of `hot` (all zeros when hot is outside [0, n)).
MAMBARL_HD inline void write_one_hot(float* out, int n, int hot) {
  for (int i = 0; i < n; ++i) out[i] = i == hot ? 1.0f : 0.0f;
}

// The spec of env `s` with the previous action appended to its observation.
inline EnvSpec with_prev_action(EnvSpec s) {
  s.obs_dim += s.action.n;
  s.obs_low.resize(static_cast<size_t>(s.obs_dim), 0.0f);
  s.obs_high.resize(static_cast<size_t>(s.obs_dim), 1.0f);
  return s;
}

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
  int obs_dim;            // the row width: the env's own observation, then prev_action_n
  int max_episode_steps;  // 0: no time limit
  int prev_action_n;      // 0: off; else the action count, a one-hot of the last action ends each row

  // Starts env b's stream (first_env + b of `seed`) and first episode; its
  // outputs read "nothing happened".
  MAMBARL_HD void reset_env(int b, uint64_t seed, uint64_t first_env = 0) const {
    float* o = obs + static_cast<size_t>(b) * obs_dim;
    rngs[b] = Rng(seed, first_env + static_cast<uint64_t>(b));
    start_episode(b, o);
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
    write_one_hot(fin + (obs_dim - prev_action_n), prev_action_n, action);
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
      start_episode(b, o);
    } else {
      episode_return[b] = 0.0f;
      episode_length[b] = 0;
      copy_obs(fin, o);
    }
  }

 private:
  // A new episode's first observation: the env's own, and no previous action.
  MAMBARL_HD void start_episode(int b, float* o) const {
    envs[b].reset(rngs[b], o);
    write_one_hot(o + (obs_dim - prev_action_n), prev_action_n, -1);
  }
  MAMBARL_HD void copy_obs(const float* from, float* to) const {
    for (int i = 0; i < obs_dim; ++i) to[i] = from[i];
  }
};

}  // namespace mambarl

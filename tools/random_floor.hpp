// The return of a uniformly random policy on an env: the floor a results
// table compares learned policies against (a memory task's "chance level").
// Played on the CPU, no policy or training involved.
#pragma once

#include <cstdint>

#include "envs/vec_env.hpp"

namespace mambarl {

struct RandomFloor {
  double mean_return = 0;
  double std_error = 0;  // of mean_return: sample std / sqrt(episodes)
  long long episodes = 0;
  long long env_steps = 0;
};

// Resets `env` with `seed` and plays actions drawn uniformly (discrete: each
// of n equally likely; continuous: uniform within the bounds) from
// Rng(seed, env index). Averages the first k whole episodes of every env, k
// chosen so that there are at least `min_episodes`, doubled while the
// standard error is above `max_std_error` and the episodes stay within
// `max_episodes`. Counting the first k of each env, rather than the first
// episodes to end, keeps short episodes from being over-represented.
RandomFloor measure_random_floor(VecEnv& env, uint64_t seed, long long min_episodes = 1000,
                                 double max_std_error = 0.01, long long max_episodes = 16384);

}  // namespace mambarl

// Episode-level helpers of the env suites (test_envs, test_popgym_cards): build
// a VecEnv from YAML, run a per-env policy until enough episodes have ended
// (checking the env's own return and length bookkeeping on the way), and the
// statistics the reference checks compare against.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "envs/vec_env.hpp"

namespace mambarl::test {

inline std::unique_ptr<VecEnv> make_env(const std::string& yaml) {
  return make_vec_env(ConfigNode(YAML::Load(yaml), "test.yaml", "env"));
}

// A finished episode: (return, length, terminated, truncated).
struct Episode {
  double ret = 0;
  int length = 0;
  bool terminated = false, truncated = false;
};

// Runs `policy(obs_row, b) -> action` (it sees one env's obs per call and keeps its own
// per-env memory) until `episodes` episodes have ended; checks the env's return and
// length against the sums kept here, and calls `on_start(b)` when env b starts an
// episode: at the reset, and right after each episode it records (env.final_obs()
// then still holds that episode's last observation).
template <typename Policy, typename OnStart>
std::vector<Episode> run_episodes(VecEnv& env, uint64_t seed, int episodes, Policy&& policy,
                                  OnStart&& on_start) {
  const int B = env.num_envs(), O = env.spec().obs_dim;
  std::vector<float> a(static_cast<size_t>(B));  // (B)
  std::vector<double> ret(static_cast<size_t>(B), 0.0);
  std::vector<int> len(static_cast<size_t>(B), 0);
  std::vector<Episode> out;
  env.reset(seed);
  for (int b = 0; b < B; ++b) on_start(b);
  while (static_cast<int>(out.size()) < episodes) {
    for (int b = 0; b < B; ++b) a[b] = static_cast<float>(policy(env.obs() + b * O, b));
    env.step(a.data());
    for (int b = 0; b < B; ++b) {
      ret[b] += env.reward()[b];
      len[b] += 1;
      if (env.terminated()[b] || env.truncated()[b]) {
        // The env sums the same float rewards in double and rounds to float once; 1e-5 is ample.
        BOOST_TEST(std::abs(env.episode_return()[b] - ret[b]) <= 1e-5 * std::max(1.0, std::abs(ret[b])));
        BOOST_TEST(env.episode_length()[b] == len[b]);
        out.push_back({ret[b], len[b], env.terminated()[b] != 0, env.truncated()[b] != 0});
        ret[b] = 0;
        len[b] = 0;
        on_start(b);
      }
    }
  }
  return out;
}

inline double mean_return(const std::vector<Episode>& eps) {
  double s = 0;
  for (const auto& e : eps) s += e.ret;
  return s / static_cast<double>(eps.size());
}
inline double sd_of_mean(const std::vector<Episode>& eps) {
  const double m = mean_return(eps);
  double s = 0;
  for (const auto& e : eps) s += (e.ret - m) * (e.ret - m);
  return std::sqrt(s / static_cast<double>(eps.size() - 1) / static_cast<double>(eps.size()));
}

inline int argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

// Steps env 0 through one whole episode (action 0) and histograms the one-hot
// group obs[offset .. offset+V) over all its observations, the final one included.
inline std::vector<int> feature_histogram(VecEnv& env, int offset, int V) {
  const std::vector<float> zeros(static_cast<size_t>(env.num_envs()), 0.0f);
  std::vector<int> h(static_cast<size_t>(V), 0);
  env.reset(21);
  h[argmax(env.obs() + offset, V)] += 1;
  do {
    env.step(zeros.data());
    h[argmax(env.final_obs() + offset, V)] += 1;
  } while (!env.terminated()[0] && !env.truncated()[0]);
  return h;
}

}  // namespace mambarl::test

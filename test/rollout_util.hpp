// What the CPU and GPU suites check of a double-buffered RolloutWorker
// (tools/rollout.hpp): a worker of two lanes fills, column block by column
// block, exactly the chunks that two one-lane workers of the same envs, seeds
// and weights fill on their own, and presents their state concatenated.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <yaml-cpp/yaml.h>

#include "envs/vec_env.hpp"
#include "plugin/plugin_host.hpp"
#include "tools/rollout.hpp"

namespace mambarl::test {

// `B` envs of the env config `env_yaml` (a YAML map without num_envs).
inline std::unique_ptr<VecEnv> make_envs(const std::string& env_yaml, int B) {
  YAML::Node n = YAML::Load(env_yaml);
  n["num_envs"] = B;
  return make_vec_env(ConfigNode(n, "<rollout test>", "env"));
}

inline RolloutLane make_lane(PolicyHandle& policy, const std::string& env_yaml, int B, uint64_t env_seed,
                             uint64_t actor_seed) {
  return {make_envs(env_yaml, B), policy.create_actor(B, actor_seed), env_seed};
}

// Columns [col0, col0 + n) of a (rows, B, width) buffer, as (rows, n, width).
template <typename T>
std::vector<T> columns(const std::vector<T>& v, int rows, int B, size_t width, int col0, int n) {
  std::vector<T> out;
  for (int r = 0; r < rows; ++r) {
    const auto first = v.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(r) * B + col0) * width);
    out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(n * width));
  }
  return out;
}

// Every per-env record of `whole` in columns [col0, col0 + part.B) equals `part`'s.
inline void check_columns(const Chunk& whole, const Chunk& part, int col0) {
  const int T = whole.T, B = whole.B, n = part.B;
  BOOST_TEST(columns(whole.obs, T, B, whole.obs_dim, col0, n) == part.obs);
  BOOST_TEST(columns(whole.actions, T, B, whole.act_width, col0, n) == part.actions);
  BOOST_TEST(columns(whole.logp, T, B, 1, col0, n) == part.logp);
  BOOST_TEST(columns(whole.values, T, B, 1, col0, n) == part.values);
  BOOST_TEST(columns(whole.rewards, T, B, 1, col0, n) == part.rewards);
  BOOST_TEST(columns(whole.starts, T, B, 1, col0, n) == part.starts);
  BOOST_TEST(columns(whole.terminated, T, B, 1, col0, n) == part.terminated);
  BOOST_TEST(columns(whole.truncated, T, B, 1, col0, n) == part.truncated);
  BOOST_TEST(columns(whole.final_values, T, B, 1, col0, n) == part.final_values);
  BOOST_TEST(columns(whole.next_values, 1, B, 1, col0, n) == part.next_values);
  BOOST_TEST(columns(whole.initial_state, 1, B, whole.state_size, col0, n) == part.initial_state);
}

// (return, length) of the episodes that ended in chunks, sorted: the two-lane
// worker lists each step's lane 0 episodes before lane 1's, so only the set is comparable.
inline std::vector<std::pair<float, int32_t>> sorted_episodes(const std::vector<const Chunk*>& chunks) {
  std::vector<std::pair<float, int32_t>> e;
  for (const Chunk* c : chunks)
    for (size_t i = 0; i < c->episode_returns.size(); ++i) e.emplace_back(c->episode_returns[i], c->episode_lengths[i]);
  std::sort(e.begin(), e.end());
  return e;
}

template <typename T>
std::vector<T> concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A worker of two lanes of B/2 envs against two one-lane workers of the same
// lanes' seeds, over `num_chunks` chunks of T steps with `policy`'s weights:
// every chunk's columns, its episodes, and the worker's concatenated state
// after each chunk. The env must truncate some episodes in that time, so that
// the truncation bootstrap (peek_values between a lane's act_end and its next
// act_begin) is covered too.
inline void check_two_lanes_match_two_workers(PolicyHandle& policy, const std::string& env_yaml, int B, int T,
                                               int num_chunks) {
  BOOST_REQUIRE(B % 2 == 0);
  const int h = B / 2;
  const uint64_t env_seed[2] = {11, 12}, actor_seed[2] = {21, 22};
  std::vector<RolloutLane> lanes;
  for (int l = 0; l < 2; ++l) lanes.push_back(make_lane(policy, env_yaml, h, env_seed[l], actor_seed[l]));
  RolloutWorker both(std::move(lanes));
  std::vector<std::unique_ptr<RolloutWorker>> alone;
  for (int l = 0; l < 2; ++l) {
    std::vector<RolloutLane> one;
    one.push_back(make_lane(policy, env_yaml, h, env_seed[l], actor_seed[l]));
    alone.push_back(std::make_unique<RolloutWorker>(std::move(one)));
  }
  BOOST_TEST(both.num_lanes() == 2);
  BOOST_TEST(both.num_envs() == B);
  std::vector<float> w;
  policy.get_weights(w);
  const mambarl_policy_info& info = policy.info();
  const int O = make_envs(env_yaml, 1)->spec().obs_dim;
  int truncations = 0;
  for (int k = 0; k < num_chunks; ++k) {
    BOOST_TEST_CONTEXT("chunk " << k) {
      Chunk whole, part[2];
      whole.allocate(T, B, O, static_cast<int>(info.act_width), static_cast<size_t>(info.state_size));
      both.set_weights(w, k);
      both.collect(whole);
      for (int l = 0; l < 2; ++l) {
        part[l].allocate(T, h, O, static_cast<int>(info.act_width), static_cast<size_t>(info.state_size));
        alone[static_cast<size_t>(l)]->set_weights(w, k);
        alone[static_cast<size_t>(l)]->collect(part[l]);
        BOOST_TEST_CONTEXT("lane " << l) { check_columns(whole, part[l], l * h); }
      }
      BOOST_TEST(whole.policy_version == k);
      for (uint8_t f : whole.truncated) truncations += f;
      BOOST_TEST(sorted_episodes({&whole}) == sorted_episodes({&part[0], &part[1]}));
      // The lanes' seeds differ, so a swap of the column blocks could not pass the checks above.
      BOOST_TEST(part[0].obs != part[1].obs);

      std::vector<float> s0, s1, s;
      alone[0]->get_actor_state(s0);
      alone[1]->get_actor_state(s1);
      both.get_actor_state(s);
      BOOST_TEST(s == concat(s0, s1));
      std::vector<uint8_t> r0, r1, r;
      alone[0]->get_actor_rng(r0);
      alone[1]->get_actor_rng(r1);
      both.get_actor_rng(r);
      BOOST_TEST(r == concat(r0, r1));
      BOOST_TEST(both.save_env_state() == concat(alone[0]->save_env_state(), alone[1]->save_env_state()));
      BOOST_TEST(both.obs() == concat(alone[0]->obs(), alone[1]->obs()));
      BOOST_TEST(both.starts() == concat(alone[0]->starts(), alone[1]->starts()));
      BOOST_TEST(both.env_steps() == static_cast<long long>(k + 1) * T * B);
    }
  }
  BOOST_TEST(truncations > 0);
}

}  // namespace mambarl::test

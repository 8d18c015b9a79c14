// One random [T, B] training chunk in the plugin ABI's layout, for the suites
// that drive a policy through PolicyHandle::train_step: random observations,
// valid actions (integers in [0, A) or Gaussian draws), old logp near the
// policy's, resets at t = 0 and inside, and a non-zero initial state.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/base/rng.hpp"
#include "plugin/plugin_host.hpp"
#include "plugin/tensor_view.hpp"

namespace mambarl::test {

struct PluginChunk {
  int T, B, O;
  int64_t W, S;
  std::vector<float> obs, actions, logp, adv, ret, init;  // (T,B,O) (T,B,W) (T,B)x3 (B,S)
  std::vector<uint8_t> starts;                            // (T,B)

  PluginChunk(const PolicyHandle& p, int obs_dim, bool discrete, int action_dim, int T_, int B_,
              uint64_t seed)
      : T(T_), B(B_), O(obs_dim), W(p.info().act_width), S(p.info().state_size) {
    Rng rng(seed, 0);
    const size_t n = static_cast<size_t>(T) * B;
    for (size_t i = 0; i < n * static_cast<size_t>(O); ++i) obs.push_back(static_cast<float>(rng.normal()));
    for (size_t i = 0; i < n * static_cast<size_t>(W); ++i)
      actions.push_back(discrete ? static_cast<float>(rng.below(static_cast<uint64_t>(action_dim)))
                                 : static_cast<float>(rng.normal()));
    const double logp0 = discrete ? -std::log(action_dim) : -1.4 * static_cast<double>(W);
    for (size_t i = 0; i < n; ++i) {
      logp.push_back(static_cast<float>(logp0 + 0.3 * rng.normal()));
      adv.push_back(static_cast<float>(rng.normal()));
      ret.push_back(static_cast<float>(rng.normal()));
      starts.push_back(i < static_cast<size_t>(B) || rng.uniform() < 0.1 ? 1 : 0);
    }
    for (int64_t i = 0; i < B * S; ++i) init.push_back(static_cast<float>(0.3 * rng.normal()));
  }

  // The chunk's view of arrays shaped as this one's, at `device` (a copy of
  // these arrays on the GPU, say); view() is the host arrays themselves.
  mambarl_chunk view_of(const float* obs_p, const float* actions_p, const float* logp_p, const float* adv_p,
                        const float* ret_p, const uint8_t* starts_p, const float* init_p,
                        int32_t device) const {
    mambarl_chunk c{};
    c.obs = view_f32(obs_p, {T, B, O}, device);
    c.actions = view_f32(actions_p, {T, B, W}, device);
    c.old_logp = view_f32(logp_p, {T, B}, device);
    c.advantages = view_f32(adv_p, {T, B}, device);
    c.returns = view_f32(ret_p, {T, B}, device);
    c.episode_start = view_u8(starts_p, {T, B}, device);
    c.initial_state = view_f32(init_p, {B, S}, device);
    return c;
  }
  mambarl_chunk view() const {
    return view_of(obs.data(), actions.data(), logp.data(), adv.data(), ret.data(), starts.data(),
                   init.data(), MAMBARL_DEVICE_CPU);
  }
};

}  // namespace mambarl::test

// BatchedEnv<Env>: the one VecEnv implementation behind every bundled env type.
// It owns B copies of a plain env struct and does, once for all types, what
// Gymnasium's vector envs and TimeLimit do: action validation, the time limit,
// auto-reset inside step, final_obs and per-episode return/length bookkeeping.
//
// An Env is a plain, copyable struct (after envpool / PufferLib ocean) holding
// its parameters and the state of ONE episode, writing into slices the caller owns:
//   EnvSpec spec() const;                      // declarative; the same for every copy
//   void reset(Rng& rng, float* obs);          // starts an episode; writes its first obs (obs_dim)
//   EnvStepResult step(int action, float* obs); // action in [0, spec().action.n); writes the next obs
//   void render(std::ostream& os) const;       // text picture of the current state
// The env decides `terminated`; `truncated` comes from spec().max_episode_steps here.
// reset/step are MAMBARL_HD (the CUDA backend runs the same code), and the
// per-env bookkeeping is EnvBatch's (envs/env_batch.hpp), shared with it too.
#pragma once

#include <cstring>
#include <ostream>
#include <type_traits>
#include <vector>

#include "envs/env_batch.hpp"
#include "envs/vec_env.hpp"
#include "kernels/base/check.hpp"
#include "kernels/base/rng.hpp"

namespace mambarl {

template <typename Env>
class BatchedEnv final : public VecEnv {
  static_assert(std::is_trivially_copyable_v<Env>, "env state is saved as raw bytes");

 public:
  // prev_action: append a one-hot of the previous action to every
  // observation (env.prev_action; EnvBatch says how).
  BatchedEnv(const Env& prototype, int num_envs, bool prev_action = false)
      : spec_(prev_action ? with_prev_action(prototype.spec()) : prototype.spec()),
        prev_action_n_(prev_action ? spec_.action.n : 0),
        B_(num_envs), envs_(static_cast<size_t>(num_envs), prototype) {
    MAMBARL_CHECK(B_ >= 1, spec_.id << ": num_envs must be >= 1, got " << B_);
    MAMBARL_CHECK(spec_.action.discrete && spec_.action.n >= 1,
                  spec_.id << ": BatchedEnv steps discrete action spaces only");
    MAMBARL_CHECK(spec_.obs_dim >= 1 && static_cast<int>(spec_.obs_low.size()) == spec_.obs_dim &&
                      static_cast<int>(spec_.obs_high.size()) == spec_.obs_dim,
                  spec_.id << ": obs bounds must have obs_dim entries");
    const size_t B = static_cast<size_t>(B_), O = static_cast<size_t>(spec_.obs_dim);
    rngs_.resize(B);
    obs_.assign(B * O, 0.0f);
    final_obs_.assign(B * O, 0.0f);
    reward_.assign(B, 0.0f);
    terminated_.assign(B, 0);
    truncated_.assign(B, 0);
    episode_return_.assign(B, 0.0f);
    episode_length_.assign(B, 0);
    running_return_.assign(B, 0.0);
    running_length_.assign(B, 0);
  }

  const EnvSpec& spec() const override { return spec_; }
  int num_envs() const override { return B_; }

  void reset(uint64_t seed, uint64_t first_env = 0) override {
    const EnvBatch<Env> batch = view();
    for (int b = 0; b < B_; ++b) batch.reset_env(b, seed, first_env);
  }

  void step(const float* actions) override {
    const int n = spec_.action.n;
    // Validate the whole batch first, so that a bad action leaves every env unstepped.
    for (int b = 0; b < B_; ++b)
      MAMBARL_CHECK(is_valid_action(actions[b], n), spec_.id << ": env " << b << " got action " << actions[b]
                                                              << ", expected an integer in [0, " << n - 1 << "]");
    const EnvBatch<Env> batch = view();
    for (int b = 0; b < B_; ++b) batch.step_env(b, static_cast<int>(actions[b]));
  }

  const float* obs() const override { return obs_.data(); }
  const float* final_obs() const override { return final_obs_.data(); }
  const float* reward() const override { return reward_.data(); }
  const uint8_t* terminated() const override { return terminated_.data(); }
  const uint8_t* truncated() const override { return truncated_.data(); }
  const float* episode_return() const override { return episode_return_.data(); }
  const int32_t* episode_length() const override { return episode_length_.data(); }

  std::vector<uint8_t> save_state() const override {
    std::vector<uint8_t> out;
    append(out, envs_);
    append(out, rngs_);
    append(out, obs_);
    append(out, running_return_);
    append(out, running_length_);
    return out;
  }

  void load_state(const std::vector<uint8_t>& bytes) override {
    const size_t expected = bytes_of(envs_) + bytes_of(rngs_) + bytes_of(obs_) + bytes_of(running_return_) +
                            bytes_of(running_length_);
    MAMBARL_CHECK(bytes.size() == expected, spec_.id << ": saved env state has " << bytes.size()
                                                     << " bytes, expected " << expected << " for " << B_
                                                     << " envs of this type");
    size_t at = 0;
    extract(bytes, at, envs_);
    extract(bytes, at, rngs_);
    extract(bytes, at, obs_);
    extract(bytes, at, running_return_);
    extract(bytes, at, running_length_);
  }

  void render(int env, std::ostream& os) const override {
    MAMBARL_CHECK(env >= 0 && env < B_, spec_.id << ": render of env " << env << " of " << B_);
    envs_[static_cast<size_t>(env)].render(os);
  }

 private:
  EnvBatch<Env> view() {
    return {envs_.data(),           rngs_.data(),      obs_.data(),           final_obs_.data(),
            reward_.data(),         terminated_.data(), truncated_.data(),    episode_return_.data(),
            episode_length_.data(), running_return_.data(), running_length_.data(), spec_.obs_dim,
            spec_.max_episode_steps, prev_action_n_};
  }

  template <typename T>
  static size_t bytes_of(const std::vector<T>& v) { return v.size() * sizeof(T); }
  template <typename T>
  static void append(std::vector<uint8_t>& out, const std::vector<T>& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out.insert(out.end(), p, p + bytes_of(v));
  }
  template <typename T>
  static void extract(const std::vector<uint8_t>& in, size_t& at, std::vector<T>& v) {
    std::memcpy(static_cast<void*>(v.data()), in.data() + at, bytes_of(v));
    at += bytes_of(v);
  }

  EnvSpec spec_;
  int prev_action_n_;  // 0, or the action count when the previous action is observed
  int B_;
  std::vector<Env> envs_;               // (B)
  std::vector<Rng> rngs_;               // (B): env b's stream, Rng(seed, b)
  std::vector<float> obs_;              // (B, obs_dim)
  std::vector<float> final_obs_;        // (B, obs_dim)
  std::vector<float> reward_;           // (B)
  std::vector<uint8_t> terminated_;     // (B)
  std::vector<uint8_t> truncated_;      // (B)
  std::vector<float> episode_return_;   // (B)
  std::vector<int32_t> episode_length_; // (B)
  std::vector<double> running_return_;  // (B): of the episode in progress
  std::vector<int32_t> running_length_; // (B)
};

}  // namespace mambarl

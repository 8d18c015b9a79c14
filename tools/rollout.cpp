#include "tools/rollout.hpp"

#include <algorithm>
#include <cstring>

namespace mambarl {

void Chunk::allocate(int T_, int B_, int obs_dim_, int act_width_, size_t state_size_) {
  T = T_, B = B_, obs_dim = obs_dim_, act_width = act_width_, state_size = state_size_;
  const size_t n = static_cast<size_t>(T) * B;
  obs.assign(n * obs_dim, 0.0f);
  actions.assign(n * act_width, 0.0f);
  for (auto* v : {&logp, &values, &rewards, &final_values, &advantages, &returns}) v->assign(n, 0.0f);
  for (auto* v : {&starts, &terminated, &truncated}) v->assign(n, 0);
  next_values.assign(static_cast<size_t>(B), 0.0f);
  initial_state.assign(static_cast<size_t>(B) * state_size, 0.0f);
}

RolloutWorker::RolloutWorker(std::unique_ptr<VecEnv> env, std::unique_ptr<ActorHandle> actor,
                             uint64_t env_seed)
    : env_(std::move(env)), actor_(std::move(actor)) {
  const int B = env_->num_envs(), O = env_->spec().obs_dim;
  env_->reset(env_seed);
  obs_.assign(env_->obs(), env_->obs() + static_cast<size_t>(B) * O);
  peek_.assign(static_cast<size_t>(B), 0.0f);
  starts_.assign(static_cast<size_t>(B), 1);  // the first step of a run starts an episode
}

void RolloutWorker::collect(Chunk& c) {
  const int B = c.B, O = c.obs_dim, W = c.act_width;
  actor_->get_state(c.initial_state);
  c.policy_version = actor_->weights_version();
  c.episode_returns.clear();
  c.episode_lengths.clear();
  for (int t = 0; t < c.T; ++t) {
    const size_t row = static_cast<size_t>(t) * B;
    std::copy(obs_.begin(), obs_.end(), c.obs.begin() + static_cast<std::ptrdiff_t>(row * O));
    std::copy(starts_.begin(), starts_.end(), c.starts.begin() + static_cast<std::ptrdiff_t>(row));
    float* act = c.actions.data() + row * W;
    actor_->act(obs_.data(), starts_.data(), act, c.logp.data() + row, c.values.data() + row);
    env_->step(act);
    env_steps_.fetch_add(B, std::memory_order_relaxed);
    const float* r = env_->reward();
    const uint8_t* term = env_->terminated();
    const uint8_t* trunc = env_->truncated();
    bool any_trunc = false;
    for (int b = 0; b < B; ++b) {
      c.rewards[row + b] = r[b];
      c.terminated[row + b] = term[b];
      c.truncated[row + b] = trunc[b];
      c.final_values[row + b] = 0.0f;
      any_trunc = any_trunc || trunc[b];
      starts_[static_cast<size_t>(b)] = term[b] || trunc[b];
      if (term[b] || trunc[b]) {
        c.episode_returns.push_back(env_->episode_return()[b]);
        c.episode_lengths.push_back(env_->episode_length()[b]);
      }
    }
    // A time limit is not a terminal state: bootstrap from V(final obs),
    // evaluated on the state that saw the episode (before the reset).
    if (any_trunc) {
      actor_->peek_values(env_->final_obs(), peek_.data());
      for (int b = 0; b < B; ++b)
        if (trunc[b]) c.final_values[row + b] = peek_[static_cast<size_t>(b)];
    }
    std::copy(env_->obs(), env_->obs() + static_cast<size_t>(B) * O, obs_.begin());
  }
  actor_->peek_values(obs_.data(), c.next_values.data());
}

}  // namespace mambarl

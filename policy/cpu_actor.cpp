#include "policy/cpu_actor.hpp"

#include <cmath>
#include <cstring>

#include "policy/distributions.hpp"

namespace mambarl {

CpuActor::CpuActor(std::shared_ptr<const ActorCritic<float>> model, int num_envs, uint64_t seed,
                   uint64_t first_env)
    : model_(std::move(model)),
      B_(num_envs),
      params_(model_->layout().size(), 0.0f),
      state_(static_cast<size_t>(num_envs) * model_->state_size(), 0.0f),
      no_starts_(static_cast<size_t>(num_envs), 0),
      cache_(model_->make_cache()),
      logp_scratch_(static_cast<size_t>(model_->spec().head.action_dim)) {
  MAMBARL_CHECK(num_envs >= 1, "actor: num_envs must be >= 1, got " << num_envs);
  for (int b = 0; b < num_envs; ++b)
    rngs_.emplace_back(seed, 0xAC7000 + first_env + static_cast<uint64_t>(b));
}

void CpuActor::set_weights(const float* w, size_t n, long long version) {
  MAMBARL_CHECK(n == params_.size(), "actor: weights have " << n << " floats, model has " << params_.size());
  std::memcpy(params_.data(), w, n * sizeof(float));
  version_ = version;
}

void CpuActor::reset(const uint8_t* mask) { model_->reset_state(state_.data(), B_, mask); }

void CpuActor::act(const float* obs, const uint8_t* episode_start, float* actions, float* logp,
                   float* values) {
  const auto& spec = model_->spec();
  obs_ = ConstMatMap<float>(obs, B_, spec.obs_dim);
  // The mixers zero the state of envs whose episode_start is set, before the step.
  model_->forward(params_.data(), obs_, episode_start, 1, B_, state_.data(), cache_, head_, values_);
  const int A = spec.head.action_dim;
  ParamView<float> P(model_->layout(), params_.data());
  for (int b = 0; b < B_; ++b) {
    const float* h = head_.data() + static_cast<size_t>(b) * A;
    Rng& rng = rngs_[static_cast<size_t>(b)];
    if (spec.head.discrete) {
      Categorical<float>::log_probs(h, A, logp_scratch_.data());
      const int a =
          greedy_ ? Categorical<float>::mode(h, A) : Categorical<float>::sample(logp_scratch_.data(), A, rng);
      actions[b] = static_cast<float>(a);
      logp[b] = logp_scratch_[static_cast<size_t>(a)];
    } else {
      const float* log_std = P.ptr(model_->log_std_id());
      float* a = actions + static_cast<size_t>(b) * A;
      for (int j = 0; j < A; ++j)
        a[j] = greedy_ ? h[j] : h[j] + std::exp(log_std[j]) * static_cast<float>(rng.normal());
      logp[b] = DiagGaussian<float>::log_prob(h, log_std, a, A);
    }
    values[b] = values_[b];
  }
}

void CpuActor::peek_values(const float* obs, float* values) {
  peek_state_ = state_;
  obs_ = ConstMatMap<float>(obs, B_, model_->spec().obs_dim);
  model_->forward(params_.data(), obs_, no_starts_.data(), 1, B_, peek_state_.data(), cache_, head_, values_);
  for (int b = 0; b < B_; ++b) values[b] = values_[b];
}

}  // namespace mambarl

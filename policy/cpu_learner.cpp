#include "policy/cpu_learner.hpp"

#include <cmath>

#include "policy/checkpoint.hpp"

namespace mambarl {

CpuLearner::CpuLearner(const PolicyConfig& policy, int obs_dim, const HeadSpec& head,
                       const PpoLossConfig& loss, const AdamWConfig& adam, uint64_t seed, Allreduce* across)
    : policy_(policy),
      loss_cfg_(loss),
      across_(across),
      model_(make_actor_critic<float>(policy, obs_dim, head)),
      params_(model_->layout().size()),
      grads_(model_->layout().size()),
      adam_(model_->layout(), adam),
      cache_(model_->make_cache()) {
  model_->init_params(params_.data(), seed);
}

TrainResult CpuLearner::train_step(const ChunkView& c, double lr) {
  const auto& spec = model_->spec();
  const int M = c.T * c.B;
  // A replica may own none of a minibatch's sequences; it still joins the sums.
  const bool empty = c.B == 0 && across_ != nullptr;
  MAMBARL_CHECK(c.T >= 1 && (c.B >= 1 || empty),
                "train_step: empty chunk (T=" << c.T << ", B=" << c.B << ")");
  MAMBARL_CHECK(c.context_T >= 0 && c.context_T < c.T,
                "train_step: " << c.context_T << " context steps in a chunk of T=" << c.T);
  MAMBARL_CHECK(!c.on_device,
                "train_step: the CPU learner reads host memory; this chunk is on a CUDA device");
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  if (empty) {
    head_.resize(0, spec.head.action_dim);
    values_.resize(0);
  } else {
    obs_ = ConstMatMap<float>(c.obs, M, spec.obs_dim);
    state_.assign(c.initial_state, c.initial_state + static_cast<size_t>(c.B) * model_->state_size());
    model_->forward(params_.data(), obs_, c.episode_start, c.T, c.B, state_.data(), cache_, head_, values_);
  }
  const ParamId ls = model_->log_std_id();
  ParamView<float> P(model_->layout(), params_.data()), G(model_->layout(), grads_.data());
  // The loss reads the last L = T - context_T steps, rows [Mc, M) time-major;
  // the context rows get zero head gradients (their state still carries the
  // loss rows' gradient back through the scan).
  const int Mc = c.context_T * c.B, Ml = M - Mc;
  head_loss_ = head_.bottomRows(Ml);
  values_loss_ = values_.tail(Ml);
  TrainResult r;
  // With replicas the loss is the whole minibatch's on every replica, so
  // they all skip, or all step, together.
  r.loss = ppo_loss<float>(spec.head, loss_cfg_, head_loss_, values_loss_, ls >= 0 ? P.ptr(ls) : nullptr,
                           PpoBatch{c.actions, c.old_logp, c.advantages, c.returns}, dhead_loss_,
                           dvalues_loss_, ls >= 0 ? G.ptr(ls) : nullptr, across_);
  dhead_.setZero(M, head_.cols());
  dhead_.bottomRows(Ml) = dhead_loss_;
  dvalues_.setZero(M);
  dvalues_.tail(Ml) = dvalues_loss_;
  if (!std::isfinite(r.loss.loss)) {
    r.skipped = true;
    r.reason = "loss is not finite (" + std::to_string(r.loss.loss) + ")";
    return r;
  }
  if (!empty)
    model_->backward(params_.data(), cache_, dhead_, dvalues_, loss_cfg_.vf_trunk_coef, grads_.data());
  // The one gradient reduction per minibatch, before the clip: the clip sees
  // the whole minibatch's norm.
  if (across_) across_->sum_gradient(grads_.data(), grads_.size());
  r.grad_norm = clip_grad_norm(grads_.data(), grads_.size(), adam_.config().max_grad_norm);
  if (!std::isfinite(r.grad_norm)) {
    r.skipped = true;
    for (const auto& p : model_->layout().params())
      for (size_t i = 0; i < p.numel; ++i)
        if (!std::isfinite(grads_[p.offset + i])) {
          r.reason = "gradient of " + p.name + " is not finite";
          return r;
        }
    r.reason = "gradient norm is not finite";
    return r;
  }
  adam_.step(params_.data(), grads_.data(), lr);
  return r;
}

void CpuLearner::save(const std::string& path, const std::map<std::string, std::string>& metadata,
                      const std::vector<TensorRecord>& extra) const {
  write_checkpoint(path, policy_, model_->layout(), params_.data(), adam_.exp_avg().data(),
                   adam_.exp_avg_sq().data(), adam_.step_count(), metadata, extra);
}

SafetensorsFile CpuLearner::load(const std::string& path) {
  LearnerState s;
  SafetensorsFile f = read_checkpoint(path, policy_, model_->layout(), s);
  params_.assign(s.params.begin(), s.params.end());
  adam_.exp_avg() = std::move(s.exp_avg);
  adam_.exp_avg_sq() = std::move(s.exp_avg_sq);
  adam_.set_step_count(s.step);
  return f;
}

}  // namespace mambarl

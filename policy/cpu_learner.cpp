#include "policy/cpu_learner.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

namespace mambarl {

namespace {
constexpr const char* kFormat = "mambarl-checkpoint-v1";

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

// Copies one named tensor into dst after checking its dtype and exact shape.
void load_tensor(const SafetensorsFile& f, const std::string& name, const std::vector<int64_t>& shape, float* dst,
                 const std::string& path) {
  const TensorRecord& t = f.at(name);
  MAMBARL_CHECK(t.shape == shape, path << ": tensor '" << name << "' has shape " << shape_str(t.shape)
                                       << ", this model expects " << shape_str(shape));
  copy_to(t, dst, shape_numel(shape));
}

std::string emit(const YAML::Node& n) {
  YAML::Emitter e;
  e << n;
  return e.c_str();
}
}  // namespace

CpuLearner::CpuLearner(const PolicyConfig& policy, int obs_dim, const HeadSpec& head,
                       const PpoLossConfig& loss, const AdamWConfig& adam, uint64_t seed)
    : policy_(policy),
      loss_cfg_(loss),
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
  MAMBARL_CHECK(c.T >= 1 && c.B >= 1, "train_step: empty chunk (T=" << c.T << ", B=" << c.B << ")");
  obs_ = ConstMatMap<float>(c.obs, M, spec.obs_dim);
  state_.assign(c.initial_state, c.initial_state + static_cast<size_t>(c.B) * model_->state_size());
  std::fill(grads_.begin(), grads_.end(), 0.0f);

  model_->forward(params_.data(), obs_, c.episode_start, c.T, c.B, state_.data(), cache_, head_, values_);
  const ParamId ls = model_->log_std_id();
  ParamView<float> P(model_->layout(), params_.data()), G(model_->layout(), grads_.data());
  TrainResult r;
  r.loss = ppo_loss<float>(spec.head, loss_cfg_, head_, values_, ls >= 0 ? P.ptr(ls) : nullptr,
                           PpoBatch{c.actions, c.old_logp, c.advantages, c.returns}, dhead_,
                           dvalues_, ls >= 0 ? G.ptr(ls) : nullptr);
  if (!std::isfinite(r.loss.loss)) {
    r.skipped = true;
    r.reason = "loss is not finite (" + std::to_string(r.loss.loss) + ")";
    return r;
  }
  model_->backward(params_.data(), cache_, dhead_, dvalues_, grads_.data());
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
  SafetensorsFile f;
  f.metadata = metadata;
  f.metadata["format"] = kFormat;
  f.metadata["policy_config"] = emit(policy_.to_yaml());
  f.metadata["optimizer_step"] = std::to_string(adam_.step_count());
  for (const auto& p : model_->layout().params()) {
    f.tensors.push_back(make_tensor(p.name, p.shape, params_.data() + p.offset));
  }
  for (const auto& p : model_->layout().params()) {
    f.tensors.push_back(make_tensor("optimizer.exp_avg." + p.name, p.shape,
                                    adam_.exp_avg().data() + p.offset));
    f.tensors.push_back(make_tensor("optimizer.exp_avg_sq." + p.name, p.shape,
                                    adam_.exp_avg_sq().data() + p.offset));
  }
  for (const auto& t : extra) f.tensors.push_back(t);
  write_safetensors(path, f);
}

SafetensorsFile CpuLearner::load(const std::string& path) {
  SafetensorsFile f = read_safetensors(path);
  const auto meta = [&](const std::string& k) -> const std::string& {
    auto it = f.metadata.find(k);
    MAMBARL_CHECK(it != f.metadata.end(), path << ": not a mambarl checkpoint (no '" << k << "' metadata)");
    return it->second;
  };
  MAMBARL_CHECK(meta("format") == kFormat, path << ": checkpoint format '" << meta("format")
                                                << "', expected '" << kFormat << "'");
  const std::string mine = emit(policy_.to_yaml());
  MAMBARL_CHECK(meta("policy_config") == mine,
                path << ": checkpoint was written by a different policy config:\n"
                     << meta("policy_config") << "\nthis run's policy:\n" << mine);
  // Read everything into temporaries first, so a bad tensor leaves us untouched.
  AlignedVec<float> params(params_.size(), 0.0f);
  std::vector<float> m(params_.size(), 0.0f), v(params_.size(), 0.0f);
  for (const auto& p : model_->layout().params()) {
    load_tensor(f, p.name, p.shape, params.data() + p.offset, path);
    load_tensor(f, "optimizer.exp_avg." + p.name, p.shape, m.data() + p.offset, path);
    load_tensor(f, "optimizer.exp_avg_sq." + p.name, p.shape, v.data() + p.offset, path);
  }
  long long step = 0;
  try {
    step = std::stoll(meta("optimizer_step"));
  } catch (const std::exception&) {
    MAMBARL_FAIL(path << ": optimizer_step '" << meta("optimizer_step") << "' is not an integer");
  }
  params_ = std::move(params);
  adam_.exp_avg() = std::move(m);
  adam_.exp_avg_sq() = std::move(v);
  adam_.set_step_count(step);
  return f;
}

}  // namespace mambarl

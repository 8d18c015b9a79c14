#include "policy/actor_critic.hpp"

#include <cmath>
#include <cstring>

#include "kernels/base/check.hpp"
#include "policy/ops.hpp"

namespace mambarl {

void ActorCriticSpec::validate() const {
  MAMBARL_CHECK(obs_dim >= 1, "model: observation dimension must be >= 1, got " << obs_dim);
  MAMBARL_CHECK(head.action_dim >= 1, "model: action dimension must be >= 1, got " << head.action_dim);
  MAMBARL_CHECK(d_model >= 1 && d_model <= 8192, "policy.d_model must be in [1, 8192], got " << d_model);
  MAMBARL_CHECK(n_layers >= 0 && n_layers <= 64, "policy.n_layers must be in [0, 64], got " << n_layers);
}

template <typename S>
ActorCritic<S>::ActorCritic(const ActorCriticSpec& spec, const MixerFactory& make_mixer)
    : spec_(spec) {
  spec_.validate();
  const int D = spec_.d_model, A = spec_.head.action_dim;
  obs_w_ = layout_.add("obs_proj.weight", {D, spec_.obs_dim}, true);
  obs_b_ = layout_.add("obs_proj.bias", {D}, false);
  if (spec_.start_embedding) start_embed_ = layout_.add("start_embed", {D}, false);  // starts at zero: a no-op
  for (int l = 0; l < spec_.n_layers; ++l) {
    const std::string prefix = "layers." + std::to_string(l) + ".";
    norm_w_.push_back(layout_.add(prefix + "norm.weight", {D}, false));
    mixers_.push_back(make_mixer(layout_, prefix + "mixer."));
    MAMBARL_CHECK(mixers_.back()->d_model() == D, "mixer d_model " << mixers_.back()->d_model()
                                                                    << " != model d_model " << D);
    state_offsets_.push_back(state_size_);
    state_size_ += mixers_.back()->state_size();
  }
  norm_f_ = layout_.add("norm_f.weight", {D}, false);
  pi_w_ = layout_.add("pi.weight", {A, D}, true);
  pi_b_ = layout_.add("pi.bias", {A}, false);
  if (!spec_.head.discrete) log_std_ = layout_.add("pi.log_std", {A}, false);
  v_w_ = layout_.add("v.weight", {1, D}, true);
  v_b_ = layout_.add("v.bias", {1}, false);
}

template <typename S>
void ActorCritic<S>::init_params(S* params, uint64_t seed) const {
  std::memset(params, 0, layout_.size() * sizeof(S));
  ParamView<S> P(layout_, params);
  Rng rng(seed, 0x1A17);
  const int D = spec_.d_model, A = spec_.head.action_dim;
  init_linear_default(P.ptr(obs_w_), P.ptr(obs_b_), D, spec_.obs_dim, rng);
  for (int l = 0; l < spec_.n_layers; ++l) {
    P.vec(norm_w_[static_cast<size_t>(l)]).setOnes();
    mixers_[static_cast<size_t>(l)]->init_params(P, rng);
  }
  P.vec(norm_f_).setOnes();
  // Policy head starts near-uniform (weights × 0.01, zero bias), as CleanRL's
  // orthogonal(0.01) init does: PPO starts from maximal entropy.
  init_linear_default(P.ptr(pi_w_), P.ptr(pi_b_), A, D, rng);
  P.vec(pi_w_) *= S(0.01);
  P.vec(pi_b_).setZero();
  if (log_std_ >= 0) P.vec(log_std_).setConstant(static_cast<S>(spec_.log_std_init));
  init_linear_default(P.ptr(v_w_), P.ptr(v_b_), 1, D, rng);
}

template <typename S>
typename ActorCritic<S>::Cache ActorCritic<S>::make_cache() const {
  Cache c;
  c.h.resize(static_cast<size_t>(spec_.n_layers) + 1);
  c.normed.resize(static_cast<size_t>(spec_.n_layers));
  c.rstd.resize(static_cast<size_t>(spec_.n_layers));
  for (const auto& m : mixers_) c.mixer.push_back(m->make_cache());
  return c;
}

template <typename S>
void ActorCritic<S>::forward(const S* params, const Mat<S>& obs, const uint8_t* starts, int T,
                             int B, S* state, Cache& c, Mat<S>& head, Vec<S>& values) const {
  MAMBARL_CHECK(obs.rows() == static_cast<Eigen::Index>(T) * B && obs.cols() == spec_.obs_dim,
                "observations have shape (" << obs.rows() << ", " << obs.cols() << "), expected ("
                                            << T * B << ", " << spec_.obs_dim << ")");
  ParamView<S> P(layout_, const_cast<S*>(params));
  c.obs = obs;
  c.h[0].resize(obs.rows(), spec_.d_model);
  linear_forward(obs, P.mat(obs_w_), P.ptr(obs_b_), c.h[0]);
  if (start_embed_ >= 0) {
    for (Eigen::Index r = 0; r < obs.rows(); ++r)
      if (starts[r]) c.h[0].row(r) += P.vec(start_embed_).transpose();
    c.starts.assign(starts, starts + obs.rows());  // for backward(); not needed without the embedding
  }
  for (int l = 0; l < spec_.n_layers; ++l) {
    const size_t i = static_cast<size_t>(l);
    rmsnorm_forward(c.h[i], P.ptr(norm_w_[i]), c.normed[i], c.rstd[i]);
    mixers_[i]->forward(P, c.normed[i], starts, T, B, state + state_offsets_[i], state_size_,
                        c.mix_out, *c.mixer[i]);
    c.h[i + 1] = c.h[i] + c.mix_out;
  }
  rmsnorm_forward(c.h.back(), P.ptr(norm_f_), c.f, c.rstd_f);
  head.resize(obs.rows(), spec_.head.action_dim);
  linear_forward(c.f, P.mat(pi_w_), P.ptr(pi_b_), head);
  values.noalias() = c.f * P.mat(v_w_).row(0).transpose();
  values.array() += P.ptr(v_b_)[0];
}

template <typename S>
void ActorCritic<S>::backward(const S* params, Cache& c, const Mat<S>& dhead,
                              const Vec<S>& dvalues, double value_trunk_coef, S* grads) const {
  ParamView<S> P(layout_, const_cast<S*>(params));
  ParamView<S> G(layout_, grads);
  // Heads: df = dhead W_π + k · dV w_vᵀ, k = value_trunk_coef.
  Mat<S> df;  // (T*B, D)
  linear_backward(c.f, P.mat(pi_w_), dhead, G.mat(pi_w_), G.ptr(pi_b_), &df);
  df.noalias() += (static_cast<S>(value_trunk_coef) * dvalues) * P.mat(v_w_);
  G.mat(v_w_).noalias() += dvalues.transpose() * c.f;
  G.ptr(v_b_)[0] += dvalues.sum();
  rmsnorm_backward(c.h.back(), P.ptr(norm_f_), c.rstd_f, df, c.dh, G.ptr(norm_f_));
  // Residual stream: dh flows straight through and into each mixer branch.
  for (int l = spec_.n_layers - 1; l >= 0; --l) {
    const size_t i = static_cast<size_t>(l);
    mixers_[i]->backward(P, c.dh, *c.mixer[i], G, c.dmix);
    rmsnorm_backward(c.h[i], P.ptr(norm_w_[i]), c.rstd[i], c.dmix, c.dn, G.ptr(norm_w_[i]));
    c.dh += c.dn;
  }
  linear_backward(c.obs, P.mat(obs_w_), c.dh, G.mat(obs_w_), G.ptr(obs_b_),
                  static_cast<Mat<S>*>(nullptr));
  if (start_embed_ >= 0)
    for (Eigen::Index r = 0; r < c.dh.rows(); ++r)
      if (c.starts[static_cast<size_t>(r)]) G.vec(start_embed_) += c.dh.row(r).transpose();
}

template <typename S>
void ActorCritic<S>::reset_state(S* state, int B, const uint8_t* mask) const {
  for (int b = 0; b < B; ++b)
    if (mask[b]) std::memset(state + static_cast<size_t>(b) * state_size_, 0, state_size_ * sizeof(S));
}

template class ActorCritic<float>;
template class ActorCritic<double>;

}  // namespace mambarl

// The recurrent-PPO loss on one minibatch of tokens (policy/MATH.md "PPO with GAE"):
//   L = -mean(min(ρÂ, clip(ρ, 1-ε, 1+ε)Â)) + c_v·mean((V - R)²)/2 - c_e·mean(entropy)
// with Â normalised over the minibatch (treated as a constant), and its
// derivatives w.r.t. the head outputs, the values and log σ.
#pragma once

#include "policy/actor_critic.hpp"
#include "policy/allreduce.hpp"

namespace mambarl {

struct PpoLossConfig {
  double clip_eps = 0.2;
  double vf_coef = 0.5;
  // The share of dvalues that backward() sends into the layers below the
  // heads (ActorCritic::backward's value_trunk_coef); the loss itself ignores it.
  double vf_trunk_coef = 1.0;
  double ent_coef = 0.01;
  bool normalize_advantages = true;
};

struct PpoLossMetrics {
  double loss = 0, pg_loss = 0, v_loss = 0, entropy = 0, approx_kl = 0, clip_frac = 0;
};

// Per-token inputs of one minibatch of M tokens (float32 as the rollout stores them):
struct PpoBatch {
  const float* actions = nullptr;     // (M, act_width)
  const float* old_logp = nullptr;    // (M)
  const float* advantages = nullptr;  // (M)
  const float* returns = nullptr;     // (M)
};

// head (M, A), values (M); writes dhead (M, A), dvalues (M) and, for a
// Gaussian head, adds d/d log σ into dlog_std (A). log_std is null for
// categorical heads.
// `across` (may be null): this is one replica's share of a minibatch split
// over data-parallel replicas (policy/allreduce.hpp). The advantage mean and
// std, the token count the loss is averaged over and the metrics are then the
// whole minibatch's, so the replicas' gradients sum to the whole one's; the
// share may be empty (M = 0).
template <typename S>
PpoLossMetrics ppo_loss(const HeadSpec& head_spec, const PpoLossConfig& cfg, const Mat<S>& head,
                        const Vec<S>& values, const S* log_std, const PpoBatch& batch, Mat<S>& dhead,
                        Vec<S>& dvalues, S* dlog_std, Allreduce* across = nullptr);

extern template PpoLossMetrics ppo_loss<float>(const HeadSpec&, const PpoLossConfig&, const Mat<float>&,
                                               const Vec<float>&, const float*, const PpoBatch&, Mat<float>&,
                                               Vec<float>&, float*, Allreduce*);
extern template PpoLossMetrics ppo_loss<double>(const HeadSpec&, const PpoLossConfig&, const Mat<double>&,
                                                const Vec<double>&, const double*, const PpoBatch&,
                                                Mat<double>&, Vec<double>&, double*, Allreduce*);

}  // namespace mambarl

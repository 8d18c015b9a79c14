#include "policy/ppo_loss.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/base/check.hpp"
#include "policy/distributions.hpp"

namespace mambarl {

template <typename S>
PpoLossMetrics ppo_loss(const HeadSpec& hs, const PpoLossConfig& cfg, const Mat<S>& head,
                        const Vec<S>& values, const S* log_std, const PpoBatch& batch, Mat<S>& dhead,
                        Vec<S>& dvalues, S* dlog_std, Allreduce* across) {
  const Eigen::Index M = head.rows();
  const int A = hs.action_dim;
  MAMBARL_CHECK((M > 0 || across) && head.cols() == A && values.size() == M, "ppo_loss: shape mismatch");
  MAMBARL_CHECK(hs.discrete || (log_std && dlog_std), "ppo_loss: Gaussian head needs log_std");
  dhead.setZero(M, A);
  dvalues.resize(M);

  // Advantage normalisation over the minibatch (a constant for the gradient).
  // Two passes as without replicas: the sum and token count first, then the
  // squared deviations from the whole minibatch's mean.
  double sum_count[2] = {0, static_cast<double>(M)};
  for (Eigen::Index i = 0; i < M; ++i) sum_count[0] += batch.advantages[i];
  if (across) across->sum(sum_count, 2);
  const double tokens = sum_count[1];
  MAMBARL_CHECK(tokens > 0, "ppo_loss: no tokens in the minibatch on any replica");
  const double mean = sum_count[0] / tokens;
  double var = 0;
  for (Eigen::Index i = 0; i < M; ++i) var += (batch.advantages[i] - mean) * (batch.advantages[i] - mean);
  if (across && cfg.normalize_advantages) across->sum(&var, 1);
  const double stdev = std::sqrt(var / tokens);
  // 1e-8 as CleanRL/SB3: a constant-advantage minibatch gives zero policy gradient, not NaN.
  const auto adv = [&](Eigen::Index i) -> S {
    return cfg.normalize_advantages ? static_cast<S>((batch.advantages[i] - mean) / (stdev + 1e-8))
                                    : static_cast<S>(batch.advantages[i]);
  };

  PpoLossMetrics m;
  const S inv_M = S(1) / static_cast<S>(tokens);
  const S eps = static_cast<S>(cfg.clip_eps);
  std::vector<S> logp(static_cast<size_t>(A)), act(static_cast<size_t>(A));  // per-token scratch
  for (Eigen::Index i = 0; i < M; ++i) {
    const S* h = head.data() + i * A;
    S lp, ent;
    if (hs.discrete) {
      Categorical<S>::log_probs(h, A, logp.data());
      const int a = static_cast<int>(batch.actions[i]);
      MAMBARL_CHECK(a >= 0 && a < A, "ppo_loss: action " << batch.actions[i] << " out of range [0, " << A << ")");
      lp = logp[static_cast<size_t>(a)];
      ent = Categorical<S>::entropy(logp.data(), A);
    } else {
      for (int j = 0; j < A; ++j) act[static_cast<size_t>(j)] = static_cast<S>(batch.actions[i * A + j]);
      lp = DiagGaussian<S>::log_prob(h, log_std, act.data(), A);
      ent = DiagGaussian<S>::entropy(log_std, A);
    }
    const S A_i = adv(i);
    const S log_ratio = lp - static_cast<S>(batch.old_logp[i]);
    const S ratio = std::exp(log_ratio);
    const S clipped = std::clamp(ratio, S(1) - eps, S(1) + eps);
    const S surr1 = ratio * A_i, surr2 = clipped * A_i;
    m.pg_loss += -static_cast<double>(std::min(surr1, surr2));
    // d(-min)/dlp: the unclipped branch is active when it is the minimum;
    // otherwise the clipped ratio is constant in lp (or the clip is inactive and
    // both branches are equal, where we take the unclipped one as PyTorch does).
    const S dlp = (surr1 <= surr2 ? -A_i * ratio : S(0)) * inv_M;
    m.approx_kl += static_cast<double>((ratio - 1) - log_ratio);
    m.clip_frac += std::abs(ratio - 1) > eps ? 1.0 : 0.0;
    m.entropy += static_cast<double>(ent);
    const S v_err = values[i] - static_cast<S>(batch.returns[i]);
    m.v_loss += 0.5 * static_cast<double>(v_err * v_err);
    dvalues[i] = static_cast<S>(cfg.vf_coef) * v_err * inv_M;

    const S ce = static_cast<S>(cfg.ent_coef) * inv_M;
    if (hs.discrete) {
      // dlp/dlogit_j = [j==a] - p_j;  dH/dlogit_j = -p_j (log p_j + H).
      const int a = static_cast<int>(batch.actions[i]);
      for (int j = 0; j < A; ++j) {
        const S p = std::exp(logp[static_cast<size_t>(j)]);
        const S dlp_dz = (j == a ? S(1) : S(0)) - p;
        const S dH_dz = -p * (logp[static_cast<size_t>(j)] + ent);
        dhead(i, j) = dlp * dlp_dz - ce * dH_dz;
      }
    } else {
      // lp = Σ -z²/2 - log σ - const, z = (a-μ)/σ: dlp/dμ = z/σ, dlp/dlogσ = z² - 1; dH/dlogσ = 1.
      for (int j = 0; j < A; ++j) {
        const S sigma = std::exp(log_std[j]);
        const S z = (static_cast<S>(batch.actions[i * A + j]) - h[j]) / sigma;
        dhead(i, j) = dlp * z / sigma;
        dlog_std[j] += dlp * (z * z - 1) - ce;
      }
    }
  }
  if (across) {
    // The per-token sums over every replica's tokens (loss is set below).
    double sums[5] = {m.pg_loss, m.v_loss, m.entropy, m.approx_kl, m.clip_frac};
    across->sum(sums, 5);
    m = PpoLossMetrics{0, sums[0], sums[1], sums[2], sums[3], sums[4]};
  }
  const double inv = 1.0 / tokens;
  m.pg_loss *= inv;
  m.v_loss *= inv;
  m.entropy *= inv;
  m.approx_kl *= inv;
  m.clip_frac *= inv;
  m.loss = m.pg_loss + cfg.vf_coef * m.v_loss - cfg.ent_coef * m.entropy;
  return m;
}

template PpoLossMetrics ppo_loss<float>(const HeadSpec&, const PpoLossConfig&, const Mat<float>&,
                                        const Vec<float>&, const float*, const PpoBatch&, Mat<float>&,
                                        Vec<float>&, float*, Allreduce*);
template PpoLossMetrics ppo_loss<double>(const HeadSpec&, const PpoLossConfig&, const Mat<double>&,
                                         const Vec<double>&, const double*, const PpoBatch&, Mat<double>&,
                                         Vec<double>&, double*, Allreduce*);

}  // namespace mambarl

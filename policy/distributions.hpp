// Action distributions of the policy head: categorical over logits and
// diagonal Gaussian (mean from the head, log σ a free parameter). Shared by
// the actor (sampling or the greedy mode, log-prob) and the PPO loss (log-prob, entropy and
// their gradients), so both use the same formulas.
#pragma once

#include <cmath>

#include "kernels/base/rng.hpp"
#include "policy/tensor.hpp"

namespace mambarl {

// Categorical over one row of logits: log-softmax with the max subtracted.
template <typename S>
struct Categorical {
  // Writes log p into logp (n) and returns nothing; logits and logp may not alias.
  static void log_probs(const S* logits, int n, S* logp) {
    S m = logits[0];
    for (int i = 1; i < n; ++i) m = logits[i] > m ? logits[i] : m;
    S z = 0;
    for (int i = 0; i < n; ++i) z += std::exp(logits[i] - m);
    const S lz = m + std::log(z);
    for (int i = 0; i < n; ++i) logp[i] = logits[i] - lz;
  }
  // Inverse-CDF sample from log p using one uniform draw.
  static int sample(const S* logp, int n, Rng& rng) {
    const double u = rng.uniform();
    double c = 0;
    for (int i = 0; i < n; ++i) {
      c += std::exp(static_cast<double>(logp[i]));
      if (u < c) return i;
    }
    return n - 1;  // rounding: the cumulative sum may end just below 1
  }
  // The most probable action (greedy evaluation); the first on ties, as
  // numpy's argmax. Works on logits or log p alike: log-softmax keeps the order.
  static int mode(const S* x, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i)
      if (x[i] > x[best]) best = i;
    return best;
  }
  static S entropy(const S* logp, int n) {
    S h = 0;
    for (int i = 0; i < n; ++i) h -= std::exp(logp[i]) * logp[i];
    return h;
  }
};

// Diagonal Gaussian N(mu, exp(log_std)^2) per action dimension.
template <typename S>
struct DiagGaussian {
  static constexpr double kLog2Pi = 1.8378770664093453;
  static S log_prob(const S* mu, const S* log_std, const S* a, int n) {
    S lp = 0;
    for (int i = 0; i < n; ++i) {
      const S z = (a[i] - mu[i]) * std::exp(-log_std[i]);
      lp += S(-0.5) * z * z - log_std[i] - S(0.5 * kLog2Pi);
    }
    return lp;
  }
  static S entropy(const S* log_std, int n) {
    S h = 0;
    for (int i = 0; i < n; ++i) h += log_std[i] + S(0.5 * (1.0 + kLog2Pi));
    return h;
  }
};

}  // namespace mambarl

// Reward scaling by the running standard deviation of the discounted return
// (Gymnasium's NormalizeReward; Engstrom et al. 2020 "Implementation Matters"):
// rewards are divided by std(G) with G_t = γ G_{t-1} + r_t per env, reset at
// episode ends. Keeps value targets O(1): without it, a shared trunk's value
// loss (targets up to 1/(1-γ)) swamps the policy gradient and PPO collapses.
// For a sparse reward at an episode's end it scales up instead, by about
// √(episode length), with the same effect: policy/MATH.md says when to turn
// it off. Only the learner sees scaled rewards; reported returns stay raw.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/base/running_stats.hpp"
#include "tools/ranks.hpp"

namespace mambarl {

class RewardScaler {
 public:
  RewardScaler(double gamma, int num_workers, int envs_per_worker)
      : gamma_(gamma), returns_(static_cast<size_t>(num_workers) * envs_per_worker, 0.0), B_(envs_per_worker) {}

  // Scales rewards (T, B) of one worker's chunk in place, in time order.
  // Under several data-parallel ranks each holds its envs' running returns
  // and the statistics see every rank's, in the one-process order (step t:
  // rank 0's envs, then rank 1's, ...), so every rank keeps the same
  // statistics as the one-process run. ranks null: one process.
  void scale(int worker, int T, int B, float* rewards, const uint8_t* terminated, const uint8_t* truncated,
             Ranks* ranks = nullptr) {
    // The discounted returns do not depend on the statistics: all of them first.
    double* G = returns_.data() + static_cast<size_t>(worker) * B_;
    g_.resize(static_cast<size_t>(T) * B);  // (T, B)
    for (int t = 0; t < T; ++t)
      for (int b = 0; b < B; ++b) {
        const int i = t * B + b;
        G[b] = gamma_ * G[b] + rewards[i];
        g_[static_cast<size_t>(i)] = G[b];
        if (terminated[i] || truncated[i]) G[b] = 0.0;
      }
    const double* all = g_.data();  // (N, T, B): every rank's returns
    int n = 1;
    if (ranks != nullptr && ranks->size() > 1) {
      all_ = ranks->all_gather_values(g_.data(), g_.size(), "gathering the discounted returns for reward scaling");
      all = all_.data();
      n = ranks->size();
    }
    for (int t = 0; t < T; ++t) {
      for (int r = 0; r < n; ++r)
        for (int b = 0; b < B; ++b) stats_.push(all[(static_cast<size_t>(r) * T + t) * B + b]);
      const double inv_std = 1.0 / stats_.std_dev();
      for (int b = 0; b < B; ++b) rewards[t * B + b] = static_cast<float>(rewards[t * B + b] * inv_std);
    }
  }

  // Everything needed to continue bit-exactly after a resume.
  std::vector<double> state() const {
    std::vector<double> s = {stats_.mean, stats_.var, stats_.count};
    s.insert(s.end(), returns_.begin(), returns_.end());
    return s;
  }
  bool set_state(const std::vector<double>& s) {
    if (s.size() != 3 + returns_.size()) return false;
    stats_ = {s[0], s[1], s[2]};
    std::copy(s.begin() + 3, s.end(), returns_.begin());
    return true;
  }

 private:
  double gamma_;
  std::vector<double> returns_;  // (workers, B) discounted return of the running episode
  std::vector<double> g_;        // (T, B) scratch: one chunk's discounted returns
  std::vector<double> all_;      // (N, T, B) scratch: every rank's, under N > 1 ranks
  int B_;
  RunningStats stats_;
};

}  // namespace mambarl

// Value-target normalisation, algo.normalize_returns (Sample Factory's
// normalize_returns, MAPPO's ValueNorm): the value head learns standardised
// targets (R - mean) / std, with the mean and std of every value target seen
// so far, and GAE reads the head's outputs back in reward units
// (v * std + mean). The value loss is then O(1) whatever the rewards' scale,
// and the rewards themselves are left alone.
//
// Off by default. Measured on the CPU (RESULTS.md "Reward scaling and long
// memory"): with reward scaling off it rescues CartPole (Mamba-1 90 -> 500)
// and RepeatPrevious (Mamba-3 0.70 -> 0.99), but on T-maze 40 it brings back
// the failures that turning reward scaling off had removed.
//
// Host side; kernels/return_norm.cuh is the device twin for GPU envs, with
// the same state layout (mean, var, count).
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/base/running_stats.hpp"
#include "tools/ranks.hpp"

namespace mambarl {

class ReturnNormalizer {
 public:
  // The value head's standardised outputs (n) into reward units, in place.
  void denormalize(float* v, size_t n) const {
    const double sd = stats_.std_dev();
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(v[i] * sd + stats_.mean);
  }

  // Merges one chunk's value targets (T x B of them, reward units) into the
  // running statistics, then standardises them in place. Under several ranks
  // the batch statistics are those of every rank's targets in the
  // one-process order (step t: rank 0's envs, then rank 1's, ...), so each
  // rank keeps the one-process run's statistics. ranks null: one process.
  void normalize(float* returns, size_t n, int T, Ranks* ranks = nullptr) {
    const float* all = returns;
    int N = 1;
    if (ranks != nullptr && ranks->size() > 1) {
      all_ = ranks->all_gather_values(returns, n, "gathering the value targets for return normalisation");
      all = all_.data();
      N = ranks->size();
    }
    const size_t B = n / static_cast<size_t>(T);
    // Two passes in double, in one fixed order: the batch's mean, then its
    // squared deviations from it.
    double sum = 0, m2 = 0;
    for_each_in_order(all, T, N, B, [&](double x) { sum += x; });
    const double n_b = static_cast<double>(n) * N, mean_b = sum / n_b;
    for_each_in_order(all, T, N, B, [&](double x) { m2 += (x - mean_b) * (x - mean_b); });
    stats_.merge(n_b, mean_b, m2);
    const double inv_sd = 1.0 / stats_.std_dev();
    for (size_t i = 0; i < n; ++i) returns[i] = static_cast<float>((returns[i] - stats_.mean) * inv_sd);
  }

  // (mean, var, count): everything needed to continue bit-exactly after a resume.
  std::vector<double> state() const { return {stats_.mean, stats_.var, stats_.count}; }
  bool set_state(const std::vector<double>& s) {
    if (s.size() != 3) return false;
    stats_ = {s[0], s[1], s[2]};
    return true;
  }

 private:
  // all is (N, T, B); visits it in the one-process order.
  template <typename F>
  static void for_each_in_order(const float* all, int T, int N, size_t B, F f) {
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < N; ++r)
        for (size_t b = 0; b < B; ++b) f(all[(static_cast<size_t>(r) * T + t) * B + b]);
  }

  std::vector<float> all_;  // (N, T, B) scratch under N > 1 ranks
  RunningStats stats_;
};

}  // namespace mambarl

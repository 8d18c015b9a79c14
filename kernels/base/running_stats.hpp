// Running mean and variance of a stream of values (Chan, Golub & LeVeque's
// parallel update): the statistics of the reward scaler (discounted returns)
// and of the return normaliser (value targets), on the host
// (tools/reward_scaler.hpp, tools/return_normalizer.hpp) and in their device
// twins (kernels/reward_scale.cu, kernels/return_norm.cu) alike. (mean, var,
// count) is also what their checkpoints hold.
#pragma once

#include <cmath>

#include "kernels/base/host_device.hpp"

namespace mambarl {

struct RunningStats {
  double mean = 0, var = 1, count = 0;

  // Folds in a batch of n values with mean batch_mean and batch_m2, the sum
  // of their squared deviations from batch_mean. With count 0 the initial
  // var is weighted by 0, so the first batch's variance replaces it.
  MAMBARL_HD void merge(double n, double batch_mean, double batch_m2) {
    const double total = count + n, delta = batch_mean - mean;
    var = (var * count + batch_m2 + delta * delta * count * n / total) / total;
    mean += delta * n / total;
    count = total;
  }

  // A batch of one in Welford's form: the host reward scaler's per-value
  // update (the same statistics as merge(1, x, 0) to rounding).
  MAMBARL_HD void push(double x) {
    count += 1;
    const double d = x - mean;
    mean += d / count;
    var += (d * (x - mean) - var) / count;
  }

  // The std values are divided by; the epsilon keeps a constant stream finite.
  MAMBARL_HD double std_dev() const { return sqrt(var + 1e-8); }
};

}  // namespace mambarl

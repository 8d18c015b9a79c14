// Steady-state training throughput as PufferLib reports it: the least-squares
// slope of env steps over wall time, leaving out the first 10% of a run's
// points (start-up: plugin load, model init, graph captures, lazy CUDA
// set-up). `mambarl bench e2e` reports it from a run's metrics rows, so that
// our numbers and PufferLib's compare like for like.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/base/check.hpp"

namespace mambarl {

struct SteadyRate {
  double per_s = 0;   // env steps per second, the slope
  size_t first = 0;   // the first point fitted: ceil(10% of the points), at least 1
};

// wall_s and steps: one point per update, in order (n >= 3, so that at least
// two points remain after the first is left out).
inline SteadyRate steady_rate(const std::vector<double>& wall_s, const std::vector<double>& steps) {
  const size_t n = wall_s.size();
  MAMBARL_CHECK(n == steps.size() && n >= 3,
                "steady_rate: " << n << " times and " << steps.size() << " step counts (need 3 or more of each)");
  SteadyRate r;
  r.first = (n + 9) / 10;
  double mx = 0, my = 0;
  const double m = static_cast<double>(n - r.first);
  for (size_t i = r.first; i < n; ++i) {
    mx += wall_s[i];
    my += steps[i];
  }
  mx /= m;
  my /= m;
  double sxy = 0, sxx = 0;
  for (size_t i = r.first; i < n; ++i) {
    sxy += (wall_s[i] - mx) * (steps[i] - my);
    sxx += (wall_s[i] - mx) * (wall_s[i] - mx);
  }
  MAMBARL_CHECK(sxx > 0, "steady_rate: the fitted points all have the same wall time");
  r.per_s = sxy / sxx;
  return r;
}

}  // namespace mambarl

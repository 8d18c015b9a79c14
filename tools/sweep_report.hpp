// What a finished sweep leaves in its out_dir, from the runs' results:
//   runs.csv    one row per run (and per random-floor seed)
//   results.md  one row per env (x difficulty x other grid values), one
//               column per policy, each cell "mean [min, max]" over seeds
//   <row>.svg   per table row: each policy's learning curve, the mean over
//               seeds as a line and the range over seeds as a band
// Pure functions of the results (no processes), so that they are tested on
// known inputs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tools/sweep.hpp"

namespace mambarl {

struct RunResult {
  SweepRun run;             // a random-floor row: policy "random", name and run_dir empty
  double final_return = 0;  // the `final mean_return=` of the run's train line
  long long env_steps = 0;
  double wall_s = 0;
  std::vector<std::pair<double, double>> curve;  // (env_steps, mean_return) per logged update; empty: none
};

// Curves of several seeds on one env-step grid: every x of any curve within
// the range all of them cover, each curve interpolated linearly there.
struct CurveBand {
  std::vector<double> x, mean, lo, hi;  // (points): the mean, min and max over the curves
};
CurveBand curve_band(const std::vector<std::vector<std::pair<double, double>>>& curves);

// v with 3 significant digits, trailing zeros kept ("1.00", "0.0140", "500").
std::string three_digits(double v);

// The files' contents; `grid_keys` are the sweep's (SweepSpec::grid), in order.
std::string runs_csv(const std::vector<std::string>& grid_keys, const std::vector<RunResult>& results);
// `header` is the first line (date and command).
std::string results_markdown(const std::vector<std::string>& grid_keys, const std::vector<RunResult>& results,
                             const std::string& header);
// Writes one SVG per table row into `dir`; returns their paths.
std::vector<std::string> write_sweep_plots(const std::string& dir, const std::vector<std::string>& grid_keys,
                                           const std::vector<RunResult>& results);

}  // namespace mambarl

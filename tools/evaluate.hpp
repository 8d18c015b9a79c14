// `mambarl eval`: runs a trained checkpoint on fresh envs (the experiment is
// read back from the checkpoint itself) and reports episode returns.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace mambarl {

struct EvalOptions {
  std::string checkpoint;
  int episodes = 10;
  bool render = false;
  uint64_t seed = 12345;
  std::vector<std::string> overrides;
};

struct EvalResult {
  std::vector<double> returns;
  double mean_return = 0;
};

EvalResult run_evaluation(const EvalOptions& opts, std::ostream& out);

// The experiment YAML stored in a checkpoint's metadata (error if absent).
std::string experiment_of_checkpoint(const std::string& path);

}  // namespace mambarl

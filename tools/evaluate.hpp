// `mambarl eval`: runs a trained policy on fresh envs and reports episode
// returns. The policy comes from a checkpoint of `mambarl train` (whose stored
// experiment gives the env) or from a file of `mambarl export` together with
// an experiment config (the env from the config, the policy from the file's
// metadata, checked against the config's policy section).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace mambarl {

struct EvalOptions {
  std::string weights;  // a checkpoint, or an exported weights file (then `config` is required)
  std::string config;   // experiment YAML for an exported file; empty for a checkpoint
  int episodes = 10;
  bool render = false;         // per step: the env's text frame, the action, reward and return so far
  bool deterministic = false;  // the distribution's mode (argmax / Gaussian mean) instead of sampling
  uint64_t seed = 12345;       // the env's reset seed and the actor's sampling streams
  std::vector<std::string> overrides;
};

struct EvalResult {
  std::vector<double> returns;
  double mean_return = 0;
};

// Runs on the CPU whatever the experiment's runtime.device: one env needs no
// GPU, and the CPU actor is the reference engine (the one with greedy actions).
EvalResult run_evaluation(const EvalOptions& opts, std::ostream& out);

}  // namespace mambarl

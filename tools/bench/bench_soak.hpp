// `mambarl bench soak`: the real actor-learner loop (async mode) for minutes,
// sampling resident memory (and device memory where there is a GPU) to show
// that nothing grows after warm-up and that the chunk queue keeps its bound.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace mambarl {

struct SoakOptions {
  std::string config;                  // empty: the built-in CartPole experiment
  std::vector<std::string> overrides;  // as for `mambarl train`
  double minutes = 10;                 // > 0
  double sample_s = 5;                 // > 0: seconds between memory samples
  std::string plot = "soak.svg";
};

// Prints one JSON object; returns the exit status (0 pass, 1 fail: the
// verdict, so scripts can gate on it).
int run_soak(const SoakOptions& o, std::ostream& out);

}  // namespace mambarl

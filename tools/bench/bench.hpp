// `mambarl bench rollout|train|e2e`: timings printed as one JSON object.
// (`bench soak` is tools/bench/bench_soak.hpp; tools/main.cpp reads the options.)
#pragma once

#include <iosfwd>
#include <string>

namespace mambarl {

struct BenchOptions {
  std::string what;            // rollout | train | e2e
  std::string device = "cpu";  // cpu | cuda
  int reps = 0;                // 0: the bench's own default
  std::string env_backend;     // e2e: cpu | cuda | both; empty: both with --device cuda, else cpu
  std::string plot;            // e2e: an SVG of env-steps/s against num_envs; empty: none
  std::string shape;           // train --device cuda: "TxBxDxL", one chunk shape; empty: the default ones
  std::string policy;          // train: one policy type; empty: all of them
  std::string dtype;           // train --device cuda: one learner precision; empty: all three
  bool async = false;          // e2e: runtime.sync: false
};

int run_bench(const BenchOptions& o, std::ostream& out);

}  // namespace mambarl

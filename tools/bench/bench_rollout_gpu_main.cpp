// Standalone `bench rollout --device cuda` for the device machine: prints the
// JSON of bench_rollout_gpu_json: [reps (default 1000)] [shape index (default all)].
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "tools/bench/bench_rollout_gpu.hpp"
#include "tools/cli_args.hpp"

int main(int argc, char** argv) {
  CLI::App app("the GPU actor's rollout step, as `mambarl bench rollout --device cuda`: one JSON object",
               "bench_rollout_gpu");
  int reps = 1000, shape = -1;  // shape -1: every shape
  app.add_option("reps", reps, "timed steps per shape, >= 1")->transform(mambarl::whole_number(1))
      ->capture_default_str();
  app.add_option("shape", shape, "the index of the one shape to time, >= 0 (default: all)")
      ->transform(mambarl::whole_number(0));
  if (const auto status = mambarl::parse_command_line(app, argc, argv)) return *status;
  try {
    std::cout << mambarl::bench_rollout_gpu_json(reps, shape) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_rollout_gpu: " << e.what() << "\n";
    return 1;
  }
}

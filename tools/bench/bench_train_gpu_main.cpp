// Standalone `bench train --device cuda` for the device machine: prints the
// JSON of bench_train_gpu_json: [reps (default 100)] [T B D L (one shape)].
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <vector>

#include "tools/bench/bench_train_gpu.hpp"
#include "tools/cli_args.hpp"

int main(int argc, char** argv) {
  CLI::App app("the GPU learner's update, as `mambarl bench train --device cuda`: one JSON object",
               "bench_train_gpu");
  int reps = 100;
  std::vector<int> dims;  // (4): T B D L
  app.add_option("reps", reps, "timed updates per shape, >= 1")->transform(mambarl::whole_number(1))
      ->capture_default_str();
  app.add_option("shape", dims, "one chunk shape instead of the default ones: T steps, B envs, d_model D, L layers")
      ->expected(4)
      ->type_name("T B D L")
      ->transform(mambarl::whole_number(1));
  if (const auto status = mambarl::parse_command_line(app, argc, argv)) return *status;
  try {
    std::vector<mambarl::GpuTrainShape> shapes;
    if (!dims.empty()) shapes.push_back({dims[0], dims[1], dims[2], dims[3]});
    std::cout << mambarl::bench_train_gpu_json(reps, shapes) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_train_gpu: " << e.what() << "\n";
    return 1;
  }
}

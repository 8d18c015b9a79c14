// Standalone `bench rollout --device cuda` for the device machine: prints the
// JSON of bench_rollout_gpu_json: [reps (default 1000)] [shape index (default all)].
#include <cstdlib>
#include <exception>
#include <iostream>

#include "tools/bench_rollout_gpu.hpp"

int main(int argc, char** argv) {
  try {
    std::cout << mambarl::bench_rollout_gpu_json(argc > 1 ? std::atoi(argv[1]) : 1000,
                                                 argc > 2 ? std::atoi(argv[2]) : -1)
              << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_rollout_gpu: " << e.what() << "\n";
    return 1;
  }
}

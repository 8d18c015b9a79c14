// Standalone `bench train --device cuda` for the device machine: prints the
// JSON of bench_train_gpu_json: [reps (default 100)] [T B D L (one shape)].
#include <cstdlib>
#include <exception>
#include <iostream>

#include "tools/bench_train_gpu.hpp"

int main(int argc, char** argv) {
  try {
    if (argc != 1 && argc != 2 && argc != 6) {
      std::cerr << "usage: bench_train_gpu [reps] [T B D L]\n";
      return 2;
    }
    std::vector<mambarl::GpuTrainShape> shapes;
    if (argc == 6)
      shapes.push_back({std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5])});
    std::cout << mambarl::bench_train_gpu_json(argc > 1 ? std::atoi(argv[1]) : 100, shapes) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_train_gpu: " << e.what() << "\n";
    return 1;
  }
}

// What the suites that run `mambarl train` end to end share: a published
// config by name, a scratch output folder, one training run through the
// runner library, and the parts of two runs that must match bit for bit.
// The including test target defines MAMBARL_TEST_PLUGIN (the bundled plugin).
#pragma once

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "policy/safetensors.hpp"
#include "tools/trainer.hpp"

namespace mambarl::test {

inline std::string config_path(const std::string& name) {
  const char* src = std::getenv("MAMBARL_SOURCE_DIR");
  BOOST_REQUIRE_MESSAGE(src, "MAMBARL_SOURCE_DIR is not set (run through ctest)");
  return (std::filesystem::path(src) / "configs" / (name + ".yaml")).string();
}

inline std::filesystem::path out_dir(const std::string& name) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() /
                                  ("mambarl_learning_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d;
}

// Trains configs/<config>.yaml into `dir` with the bundled plugin; the
// runner's log goes to *log when given.
inline TrainSummary train(const std::string& config, const std::filesystem::path& dir,
                          std::vector<std::string> overrides = {}, bool resume = false, std::string* log = nullptr) {
  overrides.push_back("runtime.out_dir=" + dir.string());
  overrides.push_back(std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN);
  std::ostringstream out;
  TrainOptions opts;
  opts.resume = resume;
  const TrainSummary s = run_training(load_experiment(config_path(config), overrides), opts, out);
  if (log) *log = out.str();
  return s;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The metrics file without its timing columns (wall_s, steps_per_s, collect_s,
// learn_s; found by name in the header), which legitimately differ between
// two runs of the same computation.
inline std::string metrics_without_timing(const std::filesystem::path& p) {
  static const std::set<std::string> kTiming = {"wall_s", "steps_per_s", "collect_s", "learn_s"};
  std::istringstream in(read_file(p));
  std::string line, out;
  std::vector<bool> drop;  // per column, from the header
  while (std::getline(in, line)) {
    std::istringstream cells(line);
    std::string cell;
    for (size_t col = 0; std::getline(cells, cell, ','); ++col) {
      if (drop.size() <= col) drop.push_back(kTiming.count(cell) > 0);
      if (!drop[col]) out += cell + ",";
    }
    out += "\n";
  }
  return out;
}

// Weights and optimizer moments of a checkpoint, byte for byte.
inline std::string learner_bytes(const std::filesystem::path& ckpt) {
  const SafetensorsFile f = read_safetensors(ckpt.string());
  std::string out;
  for (const auto& t : f.tensors)
    if (t.name.rfind("runner.", 0) != 0) out += t.name + std::string(t.bytes.begin(), t.bytes.end());
  return out;
}

}  // namespace mambarl::test

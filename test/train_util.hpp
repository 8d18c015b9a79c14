// What the suites that run `mambarl train` end to end share: a published
// config by name, a scratch output folder, one training run through the
// runner library, and (test/run_compare.hpp) the parts of two runs that must
// match bit for bit.
// The including test target defines MAMBARL_TEST_PLUGIN (the bundled plugin).
#pragma once

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "test/run_compare.hpp"
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

}  // namespace mambarl::test

// `mambarl train` as a child process, for the suites that signal, kill or
// watch a run from outside (test_crash_safety on the CPU, test_gpu_train_process
// with GPU envs): start one from a bundled config with overrides, wait for its
// exit or for its metrics to reach an update, and read back what it left
// (checkpoint update, metrics rows), failing on a torn file.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "policy/io/safetensors.hpp"
#include "test/process_util.hpp"

namespace mambarl::test {

// What to train: a config of configs/ and the overrides that every run of
// the test case adds (those of one run come as start_train's args).
struct TrainSetup {
  std::string config;                  // file name in configs/, e.g. "stateless_cartpole_mamba1.yaml"
  std::vector<std::string> overrides;  // key=value
};

// A scratch folder for one test case, removed first.
inline std::filesystem::path scratch(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mambarl_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The update a checkpoint was written at; a damaged checkpoint fails the read.
inline long long checkpoint_update(const std::filesystem::path& ckpt) {
  const SafetensorsFile f = read_safetensors(ckpt.string());
  return std::stoll(f.metadata.at("runner.update"));
}

// Every line complete (the file ends in '\n') with the header's column count;
// returns the `update` column (the first). A missing file has no rows.
inline std::vector<long long> metrics_updates(const std::filesystem::path& csv) {
  std::vector<long long> updates;
  const std::string text = read_text(csv.string());
  if (text.empty()) return updates;
  BOOST_REQUIRE_MESSAGE(text.back() == '\n',
                        csv << " ends mid-line: ..." << text.substr(text.size() - std::min<size_t>(text.size(), 80)));
  std::istringstream in(text);
  std::string header, line;
  std::getline(in, header);
  BOOST_REQUIRE(header.rfind("update,", 0) == 0);
  const auto cols = std::count(header.begin(), header.end(), ',');
  while (std::getline(in, line)) {
    BOOST_REQUIRE_MESSAGE(std::count(line.begin(), line.end(), ',') == cols, "torn metrics row: " << line);
    updates.push_back(std::stoll(line.substr(0, line.find(','))));
  }
  return updates;
}

// `mambarl train` of `setup` into `out`, with `args` after the setup's
// overrides and `env` (NAME=value) added to the environment; output to `log`.
// Progress lines are off: the tests read the metrics file and the summary.
inline pid_t start_train(const TrainSetup& setup, const std::filesystem::path& out, const std::vector<std::string>& args,
                         const std::string& log, const std::vector<std::string>& env = {}) {
  const char* src = std::getenv("MAMBARL_SOURCE_DIR");
  BOOST_REQUIRE_MESSAGE(src, "MAMBARL_SOURCE_DIR is not set (run through ctest)");
  std::vector<std::string> argv{MAMBARL_TEST_BIN, "train", (std::filesystem::path(src) / "configs" / setup.config).string(),
                                "runtime.out_dir=" + out.string(), "runtime.log_every=1000000"};
  argv.insert(argv.end(), setup.overrides.begin(), setup.overrides.end());
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = spawn(argv, env, log);
  BOOST_REQUIRE_GT(pid, 0);
  return pid;
}

// The exit status of a child that must end by itself within two minutes.
inline int exit_status(pid_t pid, const std::string& log) {
  const std::optional<int> status = wait_for(pid, std::chrono::seconds(120));
  if (!status) kill_and_reap(pid);
  BOOST_REQUIRE_MESSAGE(status, "still running after 120 s:\n" << read_text(log));
  BOOST_REQUIRE_MESSAGE(WIFEXITED(*status), "killed by signal " << WTERMSIG(*status) << ":\n" << read_text(log));
  return WEXITSTATUS(*status);
}

// Waits until the run's metrics show `n` updates, so a signal lands mid-training.
inline void wait_for_updates(pid_t pid, const std::filesystem::path& csv, size_t n, const std::string& log) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (metrics_updates(csv).size() < n) {
    BOOST_REQUIRE_MESSAGE(!wait_for(pid, std::chrono::seconds(0)), "ended before update " << n << ":\n"
                                                                                       << read_text(log));
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "no update " << n << " in 120 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace mambarl::test

// tools/seed_sweep.sh, the script behind the README's results tables, run as a
// child process on a short CartPole MLP run: its row must carry each seed's
// own final return (the one `mambarl train` prints for that seed), and a run
// that fails must fail the sweep with the run's error.
#define BOOST_TEST_MODULE seed_sweep
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <sstream>

#include "test/process_util.hpp"

namespace fs = std::filesystem;
using namespace mambarl::test;

namespace {

std::string source_dir() {
  const char* src = std::getenv("MAMBARL_SOURCE_DIR");
  BOOST_REQUIRE_MESSAGE(src, "MAMBARL_SOURCE_DIR is not set (run through ctest)");
  return src;
}

struct Ran {
  int exit_code = -1;
  std::string out;
};

Ran run(const std::vector<std::string>& argv, const std::string& name) {
  const std::string log = (fs::temp_directory_path() /
                           ("mambarl_test_sweep_" + name + "_" + std::to_string(::getpid()) + ".txt"))
                              .string();
  const pid_t pid = spawn(argv, {}, log);
  BOOST_REQUIRE_GT(pid, 0);
  const std::optional<int> status = wait_for(pid, std::chrono::seconds(300));
  if (!status) kill_and_reap(pid);
  BOOST_REQUIRE_MESSAGE(status, name << " still running after 300 s:\n" << read_text(log));
  Ran r{WIFEXITED(*status) ? WEXITSTATUS(*status) : -1, read_text(log)};
  fs::remove(log);
  return r;
}

const std::string kConfig = "configs/cartpole_mlp.yaml";
const std::string kShort = "algo.total_env_steps=4096";

std::vector<std::string> sweep_argv(const std::vector<std::string>& tail) {
  std::vector<std::string> argv{"/bin/bash", source_dir() + "/tools/seed_sweep.sh", "-b",
                                fs::path(MAMBARL_TEST_BIN).parent_path().parent_path().string()};
  argv.insert(argv.end(), tail.begin(), tail.end());
  return argv;
}

// What the script prints for a return: printf %.3g.
std::string g3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

BOOST_AUTO_TEST_CASE(each_seed_in_the_row_is_that_seeds_own_run) {
  std::vector<double> direct;
  for (int seed : {3, 4}) {
    const fs::path dir = fs::temp_directory_path() / ("mambarl_test_sweep_direct_" + std::to_string(::getpid()));
    const Ran r = run({MAMBARL_TEST_BIN, "train", source_dir() + "/" + kConfig, kShort,
                       "runtime.seed=" + std::to_string(seed), "runtime.out_dir=" + dir.string()},
                      "direct");
    fs::remove_all(dir);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out);
    std::smatch m;
    BOOST_REQUIRE_MESSAGE(std::regex_search(r.out, m, std::regex("final mean_return=([-0-9.e+]+)")), r.out);
    direct.push_back(std::stod(m[1]));
  }
  const Ran sweep = run(sweep_argv({"-s", "3 4", "-j", "2", source_dir() + "/" + kConfig, "--", kShort}), "sweep");
  BOOST_TEST_MESSAGE(sweep.out);
  BOOST_REQUIRE_MESSAGE(sweep.exit_code == 0, sweep.out);
  BOOST_TEST(sweep.out.find("| config | seeds | mean return | min | max | per seed | median wall s |") !=
             std::string::npos);
  const double lo = std::min(direct[0], direct[1]), hi = std::max(direct[0], direct[1]);
  const std::string row = "| cartpole_mlp | 2 | " + g3((direct[0] + direct[1]) / 2) + " | " + g3(lo) + " | " +
                          g3(hi) + " | " + g3(direct[0]) + " " + g3(direct[1]) + " | ";
  BOOST_TEST_MESSAGE("expected row: " << row);
  BOOST_TEST(sweep.out.find(row) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_failing_run_fails_the_sweep_with_its_error) {
  const Ran r = run(sweep_argv({"-s", "1", source_dir() + "/" + kConfig, "--", "algo.bogus=1"}), "bad");
  BOOST_TEST(r.exit_code != 0);
  BOOST_TEST(r.out.find("algo.bogus: unknown key") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("some runs failed") != std::string::npos, r.out);
  const Ran missing = run(sweep_argv({"configs/no_such.yaml"}), "missing");
  BOOST_TEST(missing.exit_code == 2);
  BOOST_TEST(missing.out.find("no such config: configs/no_such.yaml") != std::string::npos, missing.out);
}

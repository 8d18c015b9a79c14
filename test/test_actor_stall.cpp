// A stalled actor thread in async mode is detected and ends the run with a
// clear error, never a hang: `mambarl train` runs as a child process on the
// test env plugin's coin_guess env told to block forever inside step().
#define BOOST_TEST_MODULE actor_stall
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "test/process_util.hpp"

namespace fs = std::filesystem;
using namespace mambarl::test;

BOOST_AUTO_TEST_CASE(a_blocked_env_stops_the_run_with_an_error_naming_the_actor) {
  const fs::path dir = fs::temp_directory_path() / ("mambarl_test_stall_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cfg = (dir / "stall.yaml").string();
  // 4 envs, one actor: its 50th env.step() call blocks, after 49 x 4 env steps.
  std::ofstream(cfg) << "env: {type: coin_guess, num_envs: 4, stall_at_step: 50}\n"
                        "policy: {type: mlp, d_model: 8, n_layers: 1}\n"
                        "algo: {total_env_steps: 100000000, chunk_len: 8, epochs: 1, minibatches: 1}\n"
                        "runtime: {sync: false, num_actors: 1, actor_stall_s: 1.0, checkpoint_every: 0,\n"
                        "          extra_plugins: [" MAMBARL_TEST_ENV_PLUGIN "], out_dir: "
                     << (dir / "run").string() << "}\n";
  const std::string log = (dir / "log.txt").string();
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = spawn({MAMBARL_TEST_BIN, "train", cfg}, {}, log);
  BOOST_REQUIRE_GT(pid, 0);
  // Detection within actor_stall_s (1 s) plus the 2 s grace for the stuck
  // thread, after a start-up of well under a second: 30 s is a generous bound
  // on a loaded 2-core machine, and far from "hangs".
  const std::optional<int> status = wait_for(pid, std::chrono::seconds(30));
  if (!status) kill_and_reap(pid);
  BOOST_REQUIRE_MESSAGE(status, "mambarl train still running 30 s after its actor stalled:\n" << read_text(log));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string out = read_text(log);
  BOOST_TEST_MESSAGE("ended after " << took << " s:\n" << out);
  BOOST_TEST(WIFEXITED(*status));
  BOOST_TEST(WEXITSTATUS(*status) == 1);
  BOOST_TEST(out.find("actor 0 stalled: it has produced no chunk for") != std::string::npos);
  BOOST_TEST(out.find("runtime.actor_stall_s: 1") != std::string::npos);
  BOOST_TEST(out.find("stuck at its env step 196 ") != std::string::npos);
  BOOST_TEST(out.find("busy since run second") != std::string::npos);
  fs::remove_all(dir);
}

// Stopping `mambarl train` by signal, as checks any suite runs on its own
// setup (test_crash_safety: CPU envs; test_gpu_train_process: GPU envs):
// SIGINT / SIGTERM end a run with exit status 130 / 143 after writing
// checkpoint, metrics and curve, and --resume then reaches bit for bit what a
// run that never stopped reaches (sync mode); a second SIGINT exits at once,
// leaving the last checkpoint whole.
#pragma once

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "test/run_compare.hpp"
#include "test/train_process.hpp"
#include "tools/stop_signals.hpp"

namespace mambarl::test {

// 100 updates of 16 envs x 32 steps, whatever the setup's config says: far
// more than pass between seeing update 2 and the signal landing.
constexpr long long kSignalRunUpdates = 100;
inline std::vector<std::string> signal_run_budget(int checkpoint_every) {
  return {"env.num_envs=16", "algo.chunk_len=32", "algo.total_env_steps=" + std::to_string(kSignalRunUpdates * 16 * 32),
          "runtime.checkpoint_every=" + std::to_string(checkpoint_every)};
}

// A run of `setup` stopped by SIGINT (then one by SIGTERM) after its second
// update exits 130 (143) with its paths and a line saying how to go on, and
// resumed, ends where a run that never stopped ends, bit for bit.
inline void check_signals_stop_cleanly_and_resume_bit_exactly(const TrainSetup& setup) {
  namespace fs = std::filesystem;
  const fs::path dir = scratch("signals");
  const fs::path whole = dir / "whole";
  const std::vector<std::string> budget = signal_run_budget(0);
  const std::string whole_log = (dir / "whole.txt").string();
  BOOST_REQUIRE_EQUAL(exit_status(start_train(setup, whole, budget, whole_log), whole_log), 0);
  for (const auto& [sig, code, name] : {std::tuple{SIGINT, 130, "SIGINT"}, std::tuple{SIGTERM, 143, "SIGTERM"}}) {
    BOOST_TEST_CONTEXT(name) {
      const fs::path out = dir / name, ckpt = out / "checkpoint.safetensors", curve = out / "curve.svg",
                     csv = out / "metrics.csv";
      const std::string log = (dir / (std::string(name) + ".txt")).string();
      const pid_t pid = start_train(setup, out, budget, log);
      wait_for_updates(pid, csv, 2, log);
      BOOST_REQUIRE_EQUAL(::kill(pid, sig), 0);
      BOOST_TEST_REQUIRE(exit_status(pid, log) == code, read_text(log));
      const std::string text = read_text(log);
      BOOST_TEST(text.find("checkpoint: " + ckpt.string() + "\n") != std::string::npos, text);
      BOOST_TEST(text.find("learning curve: " + curve.string() + "\n") != std::string::npos, text);
      BOOST_TEST(text.find("metrics: " + csv.string() + "\n") != std::string::npos, text);
      // The usual last line, then one saying why and how to go on.
      const size_t final_at = text.find("\nfinal mean_return="),
                   stopped_at = text.find("\ninterrupted by " + std::string(name));
      BOOST_TEST_REQUIRE(final_at != std::string::npos, text);
      BOOST_TEST_REQUIRE((stopped_at != std::string::npos && stopped_at > final_at), text);
      BOOST_TEST(text.find(" --resume\n", stopped_at) != std::string::npos, text);
      BOOST_TEST(fs::exists(curve));
      const long long stopped = checkpoint_update(ckpt);
      BOOST_TEST(stopped >= 2);
      BOOST_TEST(stopped < kSignalRunUpdates);
      BOOST_TEST(metrics_updates(csv).size() == static_cast<size_t>(stopped));

      const std::string resumed_log = (dir / (std::string(name) + "_resumed.txt")).string();
      std::vector<std::string> resume = budget;
      resume.push_back("--resume");
      BOOST_TEST_REQUIRE(exit_status(start_train(setup, out, resume, resumed_log), resumed_log) == 0,
                         read_text(resumed_log));
      BOOST_TEST(read_text(resumed_log).find("(bit-exact: sync mode)") != std::string::npos);
      BOOST_TEST(learner_bytes(whole / "checkpoint.safetensors") == learner_bytes(ckpt));
      BOOST_TEST(metrics_without_timing(whole / "metrics.csv") == metrics_without_timing(csv));
    }
  }
  fs::remove_all(dir);
}

// A second SIGINT does not wait for the stop in progress: exit 130 at once,
// no final line, and the last checkpoint (and its curve) is whole; unless it
// comes within kRepeatWindowMs of the first, when it is taken for the same
// request delivered twice (a scheduler's signal to the job and the sweep's to
// its runs) and the stop goes on. Every checkpoint write is held open for
// 2 x 600 ms, so the stop the first signal starts (finish the update, write
// the checkpoint) is still running when the others come.
inline void check_a_second_sigint_exits_at_once(const TrainSetup& setup) {
  namespace fs = std::filesystem;
  const fs::path dir = scratch("signals_twice"), out = dir / "run";
  const std::string log = (dir / "log.txt").string();
  const pid_t pid =
      start_train(setup, out, signal_run_budget(1), log, {"MAMBARL_TEST_ATOMIC_WRITE_PAUSE_MS=600"});
  wait_for_updates(pid, out / "metrics.csv", 2, log);
  BOOST_REQUIRE_EQUAL(::kill(pid, SIGINT), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  BOOST_REQUIRE_EQUAL(::kill(pid, SIGINT), 0);  // within the window: a duplicate
  std::this_thread::sleep_for(std::chrono::milliseconds(kRepeatWindowMs + 200 - 50));
  BOOST_TEST_REQUIRE(!wait_for(pid, std::chrono::seconds(0)), "the duplicate SIGINT ended the run:\n"
                                                                  << read_text(log));
  BOOST_REQUIRE_EQUAL(::kill(pid, SIGINT), 0);
  BOOST_TEST_REQUIRE(exit_status(pid, log) == 130, read_text(log));
  const std::string text = read_text(log);
  BOOST_TEST(text.find("second signal: exiting now") != std::string::npos, text);
  BOOST_TEST(text.find("final mean_return=") == std::string::npos, text);
  BOOST_TEST(checkpoint_update(out / "checkpoint.safetensors") >= 1);
  BOOST_TEST(fs::exists(out / "curve.svg"));  // drawn with every checkpoint, not only at the end
  fs::remove_all(dir);
}

}  // namespace mambarl::test

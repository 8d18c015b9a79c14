// Crash safety of a training run: `mambarl train` (a tiny config, a checkpoint
// after every update) is SIGKILLed over and over at random moments, every
// other time right inside a checkpoint write (MAMBARL_TEST_ATOMIC_WRITE_PAUSE_MS
// widens the write; see policy/io/posix_file.hpp), and restarted with --resume.
// After every kill: the last checkpoint reads back whole and never goes
// backwards, temp files exist only from runs killed since the last run that
// got through start-up (which cleans them), and the metrics file holds whole
// lines only. At the end a
// resumed run finishes cleanly with one metrics row per update, none repeated.
//
// Stopping by signal (test/stop_by_signal.hpp; test_gpu_train_process runs
// the same checks with GPU envs): SIGINT / SIGTERM end a run (sync and async)
// with exit status 130 / 143 after writing checkpoint, metrics and curve, and
// --resume then reaches, in sync mode, bit for bit what a run that never
// stopped reaches; a second SIGINT exits at once, leaving the last checkpoint whole.
#define BOOST_TEST_MODULE crash_safety
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "test/stop_by_signal.hpp"
#include "test/train_process.hpp"

namespace fs = std::filesystem;
using namespace mambarl::test;

namespace {

std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().filename().string());
  return out;
}

const TrainSetup kStatelessCartpole{"stateless_cartpole_mamba1.yaml", {}};  // CPU envs and policy

}  // namespace

BOOST_AUTO_TEST_CASE(sigint_and_sigterm_stop_cleanly_and_resume_bit_exactly) {
  check_signals_stop_cleanly_and_resume_bit_exactly(kStatelessCartpole);
}

// Async mode: the actor threads stop and join, the process exits 130 with its
// outputs written, and --resume finishes the budget (restarting the envs; an
// async run is not bit-exact, so only the shape of the result is checked).
BOOST_AUTO_TEST_CASE(sigint_stops_an_async_run_cleanly_and_it_resumes) {
  const fs::path dir = scratch("signals_async"), out = dir / "run", csv = out / "metrics.csv";
  std::vector<std::string> args = signal_run_budget(0);
  args.insert(args.end(), {"runtime.sync=false", "runtime.num_actors=2"});
  const std::string log = (dir / "stopped.txt").string();
  const pid_t pid = start_train(kStatelessCartpole, out, args, log);
  wait_for_updates(pid, csv, 2, log);
  BOOST_REQUIRE_EQUAL(::kill(pid, SIGINT), 0);
  BOOST_TEST_REQUIRE(exit_status(pid, log) == 130, read_text(log));
  BOOST_TEST(read_text(log).find("\ninterrupted by SIGINT") != std::string::npos);
  BOOST_TEST(fs::exists(out / "curve.svg"));
  const long long stopped = checkpoint_update(out / "checkpoint.safetensors");
  BOOST_TEST(stopped >= 2);

  const std::string resumed_log = (dir / "resumed.txt").string();
  args.push_back("--resume");
  BOOST_TEST_REQUIRE(exit_status(start_train(kStatelessCartpole, out, args, resumed_log), resumed_log) == 0,
                     read_text(resumed_log));
  const std::string text = read_text(resumed_log);
  BOOST_TEST(text.find("resumed from " + (out / "checkpoint.safetensors").string() + " at update " +
                       std::to_string(stopped)) != std::string::npos, text);
  BOOST_TEST(text.find("env_steps=" + std::to_string(kSignalRunUpdates * 16 * 32)) != std::string::npos, text);
  const std::vector<long long> updates = metrics_updates(csv);
  for (size_t k = 0; k < updates.size(); ++k) BOOST_REQUIRE_EQUAL(updates[k], static_cast<long long>(k + 1));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_second_sigint_exits_at_once) { check_a_second_sigint_exits_at_once(kStatelessCartpole); }

BOOST_AUTO_TEST_CASE(sigkill_at_random_and_mid_checkpoint_never_loses_the_run) {
  const fs::path dir = scratch("crash");
  const fs::path out = dir / "run", ckpt = out / "checkpoint.safetensors", csv = out / "metrics.csv";
  const std::string cfg = (dir / "tiny.yaml").string();
  std::ofstream(cfg) << "env: {type: cartpole, num_envs: 8}\n"
                        "policy: {type: mamba1, d_model: 16, n_layers: 1}\n"
                        "algo: {total_env_steps: 1000000000, chunk_len: 16, epochs: 1, minibatches: 1}\n"
                        "runtime: {checkpoint_every: 1, log_every: 1000000, out_dir: "
                     << out.string() << "}\n";
  const std::vector<std::string> env{"MAMBARL_TEST_ATOMIC_WRITE_PAUSE_MS=10"};
  std::mt19937 rng(20261202);
  constexpr int kKills = 24;
  int mid_write = 0;
  long long last_update = 0;
  std::set<std::string> may_leave_temps;  // pids
  for (int i = 0; i < kKills; ++i) {
    std::vector<std::string> argv{MAMBARL_TEST_BIN, "train", cfg};
    const bool resume = fs::exists(ckpt);
    // A run killed before its first checkpoint left metrics: a fresh start replaces them.
    argv.push_back(resume ? "--resume" : "--force");
    const std::string log = (dir / ("log" + std::to_string(i) + ".txt")).string();
    const pid_t pid = spawn(argv, env, log);
    BOOST_REQUIRE_GT(pid, 0);
    const std::string tmp = ckpt.string() + ".tmp." + std::to_string(pid);
    bool in_write = false;
    if (i % 2 == 0) {
      // Wait for this process to start a checkpoint write, then kill inside it
      // (the pause holds each of its two halves open for 10 ms).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!fs::exists(tmp) && std::chrono::steady_clock::now() < deadline && !wait_for(pid, std::chrono::seconds(0)))
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 15000)(rng)));
    } else {
      // A random moment of the training itself: wait for start-up to finish
      // first (on a loaded machine it can take longer than any fixed delay, and
      // a test that only ever kills during start-up would never see a checkpoint).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (read_text(log).find("training ") == std::string::npos &&
             std::chrono::steady_clock::now() < deadline && !wait_for(pid, std::chrono::seconds(0)))
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 400)(rng)));
    }
    in_write = fs::exists(tmp);
    const int status = kill_and_reap(pid);
    BOOST_REQUIRE_MESSAGE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                          "run " << i << " ended before the kill:\n" << read_text(log));
    mid_write += in_write;
    const std::string text = read_text(log);
    if (resume && text.find("training ") != std::string::npos)  // it got as far as loading the checkpoint
      BOOST_TEST(text.find("resumed from") != std::string::npos);
    // The last checkpoint loads whole and never goes backwards.
    if (fs::exists(ckpt)) {
      const long long u = checkpoint_update(ckpt);
      BOOST_TEST(u >= last_update);
      last_update = u;
    }
    // Temp files may be left only by the runs killed since the last one that got
    // through start-up (which removes the stale ones): they never pile up.
    if (text.find("training ") != std::string::npos) may_leave_temps.clear();
    may_leave_temps.insert(std::to_string(pid));
    for (const std::string& name : temp_files(out))
      BOOST_TEST(may_leave_temps.count(name.substr(name.rfind('.') + 1)) == 1, "stale temp file " << name);
    metrics_updates(csv);
  }
  BOOST_TEST_MESSAGE(kKills << " kills, " << mid_write << " inside a checkpoint write, last checkpoint at update "
                            << last_update);
  BOOST_TEST(mid_write >= kKills / 2 - 2);  // the mid-write kills really landed inside writes
  BOOST_TEST(last_update > 0);

  // A clean finish from the last checkpoint: three more updates.
  const std::string log = (dir / "final.txt").string();
  const pid_t pid = spawn({MAMBARL_TEST_BIN, "train", cfg, "--resume",
                           "runtime.stop_after_updates=" + std::to_string(last_update + 3)},
                          {}, log);
  const std::optional<int> status = wait_for(pid, std::chrono::seconds(120));
  if (!status) kill_and_reap(pid);
  BOOST_REQUIRE(status);
  const std::string text = read_text(log);
  BOOST_TEST_REQUIRE((WIFEXITED(*status) && WEXITSTATUS(*status) == 0), text);
  BOOST_TEST(text.find("resumed from " + ckpt.string() + " at update " + std::to_string(last_update)) !=
             std::string::npos);
  BOOST_TEST(temp_files(out).empty());
  BOOST_TEST(checkpoint_update(ckpt) == last_update + 3);
  // One row per update, 1..N in order: rows written after the last checkpoint
  // by a killed run were cut on resume, never repeated.
  const std::vector<long long> updates = metrics_updates(csv);
  BOOST_REQUIRE_EQUAL(updates.size(), static_cast<size_t>(last_update + 3));
  for (size_t k = 0; k < updates.size(); ++k) BOOST_REQUIRE_EQUAL(updates[k], static_cast<long long>(k + 1));
  fs::remove_all(dir);
}

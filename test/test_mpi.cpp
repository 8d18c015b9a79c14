// Data-parallel training under mpirun (tools/ranks.hpp): `mpirun -np 2 mambarl
// train` of a small CPU config trains as one process on the same total envs
// does (the two halves equal the whole: metrics and final weights to ~1e-6),
// resumes bit for bit with the same rank count and refuses another, refuses
// configs the ranks cannot run, and a rank killed or stopped mid-run ends the
// job with an error naming a rank, leaving the last checkpoint whole. Every run is a child
// process (test/process_util.hpp); registered only where CMake found MPI.
#define BOOST_TEST_MODULE mpi
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "policy/io/safetensors.hpp"
#include "test/process_util.hpp"
#include "test/run_compare.hpp"

namespace fs = std::filesystem;
using namespace mambarl::test;

namespace {

// 8 envs, 2 minibatches: each rank owns 4 of the 8 columns, so a minibatch
// of 4 shuffled columns gives the ranks 0 to 4 each (an empty share included
// over the updates). Reward scaling and return normalisation on, so their
// global statistics are tested.
constexpr const char* kConfig =
    "env: {type: cartpole, num_envs: 8}\n"
    "policy: {type: mamba1, d_model: 16, n_layers: 1, d_state: 8}\n"
    "algo: {total_env_steps: 768, chunk_len: 16, epochs: 2, minibatches: 2, normalize_rewards: true,"
    " normalize_returns: true}\n"
    "runtime: {device: cpu, sync: true, seed: 3}\n";

fs::path scratch(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("mambarl_test_mpi_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "run.yaml") << kConfig;
  return dir;
}

// `mambarl train <dir>/run.yaml runtime.out_dir=<dir>/<out> args...`, by
// `ranks` processes (mpirun when more than one).
std::vector<std::string> train_argv(const fs::path& dir, int ranks, const std::string& out,
                                    const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv;
  if (ranks > 1)
    argv = {MAMBARL_TEST_MPIEXEC, "-np", std::to_string(ranks), "--oversubscribe", "--allow-run-as-root"};
  for (const std::string& a : {std::string(MAMBARL_TEST_BIN), std::string("train"),
                               (dir / "run.yaml").string(), "runtime.out_dir=" + (dir / out).string()})
    argv.push_back(a);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

Ran train(const fs::path& dir, int ranks, const std::string& out, const std::vector<std::string>& args = {}) {
  return run_to_end(train_argv(dir, ranks, out, args), (dir / (out + ".log")).string());
}

std::vector<std::vector<std::string>> csv_rows(const fs::path& p) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(read_file(p));
  std::string line, cell;
  while (std::getline(in, line)) {
    rows.emplace_back();
    std::istringstream cells(line);
    while (std::getline(cells, cell, ',')) rows.back().push_back(cell);
  }
  return rows;
}

// a == b within 1e-6 of max(|a|, |b|, 1e-2). The floor: pg_loss and approx_kl
// are near-zero means of O(1) normalised terms, whose float32 rounding in
// another summation order is ~1e-9 absolute however small the mean is.
bool close(double a, double b) {
  return std::abs(a - b) <= 1e-6 * std::max({std::abs(a), std::abs(b), 1e-2});
}

}  // namespace

// The ranks' envs are the one-process run's (same seeds, same sampling
// streams), so episodes and returns match exactly; the learner sums the
// same terms in another order, so losses and weights match to rounding.
namespace {

void check_two_ranks_match_one_process(const std::string& name, const std::vector<std::string>& args) {
  const fs::path dir = scratch(name);
  const Ran one = train(dir, 1, "one", args);
  BOOST_REQUIRE_MESSAGE(one.exit_code == 0, one.out);
  const Ran two = train(dir, 2, "two", args);
  BOOST_REQUIRE_MESSAGE(two.exit_code == 0, two.out);
  BOOST_TEST(two.out.find("2 data-parallel ranks of 4 envs each") != std::string::npos, two.out);

  const auto a = csv_rows(dir / "one" / "metrics.csv"), b = csv_rows(dir / "two" / "metrics.csv");
  BOOST_REQUIRE_EQUAL(a.size(), 7u);  // header + 768 / (8 x 16) updates
  BOOST_REQUIRE_EQUAL(b.size(), a.size());
  const std::vector<std::string>& header = a[0];
  for (size_t r = 1; r < a.size(); ++r)
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string& col = header[c];
      if (col == "wall_s" || col == "steps_per_s" || col == "collect_s" || col == "learn_s") continue;
      const double x = std::stod(a[r][c]), y = std::stod(b[r][c]);
      const bool exact = col == "update" || col == "env_steps" || col == "episodes" || col == "mean_return" ||
                         col == "max_return" || col == "skipped_steps" || col == "lr";
      BOOST_TEST_CONTEXT("update " << r << ", " << col << ": one process " << a[r][c] << ", two ranks "
                                   << b[r][c]) {
        if (exact)
          BOOST_TEST(x == y);
        else
          BOOST_TEST(close(x, y));
      }
    }

  // Final weights and Adam moments: each tensor within 1e-6 of its largest
  // element (Adam divides by sqrt(v), which amplifies rounding of tiny moments).
  const auto ta = mambarl::read_safetensors((dir / "one" / "checkpoint.safetensors").string());
  const auto tb = mambarl::read_safetensors((dir / "two" / "checkpoint.safetensors").string());
  int compared = 0;
  for (const auto& t : ta.tensors) {
    if (t.name.rfind("runner.", 0) == 0 || t.dtype != mambarl::DType::F32) continue;
    const mambarl::TensorRecord& u = tb.at(t.name);
    BOOST_REQUIRE_EQUAL(u.bytes.size(), t.bytes.size());
    std::vector<float> x(t.numel()), y(u.numel());
    std::memcpy(x.data(), t.bytes.data(), t.bytes.size());
    std::memcpy(y.data(), u.bytes.data(), u.bytes.size());
    double scale = 0, diff = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      scale = std::max(scale, static_cast<double>(std::abs(x[i])));
      diff = std::max(diff, static_cast<double>(std::abs(x[i] - y[i])));
    }
    BOOST_TEST_CONTEXT(t.name << ": max |diff| " << diff << ", max |w| " << scale) {
      BOOST_TEST(diff <= 1e-6 * std::max(scale, 1e-6));
    }
    ++compared;
  }
  BOOST_TEST(compared > 0);
  // Every rank's env state is in the checkpoint, as the one-process run's
  // worker 0 state split in two.
  BOOST_TEST(tb.metadata.at("runner.ranks") == "2");
  BOOST_TEST(ta.at("runner.0.obs").bytes.size() == tb.at("runner.0.obs").bytes.size() * 2);
  BOOST_TEST(tb.find("runner.1.env_state") != nullptr);
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_ranks_train_as_one_process_on_all_the_envs) { check_two_ranks_match_one_process("same", {}); }

// With learner context (algo.bptt_len: two earlier chunks before each), which
// each rank keeps for its own envs and rank 0's checkpoint gathers.
BOOST_AUTO_TEST_CASE(two_ranks_with_learner_context_train_as_one_process) {
  check_two_ranks_match_one_process("context", {"algo.bptt_len=48"});
  const auto ck = mambarl::read_safetensors(
      (fs::temp_directory_path() / ("mambarl_test_mpi_context_" + std::to_string(::getpid())) / "two" /
       "checkpoint.safetensors")
          .string());
  BOOST_TEST(ck.at("runner.1.context_obs").numel() == 32u * 4u * 4u);  // 32 steps x 4 envs x cartpole's 4
}

// Stopped after 3 updates and resumed by 2 ranks == never stopped, bit for
// bit; the checkpoint refuses one process, naming both counts.
// With learner context too (the context goes through the gathered checkpoint).
BOOST_AUTO_TEST_CASE(resume_with_the_same_ranks_is_bit_exact_and_another_count_is_refused) {
  const fs::path dir = scratch("resume");
  const Ran whole = train(dir, 2, "whole");
  BOOST_REQUIRE_MESSAGE(whole.exit_code == 0, whole.out);
  const Ran first = train(dir, 2, "parts", {"runtime.stop_after_updates=3"});
  BOOST_REQUIRE_MESSAGE(first.exit_code == 0, first.out);
  const Ran one = train(dir, 1, "parts", {"--resume"});
  BOOST_TEST(one.exit_code == 1);
  BOOST_TEST(
      one.out.find("it was written by 2 rank(s) and this run has 1 (mpirun -np); resume with 2 rank(s)") !=
          std::string::npos,
      one.out);
  const Ran rest = train(dir, 2, "parts", {"--resume"});
  BOOST_REQUIRE_MESSAGE(rest.exit_code == 0, rest.out);
  BOOST_TEST(rest.out.find("(bit-exact: sync mode)") != std::string::npos, rest.out);
  BOOST_TEST(metrics_without_timing(dir / "parts" / "metrics.csv") ==
             metrics_without_timing(dir / "whole" / "metrics.csv"));
  BOOST_TEST(learner_bytes(dir / "parts" / "checkpoint.safetensors") ==
             learner_bytes(dir / "whole" / "checkpoint.safetensors"));

  const std::vector<std::string> context = {"algo.bptt_len=48"};
  auto stop = context;
  stop.push_back("runtime.stop_after_updates=3");
  auto resume = context;
  resume.push_back("--resume");
  BOOST_REQUIRE_EQUAL(train(dir, 2, "ctx_whole", context).exit_code, 0);
  BOOST_REQUIRE_EQUAL(train(dir, 2, "ctx_parts", stop).exit_code, 0);
  const Ran ctx_rest = train(dir, 2, "ctx_parts", resume);
  BOOST_REQUIRE_MESSAGE(ctx_rest.exit_code == 0, ctx_rest.out);
  BOOST_TEST(ctx_rest.out.find("(bit-exact: sync mode)") != std::string::npos, ctx_rest.out);
  BOOST_TEST(metrics_without_timing(dir / "ctx_parts" / "metrics.csv") ==
             metrics_without_timing(dir / "ctx_whole" / "metrics.csv"));
  BOOST_TEST(learner_bytes(dir / "ctx_parts" / "checkpoint.safetensors") ==
             learner_bytes(dir / "ctx_whole" / "checkpoint.safetensors"));
}

// What ranks cannot run is refused before training, naming the key, the
// value and the rank count; the error ends every rank.
BOOST_AUTO_TEST_CASE(configs_the_ranks_cannot_run_are_refused) {
  const fs::path dir = scratch("refused");
  const struct {
    std::vector<std::string> args;
    std::string expect;
  } cases[] = {
      {{"runtime.sync=false"},
       "runtime.sync: false under 2 data-parallel ranks (mpirun -np 2): ranks run the "
       "synchronous loop only"},
      {{"env.num_envs=7"}, "env.num_envs: 7 is not divisible by the 2 ranks"},
      {{"algo.minibatches=8"},
       "algo.minibatches: must divide the envs per rank (4 = env.num_envs 8 / 2 ranks), got 8"},
      // Only rank 1 fails here (rank 0's envs start at 0, which the plugin env ABI can seed):
      // one rank's error ends both.
      {{"env.type=coin_guess", "env.length=5",
        std::string("runtime.extra_plugins=[") + MAMBARL_TEST_ENV_PLUGIN + "]"},
       "error on rank 1 of 2: env.type: coin_guess is a plugin env, which cannot be split across "
       "data-parallel ranks"},
  };
  for (const auto& c : cases) {
    const Ran r = train(dir, 2, "out", c.args);
    BOOST_TEST_CONTEXT(c.args[0] << ":\n" << r.out) {
      BOOST_TEST(r.exit_code != 0);
      BOOST_TEST(r.out.find(c.expect) != std::string::npos);
      BOOST_TEST(r.out.find("error on rank ") != std::string::npos);
    }
  }
}

namespace {

// Which rank of the training run on `dir`'s config process `pid` is (its
// command line names the config, its launcher environment the rank), or -1
// when it is none of them.
int rank_of(pid_t pid, const fs::path& dir) {
  const fs::path proc = fs::path("/proc") / std::to_string(pid);
  std::string cmdline = read_text((proc / "cmdline").string());
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  if (cmdline.rfind(MAMBARL_TEST_BIN, 0) != 0 || cmdline.find((dir / "run.yaml").string()) == std::string::npos)
    return -1;
  // NUL-separated NAME=value entries; one NUL in front makes every entry start after one.
  const std::string environ = std::string(1, '\0') + read_text((proc / "environ").string());
  const std::string name = std::string(1, '\0') + "OMPI_COMM_WORLD_RANK=";
  const size_t at = environ.find(name);
  return at == std::string::npos ? -1 : std::atoi(environ.c_str() + at + name.size());
}

// The live processes of the training run on `dir`'s config, by rank.
std::map<int, pid_t> training_ranks(const fs::path& dir) {
  std::map<int, pid_t> ranks;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    if (const int r = rank_of(pid, dir); r >= 0) ranks[r] = pid;
  }
  return ranks;
}

// A long run of `dir`'s config by 2 ranks (checkpointing every 2 updates)
// that leaves nothing behind however the test case ends: mpirun reaped and
// every rank killed, a stopped one too (SIGKILL needs no SIGCONT), and those
// a killed mpirun left orphaned.
class LongRun {
 public:
  LongRun(const fs::path& dir, const std::string& log, const std::vector<std::string>& args = {}) : dir_(dir) {
    std::vector<std::string> all = {"algo.total_env_steps=100000000", "runtime.checkpoint_every=2"};
    all.insert(all.end(), args.begin(), args.end());
    mpirun_ = spawn(train_argv(dir, 2, "out", all), {}, log);
    BOOST_REQUIRE_GT(mpirun_, 0);
  }
  ~LongRun() {
    if (!status_) kill_and_reap(mpirun_);
    for (const auto& [rank, pid] : training_ranks(dir_)) ::kill(pid, SIGKILL);
  }
  LongRun(const LongRun&) = delete;
  LongRun& operator=(const LongRun&) = delete;

  // The pid of rank `rank` once training has begun (the first checkpoint is
  // on disk), or -1 if it has not within 120 s.
  pid_t rank(int rank) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!fs::exists(dir_ / "out" / "checkpoint.safetensors")) continue;
      const auto ranks = training_ranks(dir_);
      if (const auto it = ranks.find(rank); it != ranks.end()) return it->second;
    }
    return -1;
  }
  // mpirun's wait status once it has ended, or nullopt while it still runs after `limit`.
  std::optional<int> wait(std::chrono::duration<double> limit) {
    if (!status_) status_ = wait_for(mpirun_, limit);
    return status_;
  }

 private:
  fs::path dir_;
  pid_t mpirun_ = -1;
  std::optional<int> status_;
};

}  // namespace

// A rank that dies (SIGKILL from outside: nothing in mambarl can catch it)
// ends the whole job, mpirun naming the rank, and the checkpoint on disk
// (written by rank 0 atomically) reads back whole.
BOOST_AUTO_TEST_CASE(a_killed_rank_ends_the_job_naming_it) {
  const fs::path dir = scratch("killed");
  const std::string log = (dir / "killed.log").string();
  LongRun run(dir, log);
  const pid_t rank1 = run.rank(1);
  BOOST_REQUIRE_MESSAGE(rank1 > 0, "rank 1 not found training:\n" << read_text(log));
  ::kill(rank1, SIGKILL);
  const std::optional<int> status = run.wait(std::chrono::seconds(60));
  BOOST_REQUIRE_MESSAGE(status, "mpirun still running 60 s after rank 1 was killed:\n" << read_text(log));
  BOOST_TEST(!(WIFEXITED(*status) && WEXITSTATUS(*status) == 0));
  const std::string out = read_text(log);
  BOOST_TEST(out.find("process rank 1") != std::string::npos, out);
  const auto ck =
      mambarl::read_safetensors((dir / "out" / "checkpoint.safetensors").string());  // throws if torn
  BOOST_TEST(ck.metadata.at("runner.ranks") == "2");
}

// A rank that hangs (SIGSTOP: alive, silent, failing nothing MPI could see)
// leaves rank 0 waiting in its next collective; after
// runtime.collective_timeout_s rank 0 names itself, the key and the work it
// waited in, and ends the job (MPI_Abort), and the checkpoint reads back whole.
BOOST_AUTO_TEST_CASE(a_hung_rank_ends_the_job_after_the_collective_timeout) {
  constexpr int kTimeoutS = 3;
  const fs::path dir = scratch("hung");
  const std::string log = (dir / "hung.log").string();
  LongRun run(dir, log, {"runtime.collective_timeout_s=" + std::to_string(kTimeoutS)});
  const pid_t rank1 = run.rank(1);
  BOOST_REQUIRE_MESSAGE(rank1 > 0, "rank 1 not found training:\n" << read_text(log));
  BOOST_REQUIRE_EQUAL(::kill(rank1, SIGSTOP), 0);
  const auto stopped = std::chrono::steady_clock::now();
  // The job was still training when rank 1 stopped (nothing else ends it).
  BOOST_REQUIRE_MESSAGE(!run.wait(std::chrono::seconds(0)), "the job ended before rank 1 stopped:\n"
                                                                << read_text(log));
  const std::optional<int> status = run.wait(std::chrono::seconds(60));
  const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  BOOST_REQUIRE_MESSAGE(status, "mpirun still running 60 s after rank 1 stopped:\n" << read_text(log));
  BOOST_TEST(!(WIFEXITED(*status) && WEXITSTATUS(*status) == 0));
  // The timeout ended it, not something sooner. Rank 0's clock may have
  // started before the stop (it can already be waiting on rank 1 inside the
  // collective when SIGSTOP lands), so the job may end up to one update
  // sooner than kTimeoutS after the stop: measured here, 2.9 s of 3 on a
  // loaded 2-core runner. Anything that did not wait for the timeout (MPI
  // noticing the stop, a crash) ends it at once, well under half of it.
  BOOST_TEST(waited_s >= kTimeoutS / 2.0);
  const std::string out = read_text(log);
  for (const std::string& part :
       {"error on rank 0 of 2: spent more than " + std::to_string(kTimeoutS) + " s (runtime.collective_timeout_s) in ",
        std::string("one of them died or hangs")})
    BOOST_TEST(out.find(part) != std::string::npos, "the output lacks '" << part << "':\n" << out);
  const auto ck =
      mambarl::read_safetensors((dir / "out" / "checkpoint.safetensors").string());  // throws if torn
  BOOST_TEST(ck.metadata.at("runner.ranks") == "2");
}

// `mambarl train` with GPU envs (env.backend: cuda, runtime.device: cuda),
// watched from outside as test_crash_safety watches the CPU loops:
// SIGINT / SIGTERM stop the chunk-graph loop cleanly and --resume continues
// bit for bit, a second SIGINT exits at once (the checks of
// test/stop_by_signal.hpp), and a config whose device buffers cannot fit in
// the GPU's free memory is refused before they are allocated, with the
// estimate, its biggest parts and the memory the device has.
// Skipped without a CUDA device unless MAMBARL_REQUIRE_GPU=1.
#define BOOST_TEST_MODULE gpu_train_process
#include <boost/test/unit_test.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>

#include "test/gpu_test_util.hpp"
#include "test/stop_by_signal.hpp"
#include "test/train_process.hpp"

namespace fs = std::filesystem;
using namespace mambarl::test;

namespace {

// The CPU suite's config with its envs, actor and learner moved to the GPU.
const TrainSetup kGpuEnvs{"stateless_cartpole_mamba1.yaml", {"env.backend=cuda", "runtime.device=cuda"}};

// The bytes of "384.5 GiB" (tools/memory_estimate.hpp's format_bytes) at `at` in `text`.
double parse_bytes(const std::string& text, size_t at) {
  std::istringstream in(text.substr(at));
  double n = 0;
  std::string unit;
  in >> n >> unit;
  const double mib = 1 << 20;
  if (unit == "MiB") return n * mib;
  if (unit == "GiB") return n * mib * 1024;
  BOOST_REQUIRE_MESSAGE(unit == "TiB", "no size at '" << text.substr(at, 20) << "'");
  return n * mib * 1024 * 1024;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_train_process, *boost::unit_test::precondition(gpu_or_required))

BOOST_AUTO_TEST_CASE(sigint_and_sigterm_stop_cleanly_and_resume_bit_exactly) {
  require_gpu();
  check_signals_stop_cleanly_and_resume_bit_exactly(kGpuEnvs);
}

BOOST_AUTO_TEST_CASE(a_second_sigint_exits_at_once) {
  require_gpu();
  check_a_second_sigint_exits_at_once(kGpuEnvs);
}

// 2^24 envs: the learner's activations alone (32 steps x 2^22 envs a
// minibatch x d_model 32 x 24 floats) are 384 GiB of device memory, more than
// any GPU this runs on has. Refused in seconds, before the rollout's buffers
// exist: its device chunk (20 GiB) would fit, so only an early check keeps it
// from being allocated, and its pinned host copies of the episode records
// (5 GiB) would show in the process's peak resident memory.
BOOST_AUTO_TEST_CASE(a_config_that_cannot_fit_in_gpu_memory_is_refused_fast) {
  require_gpu();
  size_t free_b = 0, total_b = 0;
  BOOST_REQUIRE(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess);
  const double activations = 32.0 * (1 << 22) * 32 * 24 * sizeof(float);
  BOOST_REQUIRE_MESSAGE(activations > static_cast<double>(total_b),
                        "this GPU has " << total_b << " bytes: raise env.num_envs in this test");
  const fs::path dir = scratch("gpu_memory");
  const std::string log = (dir / "log.txt").string();
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = start_train(kGpuEnvs, dir / "run", {"env.num_envs=16777216"}, log);
  struct rusage usage {};
  const std::optional<int> status = wait_for(pid, std::chrono::seconds(60), &usage);
  if (!status) kill_and_reap(pid);
  const std::string text = read_text(log);
  BOOST_REQUIRE_MESSAGE(status, "still running after 60 s:\n" << text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE(text << "(" << seconds << " s, peak resident " << usage.ru_maxrss / 1024 << " MiB)");
  BOOST_TEST_REQUIRE((WIFEXITED(*status) && WEXITSTATUS(*status) == 1), text);
  const std::string head = "env.num_envs: 16777216 envs with algo.chunk_len 32 need an estimated ";
  const size_t need_at = text.find(head), parts_at = text.find(" of GPU memory (learner activations "),
               have_at = text.find("more than the "), advice_at = text.find(" available; lower env.num_envs");
  BOOST_TEST_REQUIRE((need_at != std::string::npos && parts_at != std::string::npos && have_at != std::string::npos &&
                      advice_at != std::string::npos),
                     text);
  // The estimate covers the activations; the available memory is this device's (less what other processes hold).
  BOOST_TEST(parse_bytes(text, need_at + head.size()) >= activations);
  const double have = parse_bytes(text, have_at + std::string("more than the ").size());
  BOOST_TEST(have > 0.0);
  BOOST_TEST(have <= static_cast<double>(total_b));
  // Nothing was built: no progress line of a large batch, no training line.
  BOOST_TEST(text.find("building ") == std::string::npos, text);
  BOOST_TEST(text.find("training ") == std::string::npos, text);
  BOOST_TEST(usage.ru_maxrss < 4L * 1024 * 1024);  // KiB: under 4 GiB
  BOOST_TEST(seconds < 30.0);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

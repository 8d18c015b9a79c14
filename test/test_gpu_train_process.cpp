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

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

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

// The most envs a config may ask for (2^20) on 128-step chunks in one
// minibatch: the learner's activations alone (128 steps x 2^20 envs x d_model
// 32 x 24 floats) are 384 GiB of device memory, more than any GPU this runs
// on has. Refused in seconds, before the rollout's buffers exist: its device
// chunk and start states (10 GiB) would fit, so only a check before them
// keeps them off the device, which the test watches from outside.
BOOST_AUTO_TEST_CASE(a_config_that_cannot_fit_in_gpu_memory_is_refused_fast) {
  require_gpu();
  size_t free_before = 0, total = 0;
  BOOST_REQUIRE(cudaMemGetInfo(&free_before, &total) == cudaSuccess);
  const double activations = 128.0 * (1 << 20) * 32 * 24 * sizeof(float);
  BOOST_REQUIRE_MESSAGE(activations > static_cast<double>(total),
                        "this GPU has " << total << " bytes: lengthen algo.chunk_len in this test");
  const fs::path dir = scratch("gpu_memory");
  const std::string log = (dir / "log.txt").string();
  const auto t0 = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const pid_t pid =
      start_train(kGpuEnvs, dir / "run", {"env.num_envs=1048576", "algo.chunk_len=128", "algo.minibatches=1"}, log);
  // The least free device memory seen while the child runs (ctest gives GPU
  // suites the device alone: RESOURCE_LOCK gpu).
  size_t least_free = free_before;
  std::optional<int> status;
  while (!(status = wait_for(pid, std::chrono::seconds(0))) && seconds() < 60) {
    size_t f = 0, t = 0;
    BOOST_REQUIRE(cudaMemGetInfo(&f, &t) == cudaSuccess);
    least_free = std::min(least_free, f);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!status) kill_and_reap(pid);
  const std::string text = read_text(log);
  BOOST_REQUIRE_MESSAGE(status, "still running after 60 s:\n" << text);
  const double took = seconds();
  const double held = static_cast<double>(free_before - least_free);
  BOOST_TEST_MESSAGE(text << "(" << took << " s; the child held at most " << held / (1 << 20) << " MiB of the device)");
  BOOST_TEST_REQUIRE((WIFEXITED(*status) && WEXITSTATUS(*status) == 1), text);
  const std::string head = "env.num_envs: 1048576 envs with algo.chunk_len 128 need an estimated ";
  const size_t need_at = text.find(head), parts_at = text.find(" of GPU memory (learner activations "),
               have_at = text.find("more than the "), advice_at = text.find(" available; lower env.num_envs");
  BOOST_TEST_REQUIRE((need_at != std::string::npos && parts_at != std::string::npos && have_at != std::string::npos &&
                      advice_at != std::string::npos),
                     text);
  // The estimate covers the activations; the available memory is this device's.
  BOOST_TEST(parse_bytes(text, need_at + head.size()) >= activations);
  const double have = parse_bytes(text, have_at + std::string("more than the ").size());
  BOOST_TEST(have > 0.0);
  BOOST_TEST(have <= static_cast<double>(total));
  // Nothing was built: no progress line of a large batch, no training line,
  // and never more of the device than a CUDA context, the policy and cuBLAS take.
  BOOST_TEST(text.find("building ") == std::string::npos, text);
  BOOST_TEST(text.find("training ") == std::string::npos, text);
  BOOST_TEST(held < 4.0 * (1 << 30));
  BOOST_TEST(took < 30.0);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

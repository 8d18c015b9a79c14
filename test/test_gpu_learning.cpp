// End-to-end learning with both roles on the GPU (labels slow and gpu): the
// CPU suite's runs (test/test_learning.cpp) with runtime.device: cuda must
// reach the same bars. Skipped without a CUDA device unless
// MAMBARL_REQUIRE_GPU=1.
#define BOOST_TEST_MODULE gpu_learning
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "test/gpu_test_util.hpp"
#include "test/train_util.hpp"

using namespace mambarl;
using namespace mambarl::test;
namespace utf = boost::unit_test;

BOOST_AUTO_TEST_SUITE(gpu_learning, *utf::precondition(gpu_or_required))

namespace {

// Trains configs/<config>.yaml on the GPU (actors and learner) and checks
// the mean return of its last 100 episodes against `bar`.
void check_learns_on_cuda(const std::string& config, double bar) {
  require_gpu();
  const auto dir = out_dir("cuda_" + config);
  std::string log;
  const TrainSummary s = train(config, dir, {"runtime.device=cuda"}, false, &log);
  BOOST_TEST_MESSAGE(config << " on cuda: mean return " << s.mean_return << " after " << s.env_steps
                            << " steps, " << s.wall_s << " s");
  BOOST_TEST(log.find(", device cuda (actors and learner), dtype float32,") != std::string::npos);
  BOOST_CHECK_MESSAGE(s.mean_return >= bar,
                      config << " on cuda: mean return " << s.mean_return << " < " << bar);
  std::filesystem::remove_all(dir);
}

}  // namespace

BOOST_AUTO_TEST_CASE(cartpole_mamba1_on_cuda_solves_cartpole) {
  check_learns_on_cuda("cartpole_mamba1", 475.0);
}

// The memory task: velocities hidden, so the recurrent state must carry them.
BOOST_AUTO_TEST_CASE(stateless_cartpole_mamba1_on_cuda_learns) {
  check_learns_on_cuda("stateless_cartpole_mamba1", 0.8);
}

namespace {

// Trains configs/<config>.yaml with `overrides` that put the envs on the GPU
// (env.backend: cuda) and checks the mean return of its last 100 episodes
// against `bar`.
void check_learns_with_gpu_envs(const std::string& config, const std::vector<std::string>& overrides, double bar) {
  require_gpu();
  const auto dir = out_dir("gpu_envs_" + config);
  std::string log;
  const TrainSummary s = train(config, dir, overrides, false, &log);
  std::string how = config;
  for (const std::string& o : overrides) how += " " + o;
  BOOST_TEST_MESSAGE(how << " (GPU envs): mean return " << s.mean_return << " after " << s.env_steps
                         << " steps, wall " << s.wall_s << " s");
  BOOST_TEST(log.find(" envs on the GPU, ") != std::string::npos);
  BOOST_CHECK_MESSAGE(s.mean_return >= bar, how << " (GPU envs): mean return " << s.mean_return << " < " << bar);
  std::filesystem::remove_all(dir);
}

const std::vector<std::string> kGpuEnvs = {"runtime.device=cuda", "env.backend=cuda"};
const std::vector<std::string> kGpuEnvsAsync = {"runtime.device=cuda", "env.backend=cuda", "runtime.sync=false"};

}  // namespace

// Envs on the GPU too (env.backend: cuda, tools/device_rollout.hpp): the
// fast-solve config, whose wall time is the headline number.
BOOST_AUTO_TEST_CASE(cartpole_mamba1_with_gpu_envs_solves_cartpole) {
  check_learns_with_gpu_envs("cartpole_mamba1_gpu", {}, 475.0);
}

// The CPU suite's memory-task run, unchanged but for where the envs step.
BOOST_AUTO_TEST_CASE(stateless_cartpole_mamba1_with_gpu_envs_learns) {
  check_learns_with_gpu_envs("stateless_cartpole_mamba1", kGpuEnvs, 0.8);
}

// Async mode (each chunk collected while the learner trains on the last,
// policy lag 1) reaches the same bars.
BOOST_AUTO_TEST_CASE(cartpole_mamba1_with_gpu_envs_async_solves_cartpole) {
  check_learns_with_gpu_envs("cartpole_mamba1_gpu", {"runtime.sync=false"}, 475.0);
}

BOOST_AUTO_TEST_CASE(stateless_cartpole_mamba1_with_gpu_envs_async_learns) {
  check_learns_with_gpu_envs("stateless_cartpole_mamba1", kGpuEnvsAsync, 0.8);
}

BOOST_AUTO_TEST_SUITE_END()

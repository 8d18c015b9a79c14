// End-to-end learning with the GPU actor (labels slow and gpu): the CPU
// suite's CartPole run (test/test_learning.cpp) with runtime.device: cuda
// must reach the same bar. Skipped without a CUDA device unless
// MAMBARL_REQUIRE_GPU=1.
#define BOOST_TEST_MODULE gpu_learning
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <string>

#include "test/gpu_test_util.hpp"
#include "test/train_util.hpp"

using namespace mambarl;
using namespace mambarl::test;
namespace utf = boost::unit_test;

BOOST_AUTO_TEST_SUITE(gpu_learning, *utf::precondition(gpu_or_required))

BOOST_AUTO_TEST_CASE(cartpole_mamba1_on_cuda_solves_cartpole) {
  require_gpu();
  const auto dir = out_dir("cuda_cartpole_mamba1");
  std::string log;
  const TrainSummary s = train("cartpole_mamba1", dir, {"runtime.device=cuda"}, false, &log);
  BOOST_TEST_MESSAGE("cartpole mamba1 on cuda: mean return " << s.mean_return << " after " << s.env_steps
                                                             << " steps, " << s.wall_s << " s");
  BOOST_TEST(log.find(", device cuda, dtype float32,") != std::string::npos);
  BOOST_CHECK_MESSAGE(s.mean_return >= 475.0,
                      "CartPole-v1 with mamba1 on cuda: mean return " << s.mean_return << " < 475");
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

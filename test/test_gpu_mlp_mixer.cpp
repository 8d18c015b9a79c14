// GpuMlpMixer against MlpMixer<float> through the shared GPU mixer harness
// (test/gpu_mixer_harness.hpp). The MLP ignores resets and carries no state;
// the cases still draw them, so the harness's every-path checks apply.
#define BOOST_TEST_MODULE gpu_mlp_mixer
#include <boost/test/unit_test.hpp>

#include "policy/gpu_mlp_mixer.hpp"
#include "test/gpu_mixer_harness.hpp"
#include "test/gpu_test_util.hpp"

using namespace mambarl;

namespace {

const test::GpuMixerCase kCases[] = {
    {"mlp d32", "{type: mlp, d_model: 32}", 8, 4, 0.15},
    {"mlp d24 expand 3", "{type: mlp, d_model: 24, expand: 3}", 5, 7, 0.2},
    {"mlp T=1", "{type: mlp, d_model: 16}", 1, 9, 0.1},
    {"mlp B=1", "{type: mlp, d_model: 40, expand: 1}", 17, 1, 0.1},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_mlp_mixer, *boost::unit_test::precondition(test::gpu_or_required))

BOOST_AUTO_TEST_CASE(matches_cpu_mixer) {
  test::require_gpu();
  for (const auto& c : kCases) test::check_gpu_mixer_parity(c, make_gpu_mixer);
}

BOOST_AUTO_TEST_SUITE_END()

// GpuGruMixer against GruMixer<float> through the shared GPU mixer harness
// (test/gpu_mixer_harness.hpp): Y, dU and all four parameter gradients, with
// episode starts inside the chunk and at t = 0, from a random initial state.
#define BOOST_TEST_MODULE gpu_gru_mixer
#include <boost/test/unit_test.hpp>

#include "policy/gpu_gru_mixer.hpp"
#include "test/gpu_mixer_harness.hpp"
#include "test/gpu_test_util.hpp"

using namespace mambarl;

namespace {

// d_model 160 is more channels than one 128-thread block; B = 1 and T = 1
// are the edge shapes of the per-step GEMMs and of the reverse sweep.
const test::GpuMixerCase kCases[] = {
    {"gru d32", "{type: gru, d_model: 32}", 12, 6, 0.15},
    {"gru d160 many starts", "{type: gru, d_model: 160}", 6, 5, 0.4},
    {"gru T=1", "{type: gru, d_model: 16}", 1, 9, 0.3},
    {"gru B=1", "{type: gru, d_model: 24}", 33, 1, 0.1},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_gru_mixer, *boost::unit_test::precondition(test::gpu_or_required))

BOOST_AUTO_TEST_CASE(matches_cpu_mixer) {
  test::require_gpu();
  for (const auto& c : kCases) test::check_gpu_mixer_parity(c, make_gpu_mixer);
}

BOOST_AUTO_TEST_SUITE_END()

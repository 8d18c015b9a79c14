// GpuMamba1Mixer against its CPU twin Mamba1Mixer<float>: Y, dU and every
// layer gradient over chunks with episode starts inside and a random initial
// state, plus graph replay == eager bit for bit (test/gpu_mixer_harness.hpp);
// the scan's recompute in segments against the stored path bit for bit.
// The parity cases skip without a CUDA device unless MAMBARL_REQUIRE_GPU=1;
// the layout refusals need no device.
#define BOOST_TEST_MODULE gpu_mamba1_mixer
#include <boost/test/unit_test.hpp>

#include <memory>
#include <vector>

#include "policy/gpu_mamba1_mixer.hpp"
#include "policy/policy_config.hpp"
#include "test/gpu_mixer_harness.hpp"
#include "test/gpu_test_util.hpp"

using namespace mambarl;
using mambarl::test::GpuMixerCase;
using mambarl::test::gpu_or_required;
using mambarl::test::require_gpu;
namespace utf = boost::unit_test;

namespace {

// GpuMamba1Mixers whose scan keeps H every segment_len steps (0: the
// default, the longest the backward's shared memory holds).
mambarl::test::GpuMixerMaker mamba1_with_segment(int segment_len) {
  return mambarl::test::gpu_mixer_maker<GpuMamba1Mixer, Mamba1Mixer<float>>(segment_len);
}

// Segments of 3 steps put segment edges inside every case's chunk (the
// default segment holds some chunks whole), so resets fall inside segments,
// on their first step and on their last.
constexpr int kShortSegment = 3;

// What each case reaches in the kernels:
//   d_state 16 / 5 / 33: the register bounds NB = 16, 8, 64 (N < NB leaves padding lanes);
//   E = 64 / 36 / 160: whole warps, a part-filled warp, and a second block of
//     channels whose last warps lie wholly past E (the [dB dC] partials);
//   d_conv 1..4 and 8: no window, every window length, the longest;
//   dt_rank default (ceil(D/16)) and explicit; starts none, sparse, dense;
//   T = 1 (only the initial state), B = 1 (a single env).
const std::vector<GpuMixerCase>& cases() {
  static const std::vector<GpuMixerCase> c = {
      {"N16 K4", "{type: mamba1, d_model: 32, d_state: 16, d_conv: 4}", 16, 8, 0.15},
      {"N5 K3 expand3", "{type: mamba1, d_model: 12, d_state: 5, d_conv: 3, expand: 3}", 9, 5, 0.2},
      {"N8 K1", "{type: mamba1, d_model: 16, d_state: 8, d_conv: 1}", 12, 4, 0.15},
      {"N4 K2 dt_rank3", "{type: mamba1, d_model: 16, d_state: 4, d_conv: 2, dt_rank: 3}", 10, 6, 0.15},
      {"N33 K8 E160", "{type: mamba1, d_model: 80, d_state: 33, d_conv: 8}", 11, 3, 0.1},
      {"no starts", "{type: mamba1, d_model: 32, d_state: 16, d_conv: 4}", 8, 4, 0.0},
      {"dense starts", "{type: mamba1, d_model: 32, d_state: 12, d_conv: 4}", 8, 4, 0.5},
      {"T1", "{type: mamba1, d_model: 32, d_state: 16, d_conv: 4}", 1, 6, 0.2},
      {"B1", "{type: mamba1, d_model: 32, d_state: 16, d_conv: 3}", 20, 1, 0.1},
  };
  return c;
}

// The learner's bench shape: sums over 16384 tokens. A case of its own, so
// compute-sanitizer's racecheck, which this shape slows past minutes, can run
// the small cases alone (tools/gpu_check.sh).
const std::vector<GpuMixerCase>& bench_case() {
  static const std::vector<GpuMixerCase> c = {
      {"bench T64 B256 D128", "{type: mamba1, d_model: 128, d_state: 16, d_conv: 4}", 64, 256, 0.02},
  };
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_mamba1_mixer, *utf::precondition(gpu_or_required))

BOOST_AUTO_TEST_CASE(matches_cpu_mixer_and_the_stored_path) {
  require_gpu();
  mambarl::test::check_gpu_scan_segments(cases(), mamba1_with_segment, {0, kShortSegment});
}

BOOST_AUTO_TEST_CASE(matches_cpu_mixer_and_the_stored_path_at_the_bench_shape) {
  require_gpu();
  mambarl::test::check_gpu_scan_segments(bench_case(), mamba1_with_segment, {0, kShortSegment});
}

BOOST_AUTO_TEST_SUITE_END()

// The constructor reads only the layout, so these run everywhere.
BOOST_AUTO_TEST_CASE(refuses_a_layout_that_does_not_match) {
  const PolicyConfig cfg = PolicyConfig::from_yaml(
      ConfigNode(YAML::Load("{type: mamba1, d_model: 16, n_layers: 1, d_state: 4}"), "test.yaml", "policy"));
  const auto model = make_actor_critic<float>(cfg, 3, HeadSpec{true, 2});
  const auto& m1 = dynamic_cast<const Mamba1Mixer<float>&>(model->mixer(0));
  BOOST_CHECK_NO_THROW(GpuMamba1Mixer(m1, model->layout(), 0));
  // Layer 1 does not exist: its parameter names are missing.
  BOOST_CHECK_EXCEPTION(GpuMamba1Mixer(m1, model->layout(), 1), Error, [](const Error& e) {
    return std::string(e.what()).find("layers.1.mixer.in_proj.weight") != std::string::npos;
  });
  // A mixer whose config implies other shapes than the model's parameters.
  Mamba1Config other = m1.config();
  other.d_state = 8;
  ParamLayout scratch;
  const Mamba1Mixer<float> wider(other, scratch, "layers.0.mixer.");
  BOOST_CHECK_EXCEPTION(GpuMamba1Mixer(wider, model->layout(), 0), Error, [](const Error& e) {
    return std::string(e.what()).find("does not have the shape") != std::string::npos;
  });
}

// The segment length: the default recomputes (more than one step per
// segment); lengths the backward's shared memory cannot hold are refused.
BOOST_AUTO_TEST_CASE(segment_len_defaults_to_a_recompute_and_refuses_out_of_range) {
  const PolicyConfig cfg = PolicyConfig::from_yaml(
      ConfigNode(YAML::Load("{type: mamba1, d_model: 64, n_layers: 1, d_state: 16}"), "test.yaml", "policy"));
  const auto model = make_actor_critic<float>(cfg, 3, HeadSpec{true, 2});
  const auto& m1 = dynamic_cast<const Mamba1Mixer<float>&>(model->mixer(0));
  const int longest = GpuMamba1Mixer(m1, model->layout(), 0).segment_len();
  BOOST_TEST(longest > 1);
  BOOST_TEST(GpuMamba1Mixer(m1, model->layout(), 0, 1).segment_len() == 1);
  for (const int bad : {-1, longest + 1})
    BOOST_CHECK_EXCEPTION(GpuMamba1Mixer(m1, model->layout(), 0, bad), Error, [&](const Error& e) {
      return std::string(e.what()).find("segment_len " + std::to_string(bad)) != std::string::npos;
    });
}

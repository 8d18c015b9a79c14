// GpuMamba3Mixer against Mamba3Mixer<float> on one chunk: Y, dU and every
// gradient of the layer, with episode starts inside the chunk and a random
// initial state, then graph replay == eager bit for bit
// (test/gpu_mixer_harness.hpp); the scan's rebuild in segments against the
// stored path bit for bit. Without a CUDA device the parity suite is
// skipped unless MAMBARL_REQUIRE_GPU=1; the refusal suite needs no device.
#define BOOST_TEST_MODULE gpu_mamba3_mixer
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <vector>

#include "policy/gpu_mamba3_mixer.hpp"
#include "policy/policy_config.hpp"
#include "test/gpu_mixer_harness.hpp"
#include "test/gpu_test_util.hpp"

using namespace mambarl;
using mambarl::test::GpuMixerCase;
using mambarl::test::gpu_or_required;
using mambarl::test::require_gpu;

namespace {

// GpuMamba3Mixers whose scan keeps S every segment_len steps (0: the
// default, the longest the backward's shared memory holds).
mambarl::test::GpuMixerMaker mamba3_with_segment(int segment_len) {
  return mambarl::test::gpu_mixer_maker<GpuMamba3Mixer, Mamba3Mixer<float>>(segment_len);
}

// Segments of 2 steps (the longest N64 P64 allows) put an edge beside every
// step; the default segment (8 steps at N16 P16) holds starts inside it.
constexpr int kShortSegment = 2;

// Every code path of the chunk kernels: the three register widths of a row
// of S (N <= 16, 32, 64), d_state divisible by 4 and not, headdim a power of
// two and not (the backward's per-head sums), the backward's heads per block
// limited by threads and by shared memory (N 64, P 64), groups, rope 0.5 and
// 1.0, the gated output norm, T = 1, B = 1, no starts at all (the initial
// state carried through the whole chunk) and starts inside it.
const std::vector<GpuMixerCase>& cases() {
  static const std::vector<GpuMixerCase> c = {
      {"default N16 P16", "{type: mamba3, d_model: 32, d_state: 16, headdim: 16}", 16, 8, 0.15},
      {"T1", "{type: mamba3, d_model: 32, d_state: 16, headdim: 16}", 1, 6, 0.3},
      {"B1", "{type: mamba3, d_model: 32, d_state: 16, headdim: 16}", 24, 1, 0.1},
      {"no starts", "{type: mamba3, d_model: 32, d_state: 16, headdim: 16}", 12, 4, 0.0},
      {"N7 odd P8", "{type: mamba3, d_model: 16, d_state: 7, headdim: 8}", 10, 4, 0.2},
      {"N6 P4 groups2 rope1 outnorm",
       "{type: mamba3, d_model: 12, d_state: 6, headdim: 4, ngroups: 2, rope_fraction: 1.0, "
       "is_outproj_norm: true}",
       10, 5, 0.15},
      {"N10 P12 groups2 rope1",
       "{type: mamba3, d_model: 24, d_state: 10, headdim: 12, ngroups: 2, rope_fraction: 1.0}", 9, 3,
       0.2},
      {"N32 P8 groups4 outnorm",
       "{type: mamba3, d_model: 32, d_state: 32, headdim: 8, ngroups: 4, is_outproj_norm: true}", 8, 4,
       0.15},
      {"N48 P32", "{type: mamba3, d_model: 32, d_state: 48, headdim: 32}", 6, 3, 0.2},
      {"N64 P64 expand1", "{type: mamba3, d_model: 64, d_state: 64, headdim: 64, expand: 1}", 5, 3, 0.2},
      {"wide T32 B16", "{type: mamba3, d_model: 64, d_state: 16, headdim: 16}", 32, 16, 0.1},
  };
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(parity, *boost::unit_test::precondition(gpu_or_required))

BOOST_AUTO_TEST_CASE(matches_cpu_mixer_and_the_stored_path) {
  require_gpu();
  mambarl::test::check_gpu_scan_segments(cases(), mamba3_with_segment, {0, kShortSegment});
}

// The default recomputes (more than one step per segment); a length the
// backward's shared memory cannot hold is refused by name.
BOOST_AUTO_TEST_CASE(segment_len_defaults_to_a_recompute_and_refuses_out_of_range) {
  require_gpu();
  const PolicyConfig cfg = PolicyConfig::from_yaml(ConfigNode(
      YAML::Load("{type: mamba3, d_model: 64, d_state: 16, headdim: 16}"), "test.yaml", "policy"));
  const auto model = make_actor_critic<float>(cfg, 3, HeadSpec{true, 2});
  const auto& m3 = dynamic_cast<const Mamba3Mixer<float>&>(model->mixer(0));
  const int longest = GpuMamba3Mixer(m3, model->layout(), 0).segment_len();
  BOOST_TEST(longest > 1);
  for (const int bad : {-1, longest + 1})
    BOOST_CHECK_EXCEPTION(GpuMamba3Mixer(m3, model->layout(), 0, bad), Error, [&](const Error& e) {
      return std::string(e.what()).find("segment_len " + std::to_string(bad)) != std::string::npos;
    });
}

BOOST_AUTO_TEST_SUITE_END()

// Shapes the chunk kernels cannot hold are refused by name before any device
// work (so this runs without a GPU too).
BOOST_AUTO_TEST_CASE(refuses_too_large_d_state) {
  const PolicyConfig cfg = PolicyConfig::from_yaml(ConfigNode(
      YAML::Load("{type: mamba3, d_model: 16, d_state: 80, headdim: 8}"), "test.yaml", "policy"));
  const auto model = make_actor_critic<float>(cfg, 3, HeadSpec{true, 2});
  BOOST_CHECK_EXCEPTION(mamba3_with_segment(0)(model->mixer(0), model->layout(), 0), Error, [](const Error& e) {
    return std::string(e.what()).find("d_state 80") != std::string::npos;
  });
}

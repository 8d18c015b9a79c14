// The GPU actor against the CPU actor, graph replay against eager launches,
// per-env resets, and refusals. Without a CUDA device every case is skipped
// (reported as skipped, exit 0), unless MAMBARL_REQUIRE_GPU=1 makes that a
// failure (the device machine's run sets it).
#define BOOST_TEST_MODULE gpu_actor
#include <boost/test/unit_test.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/cuda_graph.cuh"
#include "kernels/device_buffer.cuh"
#include "policy/cpu_actor.hpp"
#include "policy/distributions.hpp"
#include "policy/gpu_actor.hpp"
#include "policy/policy_config.hpp"
#include "test/gpu_test_util.hpp"
#include "test/test_util.hpp"

using namespace mambarl;
using mambarl::test::gpu_or_required;
using mambarl::test::require_gpu;
namespace utf = boost::unit_test;

namespace {

struct Case {
  const char* name;
  const char* policy_yaml;
  int obs_dim;
  HeadSpec head;
};

// Both vector widths of the state kernels (d_state % 4 == 0 or not), both
// heads, Mamba-3 with groups, full rope and the gated output norm; the GRU
// with d_model above the cell kernel's 128 threads (a channel loop) and an
// odd one, the MLP with expand 3; the episode-start embedding on one case of
// each recurrent type.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"mamba1 N16", "{type: mamba1, d_model: 32, n_layers: 2, d_state: 16, d_conv: 4}", 5, {true, 4}},
      {"mamba1 N5 gaussian start", "{type: mamba1, d_model: 12, n_layers: 2, d_state: 5, d_conv: 3, expand: 3, "
       "start_embedding: true}",
       3, {false, 2}},
      {"mamba3 N16 start", "{type: mamba3, d_model: 32, n_layers: 2, d_state: 16, headdim: 16, start_embedding: true}",
       5, {true, 3}},
      {"mamba3 N6 groups rope1 outnorm",
       "{type: mamba3, d_model: 12, n_layers: 2, d_state: 6, headdim: 4, ngroups: 2, rope_fraction: 1.0, "
       "is_outproj_norm: true}",
       3, {true, 5}},
      {"gru D160", "{type: gru, d_model: 160, n_layers: 2}", 5, {true, 4}},
      {"gru D12 gaussian start", "{type: gru, d_model: 12, n_layers: 2, start_embedding: true}", 3, {false, 3}},
      {"mlp D24 expand 3", "{type: mlp, d_model: 24, n_layers: 2, expand: 3}", 5, {true, 3}},
  };
  return c;
}

PolicyConfig policy_of(const Case& c) {
  return PolicyConfig::from_yaml(ConfigNode(YAML::Load(c.policy_yaml), "test.yaml", "policy"));
}

// Initialised as the learner does, then perturbed so that no parameter sits
// at a special value (norm weights 1, biases 1, a near-uniform policy head).
std::vector<float> random_weights(const ActorCritic<float>& m, uint64_t seed) {
  std::vector<float> w(m.layout().size());
  m.init_params(w.data(), seed);
  Rng rng(seed, 99);
  for (const auto& p : m.layout().params()) {
    const double scale = p.name == "pi.weight" ? 0.5 : 0.05;
    for (size_t i = 0; i < p.numel; ++i) w[p.offset + i] += static_cast<float>(scale * rng.normal());
  }
  return w;
}

struct StepIO {
  int B, obs_dim, act_width;
  std::vector<float> obs, actions, logp, values;  // (B, obs_dim), (B, act_width), (B), (B)
  std::vector<uint8_t> starts;                   // (B)
  StepIO(int b, int o, int aw)
      : B(b), obs_dim(o), act_width(aw), obs(static_cast<size_t>(b) * o),
        actions(static_cast<size_t>(b) * aw), logp(static_cast<size_t>(b)), values(static_cast<size_t>(b)),
        starts(static_cast<size_t>(b)) {}
  void draw(Rng& rng, int t, double p_start) {
    for (auto& v : obs) v = static_cast<float>(rng.normal());
    for (auto& s : starts) s = (t == 0 || rng.uniform() < p_start) ? 1 : 0;
  }
  void act(GpuActor& a) { a.act(obs.data(), starts.data(), actions.data(), logp.data(), values.data()); }
  void act(CpuActor& a) { a.act(obs.data(), starts.data(), actions.data(), logp.data(), values.data()); }
  bool same_bits(const StepIO& o) const {
    return actions == o.actions && std::memcmp(logp.data(), o.logp.data(), logp.size() * 4) == 0 &&
           std::memcmp(values.data(), o.values.data(), values.size() * 4) == 0;
  }
};

Eigen::Map<const Vec<float>> vec(const std::vector<float>& v) {
  return Eigen::Map<const Vec<float>>(v.data(), static_cast<Eigen::Index>(v.size()));
}

constexpr double kTwoPi = 6.283185307179586;

// Mamba-3's angles are kept mod 2π; a value within rounding of the wrap may
// come out near 0 on one side and near 2π on the other with identical cos and
// sin. Returns `gpu` with each angle moved to the representative nearest the CPU's.
std::vector<float> unwrap_angles_like(const ActorCritic<float>& m, int B, std::vector<float> gpu,
                                      const std::vector<float>& cpu) {
  for (int l = 0; l < m.spec().n_layers; ++l) {
    const auto* m3 = dynamic_cast<const Mamba3Mixer<float>*>(&m.mixer(l));
    if (!m3) continue;
    const auto& c = m3->config();
    const size_t H = c.nheads(), P = c.headdim, N = c.d_state, Na = c.num_rope_angles();
    const size_t off = m.layer_state_offset(l) + H * (P * N + N + P);
    for (int b = 0; b < B; ++b)
      for (size_t i = 0; i < H * Na; ++i) {
        const size_t k = static_cast<size_t>(b) * m.state_size() + off + i;
        gpu[k] = cpu[k] + static_cast<float>(std::remainder(gpu[k] - cpu[k], kTwoPi));
      }
  }
  return gpu;
}

// How close the GPU actor must stay to the f32 CPU actor.
struct Tolerance {
  double rel, elem_rtol, elem_atol;  // normwise, then elementwise with a floor
  // A uniform this close to a CDF boundary may fall on either side under the
  // logits' differences; farther away, actions must agree.
  double cdf_margin;
  double min_checked;  // fraction of draws that must be compared (not near a boundary)
  bool check_state;
};

// The f32 bound of plugin/DESIGN.md "Numerics and tolerances". The paths differ only in summation
// order (tiled vs Eigen GEMMs, tree vs serial sums) and in the pre-norm
// weight being folded into in_proj, i.e. rounding at ~1e-6; the elementwise
// floor keeps near-zero entries from dominating.
constexpr Tolerance kF32{1e-4, 1e-3, 1e-4, 1e-4, 0.9, true};
// bf16 weights (8 mantissa bits, relative rounding 2^-9 per weight) through
// L layers of GEMMs and a recurrence over 120 steps: the bound is
// 2e-2 normwise on values and logp. Logits move by ~1e-2 at most, so draws
// within 2e-2 of a CDF boundary are not compared (more of them, hence 0.7).
// The state itself is not bounded by the issue and not compared.
constexpr Tolerance kBf16{2e-2, 5e-2, 2e-2, 2e-2, 0.7, false};

struct ActorPair {
  std::shared_ptr<ActorCritic<float>> model;
  PolicyConfig cfg;
  std::vector<float> weights;
  ActorPair(const Case& c, uint64_t seed) : cfg(policy_of(c)) {
    model = make_actor_critic<float>(cfg, c.obs_dim, c.head);
    weights = random_weights(*model, seed);
  }
  GpuActor gpu(int B, uint64_t seed, bool bf16 = false) const {
    return GpuActor(model, cfg, B, seed, bf16);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_actor, *utf::precondition(gpu_or_required))

namespace {

// T steps of B envs with random obs and random episode starts: values, logp,
// actions (where the draw is not on a CDF boundary), peeked values (every 30th
// step) and (f32) the recurrent state against the f32 CPU actor.
void check_against_cpu_actor(bool bf16, const Tolerance& tol, int B = 37, int T = 120) {
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT("case " << c.name << (bf16 ? " bf16" : " f32")) {
      ActorPair ap(c, 11);
      CpuActor cpu(ap.model, B, 5);
      GpuActor gpu = ap.gpu(B, 5, bf16);
      BOOST_CHECK(gpu.bf16_weights() == bf16);
      cpu.set_weights(ap.weights.data(), ap.weights.size(), 1);
      gpu.set_weights(ap.weights.data(), ap.weights.size(), 1);
      const int aw = c.head.act_width(), A = c.head.action_dim;
      StepIO in_c(B, c.obs_dim, aw), in_g(B, c.obs_dim, aw);
      Rng rng(21, 0);
      auto cache = ap.model->make_cache();
      Mat<float> head;
      Vec<float> ref_values;
      std::vector<float> lp(static_cast<size_t>(A));
      int checked = 0, near_boundary = 0;
      for (int t = 0; t < T; ++t) {
        in_c.draw(rng, t, 0.05);
        in_g.obs = in_c.obs;
        in_g.starts = in_c.starts;
        // The CPU's own logits and uniforms for this step, to know each draw's CDF margin.
        std::vector<float> st(cpu.state().begin(), cpu.state().end());
        const std::vector<Rng> rngs_before = cpu.rngs();
        ap.model->forward(ap.weights.data(), ConstMatMap<float>(in_c.obs.data(), B, c.obs_dim),
                          in_c.starts.data(), 1, B, st.data(), cache, head, ref_values);
        in_c.act(cpu);
        in_g.act(gpu);
        std::vector<float> lp_c = in_c.logp, lp_g = in_g.logp;
        for (int b = 0; b < B && c.head.discrete; ++b) {
          Rng r = rngs_before[static_cast<size_t>(b)];
          const double u = r.uniform();
          Categorical<float>::log_probs(head.data() + static_cast<size_t>(b) * A, A, lp.data());
          double cdf = 0, margin = 1;
          for (int i = 0; i + 1 < A; ++i) {
            cdf += std::exp(static_cast<double>(lp[static_cast<size_t>(i)]));
            margin = std::min(margin, std::abs(u - cdf));
          }
          if (margin > tol.cdf_margin) {
            ++checked;
            BOOST_CHECK_MESSAGE(in_g.actions[b] == in_c.actions[b],
                                "step " << t << " env " << b << ": action " << in_g.actions[b]
                                        << " vs cpu " << in_c.actions[b] << " (margin " << margin << ")");
          } else {
            ++near_boundary;
          }
          if (in_g.actions[b] != in_c.actions[b]) lp_c[b] = lp_g[b] = 0;  // different actions' logp
        }
        MAMBARL_CHECK_CLOSE_REL("step " << t << " values", vec(in_g.values), vec(in_c.values),
                                tol.rel, tol.elem_rtol, tol.elem_atol);
        MAMBARL_CHECK_CLOSE_REL("step " << t << " logp", vec(lp_g), vec(lp_c), tol.rel,
                                tol.elem_rtol, tol.elem_atol);
        if (!c.head.discrete)
          MAMBARL_CHECK_CLOSE_REL("step " << t << " actions", vec(in_g.actions), vec(in_c.actions),
                                  tol.rel, tol.elem_rtol, tol.elem_atol);
        if (t % 30 == 29) {
          std::vector<float> pv_c(static_cast<size_t>(B)), pv_g(static_cast<size_t>(B));
          const std::vector<float> before = gpu.state();
          cpu.peek_values(in_c.obs.data(), pv_c.data());
          gpu.peek_values(in_c.obs.data(), nullptr, pv_g.data());
          MAMBARL_CHECK_CLOSE_REL("step " << t << " peeked values", vec(pv_g), vec(pv_c), tol.rel,
                                  tol.elem_rtol, tol.elem_atol);
          BOOST_CHECK_MESSAGE(gpu.state() == before, "peek_values changed the state");
          // A peek of every third env (the truncated ones, in a rollout): the
          // same values as the full peek for those, bit for bit, the other
          // envs skipped but finite, and the state still untouched.
          std::vector<uint8_t> needed(static_cast<size_t>(B));
          for (int b = 0; b < B; ++b) needed[static_cast<size_t>(b)] = b % 3 == 1;
          std::vector<float> pv_m(static_cast<size_t>(B), NAN);
          gpu.peek_values(in_c.obs.data(), needed.data(), pv_m.data());
          for (size_t b = 0; b < needed.size(); ++b) {
            BOOST_CHECK_MESSAGE(std::isfinite(pv_m[b]),
                                "step " << t << " env " << b << ": masked peek gave " << pv_m[b]);
            if (needed[b])
              BOOST_CHECK_MESSAGE(pv_m[b] == pv_g[b], "step " << t << " env " << b << ": masked peek "
                                                              << pv_m[b] << " vs full peek " << pv_g[b]);
          }
          BOOST_CHECK_MESSAGE(gpu.state() == before, "a masked peek changed the state");
          const std::vector<float> sc(cpu.state().begin(), cpu.state().end());
          if (tol.check_state)
            MAMBARL_CHECK_CLOSE_REL("step " << t << " state",
                                    vec(unwrap_angles_like(*ap.model, B, gpu.state(), sc)), vec(sc),
                                    tol.rel, tol.elem_rtol, tol.elem_atol);
        }
      }
      if (c.head.discrete) {
        BOOST_TEST_MESSAGE(c.name << (bf16 ? " bf16" : " f32") << ": " << checked
                                  << " actions compared, " << near_boundary << " draws within "
                                  << tol.cdf_margin << " of a CDF boundary skipped");
        BOOST_CHECK_GT(checked, tol.min_checked * B * T);
      }
      const std::vector<Rng> rc = cpu.rngs(), rg = gpu.rngs();
      BOOST_CHECK_MESSAGE(std::memcmp(rc.data(), rg.data(), rc.size() * sizeof(Rng)) == 0,
                          "the per-env Rngs advanced differently");
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(matches_cpu_actor) {
  require_gpu();
  check_against_cpu_actor(false, kF32);
}

BOOST_AUTO_TEST_CASE(bf16_weights_match_cpu_actor) {
  require_gpu();
  check_against_cpu_actor(true, kBf16);
}

// The kernels pick their shape by batch: B = 37 above runs the GEMV linear
// path and one env per Mamba-1 pre block; 521 envs (>= 512, not a multiple of
// the 4-env tile, M > 64) run the tiled linear kernel and 4-env pre tiles.
BOOST_AUTO_TEST_CASE(large_batch_matches_cpu_actor) {
  require_gpu();
  check_against_cpu_actor(false, kF32, 521, 30);
  check_against_cpu_actor(true, kBf16, 521, 30);
}

// The graph (plain, and with programmatic dependent launch) replays exactly
// what the eager launches compute, with f32 and with bf16 weights.
BOOST_AUTO_TEST_CASE(graph_replay_equals_eager_bitwise) {
  require_gpu();
  const int B = 19;
  for (const Case& c : cases()) {
    for (const bool bf16 : {false, true}) {
      for (const auto mode : {GpuActor::Launch::graph, GpuActor::Launch::graph_pdl}) {
        BOOST_TEST_CONTEXT("case " << c.name << (bf16 ? " bf16" : " f32")
                                   << (mode == GpuActor::Launch::graph_pdl ? " pdl" : "")) {
          ActorPair ap(c, 3);
          GpuActor graph = ap.gpu(B, 8, bf16), eager = ap.gpu(B, 8, bf16);
          graph.set_launch(mode);
          eager.set_launch(GpuActor::Launch::eager);
          graph.set_weights(ap.weights.data(), ap.weights.size(), 0);
          eager.set_weights(ap.weights.data(), ap.weights.size(), 0);
          StepIO a(B, c.obs_dim, c.head.act_width()), b(B, c.obs_dim, c.head.act_width());
          Rng rng(4, 0);
          for (int t = 0; t < 25; ++t) {
            a.draw(rng, t, 0.1);
            b.obs = a.obs;
            b.starts = a.starts;
            a.act(graph);
            b.act(eager);
            BOOST_CHECK_MESSAGE(a.same_bits(b), "step " << t << ": graph and eager outputs differ");
          }
          std::vector<float> pa(static_cast<size_t>(B)), pb(static_cast<size_t>(B));
          graph.peek_values(a.obs.data(), nullptr, pa.data());
          eager.peek_values(a.obs.data(), nullptr, pb.data());
          BOOST_CHECK_MESSAGE(pa == pb, "graph and eager peeked values differ");
          std::vector<uint8_t> needed(static_cast<size_t>(B));
          for (size_t i = 0; i < needed.size(); ++i) needed[i] = i % 2;
          graph.peek_values(a.obs.data(), needed.data(), pa.data());
          eager.peek_values(a.obs.data(), needed.data(), pb.data());
          BOOST_CHECK_MESSAGE(pa == pb, "graph and eager masked peeks differ");
          BOOST_CHECK_MESSAGE(graph.state() == eager.state(), "graph and eager states differ");
          const std::vector<Rng> ra = graph.rngs(), rb = eager.rngs();
          BOOST_CHECK(std::memcmp(ra.data(), rb.data(), ra.size() * sizeof(Rng)) == 0);
        }
      }
    }
  }
}

// Weights from a device buffer (the learner's refresh path) act exactly as
// the same weights from the host.
BOOST_AUTO_TEST_CASE(device_weights_equal_host_weights) {
  require_gpu();
  const int B = 7;
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT("case " << c.name) {
      ActorPair ap(c, 5);
      GpuActor host = ap.gpu(B, 8), dev = ap.gpu(B, 8);
      host.set_weights(ap.weights.data(), ap.weights.size(), 3);
      DeviceBuffer<float> d(ap.weights.size());
      copy_to_device(d.data(), ap.weights.data(), d.size());
      dev.set_weights_device(d.data(), d.size(), 3);
      BOOST_CHECK_EQUAL(dev.weights_version(), 3);
      StepIO a(B, c.obs_dim, c.head.act_width()), b(B, c.obs_dim, c.head.act_width());
      Rng rng(6, 0);
      for (int t = 0; t < 5; ++t) {
        a.draw(rng, t, 0.1);
        b.obs = a.obs;
        b.starts = a.starts;
        a.act(host);
        b.act(dev);
        BOOST_CHECK_MESSAGE(a.same_bits(b), "step " << t << ": device-set weights act differently");
      }
    }
  }
}

// reset(mask) zeroes one env's state and nothing else; an episode_start flag
// touches only its env too, and equals reset() followed by a plain step (with
// the start embedding on: by a flagged step, since the embedding belongs to
// an episode's first step and reset() only clears the state).
BOOST_AUTO_TEST_CASE(reset_of_one_env_leaves_the_others_untouched) {
  require_gpu();
  const int B = 9, victim = 3;
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT("case " << c.name) {
      ActorPair ap(c, 5);
      if (ap.model->state_size() == 0) continue;  // the MLP: no state to reset
      GpuActor flagged = ap.gpu(B, 1), plain = ap.gpu(B, 1), masked = ap.gpu(B, 1);
      for (GpuActor* g : {&flagged, &plain, &masked}) g->set_weights(ap.weights.data(), ap.weights.size(), 0);
      StepIO io(B, c.obs_dim, c.head.act_width());
      Rng rng(6, 0);
      for (int t = 0; t < 8; ++t) {
        io.draw(rng, t, 0.0);
        for (GpuActor* g : {&flagged, &plain, &masked}) io.act(*g);
      }
      const size_t S = flagged.state_size();
      const std::vector<float> before = masked.state();
      std::vector<uint8_t> mask(static_cast<size_t>(B), 0);
      mask[victim] = 1;
      masked.reset(mask.data());
      const std::vector<float> after = masked.state();
      for (int b = 0; b < B; ++b) {
        const float* r0 = before.data() + b * S;
        const float* r1 = after.data() + b * S;
        if (b == victim) {
          bool zero = true;
          for (size_t i = 0; i < S; ++i) zero = zero && r1[i] == 0.f;
          BOOST_CHECK_MESSAGE(zero, "reset did not zero env " << b);
          BOOST_CHECK_MESSAGE(std::memcmp(r0, r1, S * 4) != 0, "env " << b << " was already zero");
        } else {
          BOOST_CHECK_MESSAGE(std::memcmp(r0, r1, S * 4) == 0, "reset of env " << victim
                                                                << " changed env " << b);
        }
      }

      io.draw(rng, 1, 0.0);
      StepIO fl = io, pl = io, ms = io;
      fl.starts[victim] = 1;
      if (ap.model->spec().start_embedding) ms.starts[victim] = 1;
      fl.act(flagged);
      pl.act(plain);
      ms.act(masked);
      BOOST_CHECK_MESSAGE(fl.same_bits(ms), "an episode_start flag differs from reset() + a step");
      BOOST_CHECK_MESSAGE(flagged.state() == masked.state(), "flag and reset() give different states");
      const std::vector<float> sf = flagged.state(), sp = plain.state();
      const int aw = c.head.act_width();
      for (int b = 0; b < B; ++b) {
        if (b == victim) continue;
        BOOST_CHECK_MESSAGE(std::memcmp(sf.data() + b * S, sp.data() + b * S, S * 4) == 0,
                            "env " << victim << "'s episode start changed env " << b << "'s state");
        BOOST_CHECK_MESSAGE(fl.values[b] == pl.values[b] && fl.logp[b] == pl.logp[b] &&
                                std::memcmp(&fl.actions[b * aw], &pl.actions[b * aw], aw * 4) == 0,
                            "env " << victim << "'s episode start changed env " << b << "'s outputs");
      }
      BOOST_CHECK_MESSAGE(std::memcmp(sf.data() + victim * S, sp.data() + victim * S, S * 4) != 0,
                          "the episode start did not change env " << victim);
    }
  }
}

namespace {
bool message_has(const Error& e, const char* what) {
  const bool ok = std::string(e.what()).find(what) != std::string::npos;
  if (!ok) BOOST_TEST_MESSAGE("unexpected message: " << e.what());
  return ok;
}
}  // namespace

// Wrong sizes and a mismatched config are refused with a message, not a crash.
BOOST_AUTO_TEST_CASE(refuses_wrong_shapes) {
  require_gpu();
  ActorPair ap(cases()[0], 1);
  BOOST_CHECK_EXCEPTION(ap.gpu(0, 1), Error, [](const Error& e) { return message_has(e, "num_envs"); });
  PolicyConfig other = ap.cfg;
  other.type = "mamba3";
  BOOST_CHECK_EXCEPTION(GpuActor(ap.model, other, 2, 1), Error,
                        [](const Error& e) { return message_has(e, "policy config says"); });
  GpuActor g = ap.gpu(4, 1);
  BOOST_CHECK_EXCEPTION(g.set_weights(ap.weights.data(), ap.weights.size() - 1, 0), Error,
                        [](const Error& e) { return message_has(e, "weights have"); });
  const std::vector<float> s(g.state_size() * 3);
  BOOST_CHECK_EXCEPTION(g.set_state(s.data(), s.size()), Error,
                        [](const Error& e) { return message_has(e, "num_envs 4"); });
  const std::vector<Rng> r(5);
  BOOST_CHECK_EXCEPTION(g.set_rngs(r.data(), r.size()), Error,
                        [](const Error& e) { return message_has(e, "5 Rngs"); });
}

// A graph refuses to replay once a buffer it captured was reallocated, or the
// batch it was captured for changed.
BOOST_AUTO_TEST_CASE(graph_refuses_changed_buffers) {
  require_gpu();
  cudaStream_t stream = nullptr;
  MAMBARL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    DeviceBuffer<float> buf(64);
    int batch = 4;
    CudaGraph g("test graph");
    const auto record = [&](cudaStream_t s) {
      MAMBARL_CUDA_CHECK(cudaMemsetAsync(buf.data(), 0, buf.bytes(), s));
    };
    g.capture(stream, {GraphBinding::buffer("buf", buf), GraphBinding::value("batch", batch)}, record);
    g.launch(stream);
    MAMBARL_CUDA_CHECK(cudaStreamSynchronize(stream));
    batch = 5;
    BOOST_CHECK_EXCEPTION(g.launch(stream), Error,
                          [](const Error& e) { return message_has(e, "captured for batch 4, now 5"); });
    batch = 4;
    buf = DeviceBuffer<float>(128);
    BOOST_CHECK_EXCEPTION(g.launch(stream), Error,
                          [](const Error& e) { return message_has(e, "reallocated"); });
    CudaGraph never("never captured");
    BOOST_CHECK_EXCEPTION(never.launch(stream), Error,
                          [](const Error& e) { return message_has(e, "never captured"); });
  }
  MAMBARL_CUDA_CHECK(cudaStreamDestroy(stream));
}

BOOST_AUTO_TEST_SUITE_END()

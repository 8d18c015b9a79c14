// Mamba-1 mixer: config validation, parameter registration and init, the
// generic mixer checks (finite differences, step == chunk, resets), float vs
// double, and an independent token-by-token re-implementation of policy/MATH.md.
#define BOOST_TEST_MODULE mamba1
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "policy/mamba1.hpp"
#include "policy/ops.hpp"
#include "test/mixer_harness.hpp"

using namespace mambarl;
using namespace mambarl::test;

namespace {

// The tiny shape of the generic checks: E = 8, R = 2, N = 3.
Mamba1Config tiny_config(int d_conv) {
  Mamba1Config cfg;
  cfg.d_model = 4;
  cfg.d_state = 3;
  cfg.d_conv = d_conv;
  cfg.expand = 2;
  cfg.dt_rank = 2;
  return cfg;
}

// (T*B) flags for B = 3: env 0 restarts twice inside the chunk (t = 2 and
// t = 5, 3 steps apart so the conv window of t = 5 would reach t = 2..4),
// env 1 starts at t = 0 (its initial state must be ignored), env 2 carries
// its initial state (H and window) through the whole chunk.
std::vector<uint8_t> tiny_starts(int T) {
  const int B = 3;
  std::vector<uint8_t> s(static_cast<size_t>(T) * B, 0);
  for (int t : {2, 5})
    if (t < T) s[static_cast<size_t>(t) * B + 0] = 1;
  s[1] = 1;
  return s;
}

// Checks the message names the field, as the brief's "mamba1.d_state must be ...".
void expect_invalid(const Mamba1Config& cfg, const std::string& field) {
  BOOST_CHECK_EXCEPTION(cfg.validate(), Error, [&](const Error& e) {
    const bool ok = std::string(e.what()).find("mamba1." + field) != std::string::npos;
    if (!ok) BOOST_TEST_MESSAGE("message does not name mamba1." << field << ": " << e.what());
    return ok;
  });
}

// A final state that must not depend on env b's past: with a reset at t0,
// scrambling U[t < t0, b] and env b's initial state leaves every env's final
// state unchanged (the harness checks Y and the gradient, not the state).
void check_final_state_forgets_past(const Mixer<double>& mixer, const ParamLayout& layout,
                                    MixerProblem p, int b, int t0) {
  for (int t = 0; t < p.T; ++t) p.starts[static_cast<size_t>(t) * p.B + b] = (t == t0);
  ParamView<double> P(layout, p.params.data());
  const size_t ss = mixer.state_size();
  auto final_state = [&](const Mat<double>& U, std::vector<double> st) {
    Mat<double> Y;
    auto c = mixer.make_cache();
    mixer.forward(P, U, p.starts.data(), p.T, p.B, st.data(), ss, Y, *c);
    return st;
  };
  Mat<double> U_alt = p.U;
  std::vector<double> s_alt = p.state0;
  Rng rng(5, 3);
  for (int t = 0; t < t0; ++t)
    for (int d = 0; d < p.D; ++d) U_alt(t * p.B + b, d) += rng.normal();
  for (size_t i = 0; i < ss; ++i) s_alt[b * ss + i] += rng.normal();
  const std::vector<double> ref = final_state(p.U, p.state0), alt = final_state(U_alt, s_alt);
  BOOST_CHECK_MESSAGE(ref == alt, "final state remembers env " << b << "'s past across the reset at t="
                                                               << t0);
}

// ---------------------------------------------------------------------------
// An independent re-implementation, written from policy/MATH.md token by token with
// scalar loops and the state-based form of the conv (a window of the last
// d_conv-1 x values, shifted each step, zeroed with H at a start), whereas
// the mixer indexes x rows of the chunk. Parameters are looked up by name.
struct NaiveResult {
  Mat<double> Y;               // (T*B, D)
  std::vector<double> state;   // (B, state_size)
};

NaiveResult naive_mamba1(const Mamba1Config& cfg, const ParamLayout& layout,
                         const std::vector<double>& params, const std::string& prefix,
                         const MixerProblem& p) {
  const int D = cfg.d_model, E = cfg.d_inner(), N = cfg.d_state, K = cfg.d_conv,
            R = cfg.resolved_dt_rank();
  auto param = [&](const std::string& name) {
    const ParamId id = layout.find(prefix + name);
    BOOST_REQUIRE_MESSAGE(id >= 0, "no parameter " << prefix + name);
    return params.data() + layout[id].offset;
  };
  const double *w_in = param("in_proj.weight"), *w_c = param("conv1d.weight"),
               *b_c = param("conv1d.bias"), *w_x = param("x_proj.weight"),
               *w_dt = param("dt_proj.weight"), *b_dt = param("dt_proj.bias"),
               *a_log = param("A_log"), *d_skip = param("D"), *w_out = param("out_proj.weight");
  const size_t ss = static_cast<size_t>(E) * (N + K - 1);
  NaiveResult res;
  res.Y.resize(p.T * p.B, D);
  res.state = p.state0;
  std::vector<double> xz(2 * E), xc(E), dbc(R + 2 * N), g(E);
  for (int b = 0; b < p.B; ++b) {
    double* h = res.state.data() + b * ss;  // H[e][n] at h[e*N + n]
    double* win = h + E * N;                // window[j][e], j = 0 oldest
    for (int t = 0; t < p.T; ++t) {
      const int row = t * p.B + b;
      if (p.starts[row])
        for (size_t i = 0; i < ss; ++i) h[i] = 0;
      for (int i = 0; i < 2 * E; ++i) {
        xz[i] = 0;
        for (int d = 0; d < D; ++d) xz[i] += w_in[i * D + d] * p.U(row, d);
      }
      for (int e = 0; e < E; ++e) {
        // taps k = 0..K-2 read the window (oldest first), tap K-1 reads x_t
        double pre = b_c[e];
        for (int k = 0; k < K; ++k) pre += w_c[e * K + k] * (k < K - 1 ? win[k * E + e] : xz[e]);
        xc[e] = silu(pre);
      }
      for (int j = 0; j + 1 < K - 1; ++j)
        for (int e = 0; e < E; ++e) win[j * E + e] = win[(j + 1) * E + e];
      if (K > 1)
        for (int e = 0; e < E; ++e) win[(K - 2) * E + e] = xz[e];
      for (int i = 0; i < R + 2 * N; ++i) {
        dbc[i] = 0;
        for (int e = 0; e < E; ++e) dbc[i] += w_x[i * E + e] * xc[e];
      }
      for (int e = 0; e < E; ++e) {
        double v = b_dt[e];
        for (int r = 0; r < R; ++r) v += w_dt[e * R + r] * dbc[r];
        const double delta = std::log1p(std::exp(v));
        double y = d_skip[e] * xc[e];
        for (int n = 0; n < N; ++n) {
          const double a = -std::exp(a_log[e * N + n]);
          double& hen = h[e * N + n];
          hen = std::exp(delta * a) * hen + delta * xc[e] * dbc[R + n];
          y += hen * dbc[R + N + n];
        }
        const double z = xz[E + e];
        g[e] = y * z / (1 + std::exp(-z));
      }
      for (int d = 0; d < D; ++d) {
        double o = 0;
        for (int e = 0; e < E; ++e) o += w_out[d * E + e] * g[e];
        res.Y(row, d) = o;
      }
    }
  }
  return res;
}

}  // namespace

// ---------------------------------------------------------------------------
BOOST_AUTO_TEST_CASE(config_validation_names_the_field) {
  Mamba1Config good;
  good.d_model = 8;
  BOOST_CHECK_NO_THROW(good.validate());
  auto bad = [&](auto mutate, const std::string& field) {
    Mamba1Config c = good;
    mutate(c);
    expect_invalid(c, field);
  };
  bad([](Mamba1Config& c) { c.d_model = 0; }, "d_model");
  bad([](Mamba1Config& c) { c.d_state = 0; }, "d_state");
  bad([](Mamba1Config& c) { c.d_state = 257; }, "d_state");
  bad([](Mamba1Config& c) { c.d_conv = 0; }, "d_conv");
  bad([](Mamba1Config& c) { c.d_conv = 9; }, "d_conv");
  bad([](Mamba1Config& c) { c.expand = 0; }, "expand");
  bad([](Mamba1Config& c) { c.expand = 9; }, "expand");
  bad([](Mamba1Config& c) { c.dt_rank = -1; }, "dt_rank");
  bad([](Mamba1Config& c) { c.dt_rank = 17; }, "dt_rank");  // > d_inner = 16
  bad([](Mamba1Config& c) { c.dt_min = 0; }, "dt_min");
  bad([](Mamba1Config& c) { c.dt_min = NAN; }, "dt_min");
  bad([](Mamba1Config& c) { c.dt_max = 1e-4; }, "dt_max");  // < dt_min
  bad([](Mamba1Config& c) { c.dt_max = INFINITY; }, "dt_max");
  bad([](Mamba1Config& c) { c.dt_init_floor = -1e-4; }, "dt_init_floor");
  bad([](Mamba1Config& c) { c.out_proj_init_scale = 0; }, "out_proj_init_scale");

  // The constructor validates too.
  Mamba1Config c = good;
  c.d_state = 0;
  ParamLayout layout;
  BOOST_CHECK_THROW(Mamba1Mixer<double>(c, layout, "m."), Error);

  // dt_rank 0 resolves to ceil(D / 16), as mamba_ssm's "auto".
  c = good;
  c.d_model = 128;
  BOOST_TEST(c.resolved_dt_rank() == 8);
  c.d_model = 17;
  BOOST_TEST(c.resolved_dt_rank() == 2);
  c.dt_rank = 5;
  BOOST_TEST(c.resolved_dt_rank() == 5);
  BOOST_TEST(c.d_inner() == 34);
}

BOOST_AUTO_TEST_CASE(parameters_are_registered_and_initialised_as_mamba_ssm) {
  Mamba1Config cfg;
  cfg.d_model = 20;  // E = 40, R = ceil(20/16) = 2
  cfg.d_state = 5;
  cfg.d_conv = 3;
  cfg.out_proj_init_scale = 0.5;
  const int D = 20, E = 40, N = 5, K = 3, R = 2;
  ParamLayout layout;
  layout.add("before", {3}, true);  // the mixer must use its own slices, not offset 0
  Mamba1Mixer<double> mixer(cfg, layout, "layers.1.mixer.");
  BOOST_TEST(mixer.type() == "mamba1");
  BOOST_TEST(mixer.d_model() == D);
  BOOST_TEST(mixer.state_size() == static_cast<size_t>(E * N + (K - 1) * E));

  struct Expect {
    std::string name;
    std::vector<int64_t> shape;
    bool weight_decay;
  };
  const std::vector<Expect> expected = {
      {"in_proj.weight", {2 * E, D}, true},     {"conv1d.weight", {E, K}, true},
      {"conv1d.bias", {E}, false},              {"x_proj.weight", {R + 2 * N, E}, true},
      {"dt_proj.weight", {E, R}, true},         {"dt_proj.bias", {E}, false},
      {"A_log", {E, N}, false},                 {"D", {E}, false},
      {"out_proj.weight", {D, E}, true}};
  BOOST_REQUIRE(layout.params().size() == expected.size() + 1);
  for (size_t i = 0; i < expected.size(); ++i) {
    const ParamInfo& info = layout.params()[i + 1];
    BOOST_TEST(info.name == "layers.1.mixer." + expected[i].name);
    BOOST_TEST(info.shape == expected[i].shape);
    BOOST_TEST(info.weight_decay == expected[i].weight_decay, info.name);
  }

  std::vector<double> buf(layout.size(), 0.0);
  ParamView<double> P(layout, buf.data());
  Rng rng(3, 0);
  mixer.init_params(P, rng);
  BOOST_TEST(buf[0] == 0.0);  // the neighbour's slice is untouched
  auto vec = [&](const std::string& n) { return P.vec(layout.find("layers.1.mixer." + n)); };

  const MatMap<double> a_log = P.mat(layout.find("layers.1.mixer.A_log"));
  for (int e = 0; e < E; ++e)
    for (int n = 0; n < N; ++n) BOOST_TEST(a_log(e, n) == std::log(n + 1.0));
  BOOST_TEST((vec("D").array() == 1.0).all());

  // softplus(b_dt) is the sampled dt, in [dt_min, dt_max] up to the rounding
  // of the inverse softplus (a few ulp, so 1e-12 relative).
  const auto b_dt = vec("dt_proj.bias");
  double lo = INFINITY, hi = 0;
  for (int e = 0; e < E; ++e) {
    const double dt = softplus(b_dt[e]);
    lo = std::min(lo, dt);
    hi = std::max(hi, dt);
  }
  BOOST_TEST(lo >= cfg.dt_min * (1 - 1e-12));
  BOOST_TEST(hi <= cfg.dt_max * (1 + 1e-12));
  BOOST_TEST(hi / lo > 5.0);  // log-uniform over two decades: not a constant

  // Uniform inits: every value within ±bound and the extremes near it (with
  // 40+ samples a max below 0.8 bound has probability < 0.8^40 ~ 1e-4).
  auto check_uniform = [&](const std::string& n, double bound) {
    const auto v = vec(n);
    const double m = v.cwiseAbs().maxCoeff();
    BOOST_TEST(m <= bound, n << ": max |w| " << m << " > bound " << bound);
    BOOST_TEST(m >= 0.8 * bound, n << ": max |w| " << m << " far below bound " << bound);
  };
  check_uniform("in_proj.weight", 1 / std::sqrt(double(D)));
  check_uniform("conv1d.weight", 1 / std::sqrt(double(K)));  // depthwise: fan_in = d_conv
  check_uniform("conv1d.bias", 1 / std::sqrt(double(K)));
  check_uniform("x_proj.weight", 1 / std::sqrt(double(E)));
  check_uniform("dt_proj.weight", 1 / std::sqrt(double(R)));
  check_uniform("out_proj.weight", 0.5 / std::sqrt(double(E)));
}

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences) {
  for (int d_conv : {4, 3}) {
    BOOST_TEST_CONTEXT("d_conv " << d_conv) {
      ParamLayout layout;
      Mamba1Mixer<double> mixer(tiny_config(d_conv), layout, "layers.0.mixer.");
      const int T = 7, B = 3;
      check_mixer_gradients(mixer, layout, make_problem(mixer, layout, T, B, tiny_starts(T), 11));
    }
  }
}

BOOST_AUTO_TEST_CASE(step_equals_chunk_and_halves_equal_whole) {
  for (int d_conv : {4, 3, 1}) {
    BOOST_TEST_CONTEXT("d_conv " << d_conv) {
      ParamLayout layout;
      Mamba1Mixer<double> mixer(tiny_config(d_conv), layout, "layers.0.mixer.");
      const int T = 7, B = 3;
      check_step_equals_chunk(mixer, layout, make_problem(mixer, layout, T, B, tiny_starts(T), 12));
    }
  }
}

BOOST_AUTO_TEST_CASE(reset_cuts_history) {
  ParamLayout layout;
  Mamba1Mixer<double> mixer(tiny_config(4), layout, "layers.0.mixer.");
  const int T = 7, B = 3;
  const MixerProblem p = make_problem(mixer, layout, T, B, tiny_starts(T), 13);
  // t0 = 3: the conv of t = 3..5 would otherwise reach back to t = 0..2.
  // t0 = 6: fewer than d_conv-1 steps before the end, so the carried window
  // would otherwise hold pre-reset x values.
  for (int t0 : {3, 6})
    for (int b : {0, 2}) {
      BOOST_TEST_CONTEXT("env " << b << ", reset at t=" << t0) {
        check_reset_cuts_history(mixer, layout, p, b, t0);
        check_final_state_forgets_past(mixer, layout, p, b, t0);
      }
    }
}

BOOST_AUTO_TEST_CASE(matches_an_independent_token_by_token_implementation) {
  for (int d_conv : {4, 1})
    for (int T : {9, 2}) {  // T = 2 < d_conv-1: the carried window keeps part of the old one
      BOOST_TEST_CONTEXT("d_conv " << d_conv << ", T " << T) {
        Mamba1Config cfg = tiny_config(d_conv);
        cfg.d_model = 5;  // E = 10: not a multiple of any SIMD width, so tails run too
        cfg.d_state = 4;
        ParamLayout layout;
        Mamba1Mixer<double> mixer(cfg, layout, "layers.2.mixer.");
        const int B = 3;
        const MixerProblem p = make_problem(mixer, layout, T, B, tiny_starts(T), 14);
        std::vector<double> state = p.state0;
        Mat<double> Y;
        auto cache = mixer.make_cache();
        mixer.forward(ParamView<double>(layout, const_cast<double*>(p.params.data())), p.U,
                      p.starts.data(), T, B, state.data(), mixer.state_size(), Y, *cache);
        const NaiveResult ref = naive_mamba1(cfg, layout, p.params, "layers.2.mixer.", p);
        // Same formulas in float64, summed in other orders: agreement to ~1e-15
        // relative; 1e-12 leaves room and still catches any formula slip.
        MAMBARL_CHECK_CLOSE_REL("Y vs naive", Y, ref.Y, 1e-12, 1e-9, 1e-12);
        const ConstVecMap<double> a(state.data(), static_cast<Eigen::Index>(state.size()));
        const ConstVecMap<double> b(ref.state.data(), static_cast<Eigen::Index>(ref.state.size()));
        MAMBARL_CHECK_CLOSE_REL("final state vs naive", a, b, 1e-12, 1e-9, 1e-12);
      }
    }
}

BOOST_AUTO_TEST_CASE(float_matches_double) {
  // A moderate shape whose E = 64 fills whole float SIMD packets, so the float
  // path (its own exp, the vectorised backward loops) is what is compared.
  Mamba1Config cfg;
  cfg.d_model = 32;
  cfg.d_state = 16;
  check_float_matches_double<Mamba1Mixer>(cfg);
}

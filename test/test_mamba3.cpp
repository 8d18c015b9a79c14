// Mamba-3 SISO mixer: config validation, parameter names/shapes/init, the
// generic mixer harness (finite differences, step == chunk, resets), float vs
// double, and an independent scalar re-implementation of policy/MATH.md that catches
// a wrong formula whose gradient is nevertheless consistent.
#define BOOST_TEST_MODULE mamba3
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "policy/mamba3.hpp"
#include "policy/ops.hpp"
#include "test/mixer_harness.hpp"

using namespace mambarl;
using mambarl::test::MixerProblem;

namespace {

const std::string kPrefix = "layers.0.mixer.";
constexpr double kTwoPi = 6.283185307179586476925286766559;

Mamba3Config tiny_config(double rope_fraction, bool outproj_norm) {
  Mamba3Config c;
  c.d_model = 4;
  c.expand = 2;   // E = 8
  c.headdim = 2;  // H = 4
  c.ngroups = 2;
  c.d_state = 4;  // Na = 1 (rope 0.5) or 2 (rope 1.0)
  c.rope_fraction = rope_fraction;
  c.is_outproj_norm = outproj_norm;
  return c;
}

void expect_invalid(const Mamba3Config& c, const std::string& needle) {
  bool threw = false;
  try {
    c.validate();
  } catch (const Error& e) {
    threw = true;
    BOOST_CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos,
                        "error '" << e.what() << "' does not name '" << needle << "'");
  }
  BOOST_CHECK_MESSAGE(threw, "config with a bad " << needle << " was accepted");
}

// (T*B) flags for T=7, B=3: env 0 restarts twice mid-sequence, env 1 starts
// at t=0 (its incoming state must be ignored), env 2 runs on its carried state.
std::vector<uint8_t> harness_starts(int T, int B) {
  std::vector<uint8_t> s(static_cast<size_t>(T) * B, 0);
  s[2 * B + 0] = 1;
  s[5 * B + 0] = 1;
  s[0 * B + 1] = 1;
  return s;
}

// ---------------------------------------------------------------------------
// Independent reference: scalar loops, token by token, straight from policy/MATH.md,
// reading parameters by name. Shares no code with the mixer (not even ops.hpp).
struct NaiveStats {
  int floor_active = 0, floor_inactive = 0, angle_wraps = 0;
};

void naive_forward(const Mamba3Config& cfg, const ParamLayout& layout,
                   const std::vector<double>& prm, const Mat<double>& U,
                   const std::vector<uint8_t>& starts, int T, int B, std::vector<double>& state,
                   Mat<double>& Y, NaiveStats& stats) {
  const int D = cfg.d_model, E = cfg.expand * D, N = cfg.d_state, P = cfg.headdim, H = E / P,
            G = cfg.ngroups, Na = static_cast<int>(N * cfg.rope_fraction) / 2;
  const int R = 2 * E + 2 * G * N + 3 * H + Na;
  const double pi = 3.14159265358979323846, eps = 1e-5;
  const auto par = [&](const std::string& name) {
    const ParamId id = layout.find(kPrefix + name);
    BOOST_REQUIRE_MESSAGE(id >= 0, "missing parameter " << name);
    return prm.data() + layout[id].offset;
  };
  const double *w_in = par("in_proj.weight"), *dt_bias = par("dt_bias"), *b_bias = par("B_bias"),
               *c_bias = par("C_bias"), *b_w = par("B_norm.weight"), *c_w = par("C_norm.weight"),
               *d_skip = par("D"), *w_out = par("out_proj.weight");
  const double* norm_w = cfg.is_outproj_norm ? par("norm.weight") : nullptr;
  const size_t ss = static_cast<size_t>(H) * (P * N + N + P + Na);
  Y.resize(T * B, D);
  std::vector<double> proj(R), bn(G * N), cn(G * N), kt(N), qt(N), y(E);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b) {
      const int row = t * B + b;
      double* s = &state[b * ss];
      double* S = s;                       // [h][p][n]
      double* k_prev = S + H * P * N;      // [h][n]
      double* v_prev = k_prev + H * N;     // [h][p]
      double* phi = v_prev + H * P;        // [h][a]
      if (starts[row])
        for (size_t i = 0; i < ss; ++i) s[i] = 0;
      for (int j = 0; j < R; ++j) {
        proj[j] = 0;
        for (int d = 0; d < D; ++d) proj[j] += w_in[j * D + d] * U(row, d);
      }
      const double *z = &proj[0], *x = &proj[E], *b_raw = &proj[2 * E],
                   *c_raw = &proj[2 * E + G * N], *dd_dt = &proj[2 * E + 2 * G * N],
                   *dd_a = dd_dt + H, *lam_raw = dd_a + H, *theta = lam_raw + H;
      for (int g = 0; g < G; ++g) {
        double mb = 0, mc = 0;
        for (int n = 0; n < N; ++n) {
          mb += b_raw[g * N + n] * b_raw[g * N + n] / N;
          mc += c_raw[g * N + n] * c_raw[g * N + n] / N;
        }
        for (int n = 0; n < N; ++n) {
          bn[g * N + n] = b_raw[g * N + n] * b_w[n] / std::sqrt(mb + eps);
          cn[g * N + n] = c_raw[g * N + n] * c_w[n] / std::sqrt(mc + eps);
        }
      }
      for (int h = 0; h < H; ++h) {
        const int g = h / (H / G);
        const double dt = std::log(1 + std::exp(dd_dt[h] + dt_bias[h]));
        const double v = dd_a[h];
        const double ht = v >= 0 ? 1 + v : 1 / (1 - v);
        const double A = std::min(-ht, -cfg.a_floor);
        (-ht < -cfg.a_floor ? stats.floor_inactive : stats.floor_active)++;
        const double lam = 1 / (1 + std::exp(-lam_raw[h]));
        for (int n = 0; n < N; ++n) {
          kt[n] = bn[g * N + n] + b_bias[h * N + n];
          qt[n] = cn[g * N + n] + c_bias[h * N + n];
        }
        std::vector<double> k = kt, q = qt;
        for (int a = 0; a < Na; ++a) {
          const double raw = phi[h * Na + a] + pi * std::tanh(theta[a]) * dt;
          const double wrapped = std::fmod(std::fmod(raw, 2 * pi) + 2 * pi, 2 * pi);
          if (std::abs(wrapped - raw) > 1.0) stats.angle_wraps++;
          phi[h * Na + a] = wrapped;
          const double co = std::cos(wrapped), si = std::sin(wrapped);
          k[2 * a] = kt[2 * a] * co - kt[2 * a + 1] * si;
          k[2 * a + 1] = kt[2 * a] * si + kt[2 * a + 1] * co;
          q[2 * a] = qt[2 * a] * co - qt[2 * a + 1] * si;
          q[2 * a + 1] = qt[2 * a] * si + qt[2 * a + 1] * co;
        }
        const double alpha = std::exp(A * dt), beta = alpha * dt * (1 - lam), gamma = lam * dt;
        for (int p = 0; p < P; ++p) {
          double acc = 0;
          for (int n = 0; n < N; ++n) {
            double& e = S[(h * P + p) * N + n];
            e = alpha * e + beta * v_prev[h * P + p] * k_prev[h * N + n] +
                gamma * x[h * P + p] * k[n];
            acc += e * q[n];
          }
          y[h * P + p] = acc + d_skip[h] * x[h * P + p];
        }
        for (int n = 0; n < N; ++n) k_prev[h * N + n] = k[n];
        for (int p = 0; p < P; ++p) v_prev[h * P + p] = x[h * P + p];
      }
      std::vector<double> gated(E);
      for (int h = 0; h < H; ++h) {
        double ms = 0;
        for (int p = 0; p < P; ++p) ms += y[h * P + p] * y[h * P + p] / P;
        for (int p = 0; p < P; ++p) {
          const int e = h * P + p;
          const double silu = z[e] / (1 + std::exp(-z[e]));
          gated[e] = norm_w ? y[e] * norm_w[e] / std::sqrt(ms + eps) * silu : y[e] * silu;
        }
      }
      for (int d = 0; d < D; ++d) {
        double acc = 0;
        for (int e = 0; e < E; ++e) acc += w_out[d * E + e] * gated[e];
        Y(row, d) = acc;
      }
    }
}

// The φ part of each env's state, compared as (cos, sin): a value near 0 and
// one near 2π are the same angle.
template <typename S>
Vec<double> angle_features(const Mamba3Mixer<S>& m, const std::vector<S>& state, int B) {
  const auto& c = m.config();
  const int H = c.nheads(), Na = c.num_rope_angles();
  const size_t ss = m.state_size(), off = ss - static_cast<size_t>(H) * Na;
  Vec<double> f(2 * B * H * Na);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < H * Na; ++i) {
      const double v = static_cast<double>(state[b * ss + off + i]);
      f[2 * (b * H * Na + i)] = std::cos(v);
      f[2 * (b * H * Na + i) + 1] = std::sin(v);
    }
  return f;
}

template <typename S>
Vec<double> non_angle_state(const Mamba3Mixer<S>& m, const std::vector<S>& state, int B) {
  const auto& c = m.config();
  const size_t ss = m.state_size(), na = ss - static_cast<size_t>(c.nheads()) * c.num_rope_angles();
  Vec<double> f(B * na);
  for (int b = 0; b < B; ++b)
    for (size_t i = 0; i < na; ++i) f[b * na + i] = static_cast<double>(state[b * ss + i]);
  return f;
}

}  // namespace

// ---------------------------------------------------------------------------
BOOST_AUTO_TEST_CASE(config_validation_names_the_field) {
  Mamba3Config ok;
  ok.d_model = 8;  // E = 16, H = 1
  BOOST_CHECK_NO_THROW(ok.validate());

  Mamba3Config c = ok;
  c.d_model = 0;
  expect_invalid(c, "mamba3.d_model");
  c = ok, c.d_state = 0;
  expect_invalid(c, "mamba3.d_state");
  c = ok, c.d_model = 256, c.headdim = 1;  // 512 heads: more lanes than the kernels hold
  expect_invalid(c, "mamba3.headdim");
  c = ok, c.d_state = 3;  // floor(3 * 0.5) / 2 = 0 rope angles
  expect_invalid(c, "mamba3.d_state");
  c = ok, c.expand = 0;
  expect_invalid(c, "mamba3.expand");
  c = ok, c.headdim = 0;
  expect_invalid(c, "mamba3.headdim");
  c = ok, c.d_model = 12, c.headdim = 16;
  expect_invalid(c, "mamba3.headdim (16) must divide d_inner (24)");
  c = ok, c.ngroups = 0;
  expect_invalid(c, "mamba3.ngroups");
  c = ok, c.headdim = 4, c.ngroups = 3;  // H = 4
  expect_invalid(c, "mamba3.ngroups (3) must divide nheads (4)");
  c = ok, c.rope_fraction = 0.25;
  expect_invalid(c, "mamba3.rope_fraction");
  c = ok, c.a_floor = 0;
  expect_invalid(c, "mamba3.a_floor");
  c = ok, c.a_floor = -1e-4;
  expect_invalid(c, "mamba3.a_floor");
  c = ok, c.dt_min = 0;
  expect_invalid(c, "mamba3.dt_min");
  c = ok, c.dt_max = 1e-4;
  expect_invalid(c, "mamba3.dt_max");
  c = ok, c.dt_init_floor = -1;
  expect_invalid(c, "mamba3.dt_init_floor");
  c = ok, c.out_proj_init_scale = 0;
  expect_invalid(c, "mamba3.out_proj_init_scale");

  // The constructor validates too.
  c = ok, c.headdim = 5;
  ParamLayout layout;
  BOOST_CHECK_THROW(Mamba3Mixer<double>(c, layout, kPrefix), Error);
}

BOOST_AUTO_TEST_CASE(derived_sizes) {
  Mamba3Config c;
  c.d_model = 8;
  c.d_state = 16;
  BOOST_TEST(c.num_rope_angles() == 4);
  c.rope_fraction = 1.0;
  BOOST_TEST(c.num_rope_angles() == 8);
  c.d_state = 5;  // floor(5) made even = 4, halved
  BOOST_TEST(c.num_rope_angles() == 2);
  c.d_state = 6, c.rope_fraction = 0.5;  // floor(3) made even = 2, halved
  BOOST_TEST(c.num_rope_angles() == 1);
  c = Mamba3Config{};
  c.d_model = 128;  // the RL default: E 256, H 16, N 16, Na 4
  BOOST_TEST(c.d_inner() == 256);
  BOOST_TEST(c.nheads() == 16);
  BOOST_TEST(c.in_proj_rows() == 2 * 256 + 2 * 16 + 3 * 16 + 4);
}

BOOST_AUTO_TEST_CASE(parameter_names_shapes_and_decay) {
  for (bool norm : {false, true}) {
    Mamba3Config c;
    c.d_model = 8, c.headdim = 4, c.ngroups = 2, c.d_state = 8, c.is_outproj_norm = norm;
    const int E = 16, H = 4, N = 8, Na = 2, R = 2 * E + 2 * 2 * N + 3 * H + Na;
    ParamLayout layout;
    layout.add("before", {3}, true);  // the mixer must not assume it starts at offset 0
    Mamba3Mixer<double> m(c, layout, kPrefix);
    struct Expect {
      std::string name;
      std::vector<int64_t> shape;
      bool decay;
    };
    std::vector<Expect> expect = {
        {"in_proj.weight", {R, 8}, true}, {"dt_bias", {H}, false},
        {"B_bias", {H, N}, false},        {"C_bias", {H, N}, false},
        {"B_norm.weight", {N}, false},    {"C_norm.weight", {N}, false},
        {"D", {H}, false},                {"out_proj.weight", {8, E}, true}};
    if (norm) expect.push_back({"norm.weight", {E}, false});
    BOOST_TEST(layout.params().size() == expect.size() + 1);
    for (const auto& e : expect) {
      const ParamId id = layout.find(kPrefix + e.name);
      BOOST_REQUIRE_MESSAGE(id >= 0, "missing " << e.name);
      BOOST_TEST(layout[id].shape == e.shape, e.name);
      BOOST_TEST(layout[id].weight_decay == e.decay, e.name);
    }
    if (!norm) BOOST_TEST(layout.find(kPrefix + "norm.weight") < 0);
    BOOST_TEST(m.state_size() == static_cast<size_t>(H * (4 * N + N + 4 + Na)));
    BOOST_TEST(m.type() == "mamba3");
    BOOST_TEST(m.d_model() == 8);
  }
}

BOOST_AUTO_TEST_CASE(init_values) {
  Mamba3Config c;
  c.d_model = 64, c.headdim = 4, c.is_outproj_norm = true;  // H = 32 heads for the dt range
  c.out_proj_init_scale = 0.5;
  ParamLayout layout;
  Mamba3Mixer<double> m(c, layout, kPrefix);
  std::vector<double> buf(layout.size(), -7.0);
  ParamView<double> P(layout, buf.data());
  Rng rng(3, 0);
  m.init_params(P, rng);
  const auto vec = [&](const std::string& n) { return P.vec(layout.find(kPrefix + n)); };
  for (const char* n : {"B_bias", "C_bias", "B_norm.weight", "C_norm.weight", "D", "norm.weight"})
    BOOST_TEST((vec(n).array() == 1.0).all(), n << " must initialise to 1");
  const auto dt_bias = vec("dt_bias");
  double lo = 1e9, hi = -1e9;
  for (Eigen::Index h = 0; h < dt_bias.size(); ++h) {
    const double dt = softplus(dt_bias[h]);
    lo = std::min(lo, dt), hi = std::max(hi, dt);
  }
  BOOST_TEST(lo >= c.dt_min * (1 - 1e-9));
  BOOST_TEST(hi <= c.dt_max * (1 + 1e-9));
  BOOST_TEST(hi / lo > 5.0);  // log-uniform over two decades: 32 draws spread out
  // PyTorch Linear default: U(±1/sqrt(fan_in)); out_proj additionally scaled.
  const double b_in = 1 / std::sqrt(64.0), b_out = 0.5 / std::sqrt(128.0);
  const auto w_in = vec("in_proj.weight"), w_out = vec("out_proj.weight");
  BOOST_TEST(w_in.cwiseAbs().maxCoeff() <= b_in);
  BOOST_TEST(w_in.cwiseAbs().maxCoeff() > 0.95 * b_in);
  BOOST_TEST(w_out.cwiseAbs().maxCoeff() <= b_out);
  BOOST_TEST(w_out.cwiseAbs().maxCoeff() > 0.95 * b_out);
}

// The generic checks, over rope fraction, output norm, an a_floor large enough
// that the clamp is active on some tokens, and dt large enough that angles wrap.
BOOST_AUTO_TEST_CASE(harness_tiny_shapes) {
  const int T = 7, B = 3;
  struct Case {
    double rope;
    bool norm;
    double a_floor;
    bool big_dt;
    int headdim;  // 2: H = 4 runs the dynamic-lane kernels; 1: H = 8 the compile-time ones
  };
  const Case cases[] = {{0.5, false, 1e-4, false, 2}, {1.0, false, 1e-4, false, 2},
                        {0.5, true, 1e-4, false, 2},  {1.0, true, 1e-4, false, 2},
                        {1.0, false, 0.7, false, 2},  {0.5, true, 1e-4, true, 2},
                        {1.0, false, 1e-4, false, 1}, {0.5, true, 0.7, true, 1}};
  uint64_t seed = 10;
  for (const Case& cs : cases) {
    BOOST_TEST_CONTEXT("rope " << cs.rope << " norm " << cs.norm << " a_floor " << cs.a_floor
                               << " big_dt " << cs.big_dt << " headdim " << cs.headdim) {
      Mamba3Config cfg = tiny_config(cs.rope, cs.norm);
      cfg.a_floor = cs.a_floor;
      cfg.headdim = cs.headdim;
      ParamLayout layout;
      Mamba3Mixer<double> m(cfg, layout, kPrefix);
      MixerProblem p = test::make_problem(m, layout, T, B, harness_starts(T, B), seed++);
      if (cs.big_dt) {  // dt_bias + 6: dt ≈ 0.3..3.8, rotations of up to ~π·3.8 rad per step
        const ParamId id = layout.find(kPrefix + "dt_bias");
        for (size_t i = 0; i < layout[id].numel; ++i) p.params[layout[id].offset + i] += 6.0;
      }
      // Make sure the piecewise branches this case is meant to exercise occur.
      NaiveStats stats;
      std::vector<double> st = p.state0;
      Mat<double> y;
      naive_forward(cfg, layout, p.params, p.U, p.starts, T, B, st, y, stats);
      if (cs.a_floor > 0.1) {
        BOOST_TEST(stats.floor_active > 0);
        BOOST_TEST(stats.floor_inactive > 0);
      }
      if (cs.big_dt) BOOST_TEST(stats.angle_wraps > 0);

      test::check_mixer_gradients(m, layout, p);
      test::check_step_equals_chunk(m, layout, p);
      test::check_reset_cuts_history(m, layout, p, 2, 3);
      test::check_reset_cuts_history(m, layout, p, 1, T - 1);
    }
  }
}

BOOST_AUTO_TEST_CASE(matches_naive_reference) {
  const int T = 9, B = 3;
  // (d_model, headdim): H = 12/3 = 4 runs the dynamic-lane kernels, 16/2 = 8 the compile-time ones.
  for (const auto& [d_model, headdim] : {std::pair{6, 3}, std::pair{8, 2}})
  for (double rope : {0.5, 1.0})
    for (bool norm : {false, true}) {
      BOOST_TEST_CONTEXT("d_model " << d_model << " rope " << rope << " norm " << norm) {
        Mamba3Config cfg;
        cfg.d_model = d_model, cfg.expand = 2, cfg.headdim = headdim, cfg.ngroups = 2;
        cfg.d_state = 6, cfg.rope_fraction = rope, cfg.is_outproj_norm = norm;
        ParamLayout layout;
        Mamba3Mixer<double> m(cfg, layout, kPrefix);
        std::vector<uint8_t> starts(T * B, 0);
        starts[4 * B + 0] = 1;  // env 0 restarts mid-sequence; env 2 starts at t=0
        starts[0 * B + 2] = 1;
        MixerProblem p = test::make_problem(m, layout, T, B, starts, 77);
        const ParamId dtb = layout.find(kPrefix + "dt_bias");
        for (size_t i = 0; i < layout[dtb].numel; ++i) p.params[layout[dtb].offset + i] += 5.0;

        std::vector<double> st_ref = p.state0, st = p.state0;
        Mat<double> y_ref, y;
        NaiveStats stats;
        naive_forward(cfg, layout, p.params, p.U, p.starts, T, B, st_ref, y_ref, stats);
        BOOST_TEST(stats.angle_wraps > 0);
        auto cache = m.make_cache();
        m.forward(ParamView<double>(layout, p.params.data()), p.U, p.starts.data(), T, B, st.data(),
                  m.state_size(), y, *cache);
        // Same double arithmetic in a different order (GEMM blocking, lane-wise
        // sums): observed ~5e-16 normwise; 1e-12 leaves room, a wrong term is O(1).
        MAMBARL_CHECK_CLOSE_REL("Y vs naive", y, y_ref, 1e-12, 1e-9, 1e-13);
        MAMBARL_CHECK_CLOSE_REL("final state (S, k_prev, v_prev) vs naive",
                                non_angle_state(m, st, B), non_angle_state(m, st_ref, B), 1e-12,
                                1e-9, 1e-13);
        MAMBARL_CHECK_CLOSE_REL("final angles vs naive", angle_features(m, st, B),
                                angle_features(m, st_ref, B), 1e-12, 1e-9, 1e-13);
        // The carried φ is kept mod 2π (the comparison above cannot see that).
        const size_t ss = m.state_size(), n_phi = cfg.nheads() * cfg.num_rope_angles();
        for (int b = 0; b < B; ++b)
          for (size_t i = ss - n_phi; i < ss; ++i)
            BOOST_TEST((st[b * ss + i] >= 0.0 && st[b * ss + i] < kTwoPi), "φ = " << st[b * ss + i]);
      }
    }
}

BOOST_AUTO_TEST_CASE(float_matches_double) {
  const int T = 16, B = 5;
  for (bool norm : {false, true}) {
    BOOST_TEST_CONTEXT("norm " << norm) {
      Mamba3Config cfg;
      cfg.d_model = 32, cfg.headdim = 8, cfg.ngroups = 2, cfg.d_state = 16, cfg.is_outproj_norm = norm;
      ParamLayout layout;
      Mamba3Mixer<double> md(cfg, layout, kPrefix);
      ParamLayout layout_f;
      Mamba3Mixer<float> mf(cfg, layout_f, kPrefix);
      BOOST_REQUIRE(layout_f.size() == layout.size());
      std::vector<uint8_t> starts(T * B, 0);
      Rng srng(5, 0);
      for (auto& s : starts) s = srng.uniform() < 0.1;
      MixerProblem p = test::make_problem(md, layout, T, B, starts, 123);
      std::vector<float> params_f(p.params.begin(), p.params.end());
      std::vector<float> st_f(p.state0.begin(), p.state0.end());
      std::vector<double> st_d = p.state0;
      const Mat<float> U_f = p.U.cast<float>();
      Mat<double> y_d;
      Mat<float> y_f;
      auto cd = md.make_cache();
      auto cf = mf.make_cache();
      md.forward(ParamView<double>(layout, p.params.data()), p.U, starts.data(), T, B, st_d.data(),
                 md.state_size(), y_d, *cd);
      mf.forward(ParamView<float>(layout_f, params_f.data()), U_f, starts.data(), T, B, st_f.data(),
                 mf.state_size(), y_f, *cf);
      // float rounds each op to ~6e-8 relative; through the GEMMs and 16
      // steps that is ~3e-7 normwise here (observed); 3e-6 keeps a 10x margin
      // while a formula that differs between the two would be O(1). Elementwise
      // bounds are looser: near-zero outputs carry absolute, not relative, error.
      MAMBARL_CHECK_CLOSE_REL("float vs double: Y", y_f, y_d, 3e-6, 1e-3, 1e-5);
      MAMBARL_CHECK_CLOSE_REL("float vs double: state", non_angle_state(mf, st_f, B),
                              non_angle_state(md, st_d, B), 3e-6, 1e-3, 1e-5);
      MAMBARL_CHECK_CLOSE_REL("float vs double: angles", angle_features(mf, st_f, B),
                              angle_features(md, st_d, B), 3e-6, 1e-3, 1e-5);
    }
  }
}

// The GRU and MLP baseline mixers: config validation, parameter registration
// and init, the generic mixer checks (finite differences, step == chunk,
// resets), independent scalar-loop re-implementations of both, the MLP's
// memorylessness, and float vs double.
#define BOOST_TEST_MODULE baselines
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "policy/gru.hpp"
#include "policy/mlp_mixer.hpp"
#include "policy/ops.hpp"
#include "test/mixer_harness.hpp"

using namespace mambarl;
using namespace mambarl::test;

namespace {

constexpr int kT = 7, kB = 3;

// (T*B) flags for B = 3: env 0 restarts twice inside the chunk (t = 2, 5),
// env 1 starts at t = 0 (its initial state must be ignored), env 2 carries
// its initial state through the whole chunk.
std::vector<uint8_t> tiny_starts(int T) {
  std::vector<uint8_t> s(static_cast<size_t>(T) * kB, 0);
  for (int t : {2, 5})
    if (t < T) s[static_cast<size_t>(t) * kB + 0] = 1;
  s[1] = 1;
  return s;
}

GruConfig gru_config(int d_model) {
  GruConfig cfg;
  cfg.d_model = d_model;
  return cfg;
}

MlpConfig mlp_config(int d_model, int expand) {
  MlpConfig cfg;
  cfg.d_model = d_model;
  cfg.expand = expand;
  return cfg;
}

// Checks the message names the field, e.g. "gru.d_model must be ...".
template <typename Config>
void expect_invalid(const Config& cfg, const std::string& field) {
  BOOST_CHECK_EXCEPTION(cfg.validate(), Error, [&](const Error& e) {
    const bool ok = std::string(e.what()).find(field) != std::string::npos;
    if (!ok) BOOST_TEST_MESSAGE("message does not name " << field << ": " << e.what());
    return ok;
  });
}

struct Expect {
  std::string name;
  std::vector<int64_t> shape;
  bool weight_decay;
};

// The mixer's tensors follow a neighbour "before" in this order, with these
// shapes and weight-decay flags; init writes only its own slices, each
// uniform within ±bound (and its extremes near the bound: with >= 12 samples
// a max below 0.5 bound has probability <= 0.5^12 ~ 2e-4).
void check_registration_and_init(const Mixer<double>& mixer, const ParamLayout& layout,
                                 const std::string& prefix, const std::vector<Expect>& expected,
                                 const std::vector<double>& bounds) {
  BOOST_REQUIRE(layout.params().size() == expected.size() + 1);
  for (size_t i = 0; i < expected.size(); ++i) {
    const ParamInfo& info = layout.params()[i + 1];
    BOOST_TEST(info.name == prefix + expected[i].name);
    BOOST_TEST(info.shape == expected[i].shape);
    BOOST_TEST(info.weight_decay == expected[i].weight_decay, info.name);
  }
  std::vector<double> buf(layout.size(), 0.0);
  ParamView<double> P(layout, buf.data());
  Rng rng(3, 0);
  mixer.init_params(P, rng);
  BOOST_TEST(P.vec(0).norm() == 0.0);  // the neighbour's slice is untouched
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto v = P.vec(static_cast<ParamId>(i + 1));
    const double m = v.cwiseAbs().maxCoeff();
    BOOST_TEST(m <= bounds[i], expected[i].name << ": max |w| " << m << " > bound " << bounds[i]);
    BOOST_TEST(m >= 0.5 * bounds[i], expected[i].name << ": max |w| " << m << " far below bound");
  }
}

const double* param_by_name(const ParamLayout& layout, const std::vector<double>& params,
                            const std::string& name) {
  const ParamId id = layout.find(name);
  BOOST_REQUIRE_MESSAGE(id >= 0, "no parameter " << name);
  return params.data() + layout[id].offset;
}

struct NaiveResult {
  Mat<double> Y;              // (T*B, D)
  std::vector<double> state;  // (B, D)
};

// nn.GRU's equations token by token with scalar loops, gates looked up by
// PyTorch's row order (r rows 0..D-1, z rows D..2D-1, n rows 2D..3D-1), the
// state zeroed in place at a start.
NaiveResult naive_gru(int D, const ParamLayout& layout, const std::vector<double>& params,
                      const std::string& prefix, const MixerProblem& p) {
  const double *w_ih = param_by_name(layout, params, prefix + "weight_ih"),
               *w_hh = param_by_name(layout, params, prefix + "weight_hh"),
               *b_ih = param_by_name(layout, params, prefix + "bias_ih"),
               *b_hh = param_by_name(layout, params, prefix + "bias_hh");
  NaiveResult res;
  res.Y.resize(p.T * p.B, D);
  res.state = p.state0;
  std::vector<double> gi(3 * D), gh(3 * D);
  for (int b = 0; b < p.B; ++b) {
    double* h = res.state.data() + b * D;
    for (int t = 0; t < p.T; ++t) {
      const int row = t * p.B + b;
      if (p.starts[row])
        for (int d = 0; d < D; ++d) h[d] = 0;
      for (int i = 0; i < 3 * D; ++i) {
        gi[i] = b_ih[i];
        gh[i] = b_hh[i];
        for (int d = 0; d < D; ++d) {
          gi[i] += w_ih[i * D + d] * p.U(row, d);
          gh[i] += w_hh[i * D + d] * h[d];
        }
      }
      for (int d = 0; d < D; ++d) {
        const double r = 1 / (1 + std::exp(-(gi[d] + gh[d])));
        const double z = 1 / (1 + std::exp(-(gi[D + d] + gh[D + d])));
        const double n = std::tanh(gi[2 * D + d] + r * gh[2 * D + d]);
        res.Y(row, d) = (1 - z) * n + z * h[d];
      }
      for (int d = 0; d < D; ++d) h[d] = res.Y(row, d);
    }
  }
  return res;
}

// Y = W2 silu(W1 u + b1) + b2 row by row.
Mat<double> naive_mlp(int D, int E, const ParamLayout& layout, const std::vector<double>& params,
                      const std::string& prefix, const Mat<double>& U) {
  const double *w1 = param_by_name(layout, params, prefix + "fc1.weight"),
               *b1 = param_by_name(layout, params, prefix + "fc1.bias"),
               *w2 = param_by_name(layout, params, prefix + "fc2.weight"),
               *b2 = param_by_name(layout, params, prefix + "fc2.bias");
  Mat<double> Y(U.rows(), D);
  std::vector<double> a(E);
  for (Eigen::Index row = 0; row < U.rows(); ++row) {
    for (int e = 0; e < E; ++e) {
      double v = b1[e];
      for (int d = 0; d < D; ++d) v += w1[e * D + d] * U(row, d);
      a[e] = v / (1 + std::exp(-v));
    }
    for (int d = 0; d < D; ++d) {
      double o = b2[d];
      for (int e = 0; e < E; ++e) o += w2[d * E + e] * a[e];
      Y(row, d) = o;
    }
  }
  return Y;
}

Mat<double> run_forward(const Mixer<double>& mixer, const ParamLayout& layout,
                        const MixerProblem& p, const Mat<double>& U,
                        const std::vector<uint8_t>& starts, std::vector<double>& state) {
  Mat<double> Y;
  auto cache = mixer.make_cache();
  mixer.forward(ParamView<double>(layout, const_cast<double*>(p.params.data())), U, starts.data(),
                p.T, p.B, state.data(), mixer.state_size(), Y, *cache);
  return Y;
}

}  // namespace

// ---------------------------------------------------------------------------
BOOST_AUTO_TEST_CASE(config_validation_names_the_field) {
  BOOST_CHECK_NO_THROW(gru_config(1).validate());
  expect_invalid(gru_config(0), "gru.d_model");
  expect_invalid(gru_config(-3), "gru.d_model");
  BOOST_CHECK_EXCEPTION(gru_config(0).validate(), Error, [](const Error& e) {
    return std::string(e.what()).find("gru.d_model must be >= 1, got 0") != std::string::npos;
  });

  BOOST_CHECK_NO_THROW(mlp_config(1, 1).validate());
  BOOST_CHECK_NO_THROW(mlp_config(4, 8).validate());
  expect_invalid(mlp_config(0, 2), "mlp.d_model");
  expect_invalid(mlp_config(4, 0), "mlp.expand");
  expect_invalid(mlp_config(4, 9), "mlp.expand");
  BOOST_TEST(mlp_config(5, 3).d_inner() == 15);

  // The constructors validate too.
  ParamLayout layout;
  BOOST_CHECK_THROW(GruMixer<double>(gru_config(0), layout, "m."), Error);
  BOOST_CHECK_THROW(MlpMixer<double>(mlp_config(4, 0), layout, "m."), Error);
  BOOST_TEST(layout.params().empty());
}

BOOST_AUTO_TEST_CASE(gru_parameters_are_registered_and_initialised_as_pytorch) {
  const int D = 6;
  ParamLayout layout;
  layout.add("before", {3}, true);
  GruMixer<double> mixer(gru_config(D), layout, "layers.1.mixer.");
  BOOST_TEST(mixer.type() == "gru");
  BOOST_TEST(mixer.d_model() == D);
  BOOST_TEST(mixer.state_size() == static_cast<size_t>(D));
  const double bound = 1 / std::sqrt(double(D));
  check_registration_and_init(mixer, layout, "layers.1.mixer.",
                              {{"weight_ih", {3 * D, D}, true},
                               {"weight_hh", {3 * D, D}, true},
                               {"bias_ih", {3 * D}, false},
                               {"bias_hh", {3 * D}, false}},
                              {bound, bound, bound, bound});
}

BOOST_AUTO_TEST_CASE(mlp_parameters_are_registered_and_initialised_as_pytorch) {
  const int D = 6, E = 18;
  ParamLayout layout;
  layout.add("before", {3}, true);
  MlpMixer<double> mixer(mlp_config(D, 3), layout, "layers.1.mixer.");
  BOOST_TEST(mixer.type() == "mlp");
  BOOST_TEST(mixer.d_model() == D);
  BOOST_TEST(mixer.state_size() == 0u);
  const double b1 = 1 / std::sqrt(double(D)), b2 = 1 / std::sqrt(double(E));  // fan_in of each
  check_registration_and_init(mixer, layout, "layers.1.mixer.",
                              {{"fc1.weight", {E, D}, true},
                               {"fc1.bias", {E}, false},
                               {"fc2.weight", {D, E}, true},
                               {"fc2.bias", {D}, false}},
                              {b1, b1, b2, b2});
}

// ---------------------------------------------------------------------------
BOOST_AUTO_TEST_CASE(gru_gradients_match_finite_differences) {
  for (int D : {3, 4}) {
    BOOST_TEST_CONTEXT("D " << D) {
      ParamLayout layout;
      GruMixer<double> mixer(gru_config(D), layout, "layers.0.mixer.");
      check_mixer_gradients(mixer, layout, make_problem(mixer, layout, kT, kB, tiny_starts(kT), 21));
    }
  }
}

BOOST_AUTO_TEST_CASE(gru_step_equals_chunk_and_halves_equal_whole) {
  ParamLayout layout;
  GruMixer<double> mixer(gru_config(4), layout, "layers.0.mixer.");
  check_step_equals_chunk(mixer, layout, make_problem(mixer, layout, kT, kB, tiny_starts(kT), 22));
}

BOOST_AUTO_TEST_CASE(gru_reset_cuts_history) {
  ParamLayout layout;
  GruMixer<double> mixer(gru_config(4), layout, "layers.0.mixer.");
  const MixerProblem p = make_problem(mixer, layout, kT, kB, tiny_starts(kT), 23);
  // The final state is Y's last row, so the harness's Y check covers it too.
  for (int t0 : {3, 6})
    for (int b : {0, 2}) {
      BOOST_TEST_CONTEXT("env " << b << ", reset at t=" << t0) {
        check_reset_cuts_history(mixer, layout, p, b, t0);
      }
    }
}

BOOST_AUTO_TEST_CASE(gru_matches_scalar_loops_of_the_equations) {
  // T = 1 is the actor's single step from a carried state; T = 7 adds the
  // resets and the hand-off of h between steps.
  for (int T : {1, kT}) {
    BOOST_TEST_CONTEXT("T " << T) {
      const int D = 5;  // 3D = 15: not a multiple of any SIMD width, so tails run too
      ParamLayout layout;
      GruMixer<double> mixer(gru_config(D), layout, "layers.2.mixer.");
      std::vector<uint8_t> starts = tiny_starts(T);
      if (T == 1) starts = {0, 1, 0};  // env 1 resets, envs 0 and 2 step from their state
      const MixerProblem p = make_problem(mixer, layout, T, kB, starts, 24);
      std::vector<double> state = p.state0;
      const Mat<double> Y = run_forward(mixer, layout, p, p.U, starts, state);
      const NaiveResult ref = naive_gru(D, layout, p.params, "layers.2.mixer.", p);
      // Same formulas in float64, summed in other orders: agreement to ~1e-15
      // relative; 1e-12 leaves room and still catches any formula slip.
      MAMBARL_CHECK_CLOSE_REL("Y vs scalar loops", Y, ref.Y, 1e-12, 1e-9, 1e-12);
      const ConstVecMap<double> a(state.data(), static_cast<Eigen::Index>(state.size()));
      const ConstVecMap<double> b(ref.state.data(), static_cast<Eigen::Index>(ref.state.size()));
      MAMBARL_CHECK_CLOSE_REL("final state vs scalar loops", a, b, 1e-12, 1e-9, 1e-12);
    }
  }
}

// ---------------------------------------------------------------------------
BOOST_AUTO_TEST_CASE(mlp_gradients_match_finite_differences) {
  for (int D : {3, 4}) {
    BOOST_TEST_CONTEXT("D " << D) {
      ParamLayout layout;
      MlpMixer<double> mixer(mlp_config(D, 2), layout, "layers.0.mixer.");
      check_mixer_gradients(mixer, layout, make_problem(mixer, layout, kT, kB, tiny_starts(kT), 31));
    }
  }
}

BOOST_AUTO_TEST_CASE(mlp_step_equals_chunk_and_halves_equal_whole) {
  ParamLayout layout;
  MlpMixer<double> mixer(mlp_config(4, 2), layout, "layers.0.mixer.");
  check_step_equals_chunk(mixer, layout, make_problem(mixer, layout, kT, kB, tiny_starts(kT), 32));
}

BOOST_AUTO_TEST_CASE(mlp_row_depends_only_on_its_own_input_row) {
  const int D = 4;
  ParamLayout layout;
  MlpMixer<double> mixer(mlp_config(D, 2), layout, "layers.0.mixer.");
  const MixerProblem p = make_problem(mixer, layout, kT, kB, tiny_starts(kT), 33);
  std::vector<double> no_state;
  const Mat<double> Y_ref = run_forward(mixer, layout, p, p.U, p.starts, no_state);
  const Mat<double> naive = naive_mlp(D, 2 * D, layout, p.params, "layers.0.mixer.", p.U);
  // Same formula in float64 in another summation order: ~1e-15; see the GRU case.
  MAMBARL_CHECK_CLOSE_REL("Y vs scalar loops", Y_ref, naive, 1e-12, 1e-9, 1e-12);

  // Perturbing one row changes that row of Y and leaves every other row bit-identical.
  Rng rng(7, 2);
  for (int row : {0, 4, kT * kB - 1}) {
    Mat<double> U_alt = p.U;
    for (int d = 0; d < D; ++d) U_alt(row, d) += rng.normal();
    const Mat<double> Y_alt = run_forward(mixer, layout, p, U_alt, p.starts, no_state);
    for (Eigen::Index r = 0; r < Y_ref.rows(); ++r) {
      const double diff = (Y_alt.row(r) - Y_ref.row(r)).norm();
      if (r == row)
        BOOST_CHECK_MESSAGE(diff > 0.0, "perturbing U row " << row << " does not change Y row " << r);
      else
        BOOST_CHECK_MESSAGE(diff == 0.0, "U row " << row << " leaks into Y row " << r << " (diff "
                                                  << diff << ")");
    }
  }

  // The start flags are irrelevant.
  const std::vector<uint8_t> all_starts(p.starts.size(), 1);
  const Mat<double> Y_starts = run_forward(mixer, layout, p, p.U, all_starts, no_state);
  BOOST_TEST((Y_starts.array() == Y_ref.array()).all());
}

// ---------------------------------------------------------------------------
BOOST_AUTO_TEST_CASE(float_matches_double) {
  BOOST_TEST_CONTEXT("gru") { check_float_matches_double<GruMixer>(gru_config(32)); }
  BOOST_TEST_CONTEXT("mlp") { check_float_matches_double<MlpMixer>(mlp_config(32, 2)); }
}

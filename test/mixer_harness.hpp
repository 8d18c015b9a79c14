// Generic checks every Mixer must pass (used by the per-block suites):
//   * gradients of every parameter tensor and of the input U against central
//     finite differences in float64, with resets inside the sequence;
//   * T calls of the T=1 step == one chunk forward (outputs and final state);
//   * two half-chunks == the whole chunk;
//   * a reset makes the future independent of the past (state and gradient).
#pragma once

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/base/rng.hpp"
#include "policy/mixer.hpp"
#include "test/test_util.hpp"

namespace mambarl::test {

// A tiny problem for one mixer: random params (perturbed away from init so no
// gradient is accidentally zero), random input, random initial state and a
// fixed random projection R that turns Y into the scalar loss sum(R ⊙ Y).
struct MixerProblem {
  int T = 0, B = 0, D = 0;
  std::vector<uint8_t> starts;      // (T*B)
  std::vector<double> params;       // flat
  Mat<double> U, R;                 // (T*B, D)
  std::vector<double> state0;       // (B, state_size)
};

inline MixerProblem make_problem(const Mixer<double>& mixer, const ParamLayout& layout, int T,
                                 int B, const std::vector<uint8_t>& starts, uint64_t seed) {
  MixerProblem p;
  p.T = T;
  p.B = B;
  p.D = mixer.d_model();
  p.starts = starts;
  Rng rng(seed, 1);
  p.params.assign(layout.size(), 0.0);
  ParamView<double> P(layout, p.params.data());
  mixer.init_params(P, rng);
  for (auto& v : p.params) v += 0.1 * rng.normal();  // break symmetries of the init
  p.U.resize(T * B, p.D);
  p.R.resize(T * B, p.D);
  for (Eigen::Index i = 0; i < p.U.size(); ++i) p.U.data()[i] = rng.normal();
  for (Eigen::Index i = 0; i < p.R.size(); ++i) p.R.data()[i] = rng.normal();
  p.state0.resize(static_cast<size_t>(B) * mixer.state_size());
  for (auto& v : p.state0) v = 0.5 * rng.normal();
  return p;
}

inline double mixer_loss(const Mixer<double>& mixer, const ParamLayout& layout,
                         const std::vector<double>& params, const MixerProblem& p,
                         const Mat<double>& U) {
  std::vector<double> state = p.state0;
  Mat<double> Y;
  auto cache = mixer.make_cache();
  mixer.forward(ParamView<double>(layout, const_cast<double*>(params.data())), U, p.starts.data(),
                p.T, p.B, state.data(), mixer.state_size(), Y, *cache);
  return (Y.array() * p.R.array()).sum();
}

// Finite-difference check of every parameter tensor and of U. Tolerances: with
// h = 1e-6 in float64 the central difference is accurate to ~1e-9 relative on
// these smooth functions, so 1e-6 leaves room for curvature without hiding bugs.
inline void check_mixer_gradients(const Mixer<double>& mixer, const ParamLayout& layout,
                                  const MixerProblem& p, double tol = 1e-6) {
  std::vector<double> state = p.state0;
  Mat<double> Y, dU;
  auto cache = mixer.make_cache();
  ParamView<double> P(layout, const_cast<double*>(p.params.data()));
  mixer.forward(P, p.U, p.starts.data(), p.T, p.B, state.data(), mixer.state_size(), Y, *cache);
  std::vector<double> grads(layout.size(), 0.0);
  ParamView<double> G(layout, grads.data());
  mixer.backward(P, p.R, *cache, G, dU);

  const double h = 1e-6;
  std::vector<double> work = p.params;
  for (const auto& info : layout.params()) {
    Vec<double> analytic(static_cast<Eigen::Index>(info.numel)), numeric(analytic.size());
    for (size_t i = 0; i < info.numel; ++i) {
      const size_t k = info.offset + i;
      const double orig = work[k];
      work[k] = orig + h;
      const double lp = mixer_loss(mixer, layout, work, p, p.U);
      work[k] = orig - h;
      const double lm = mixer_loss(mixer, layout, work, p, p.U);
      work[k] = orig;
      numeric[static_cast<Eigen::Index>(i)] = (lp - lm) / (2 * h);
      analytic[static_cast<Eigen::Index>(i)] = grads[k];
    }
    BOOST_CHECK_MESSAGE(numeric.norm() > 1e-8,
                        info.name << ": finite-difference gradient is zero; the test is vacuous");
    MAMBARL_CHECK_CLOSE_REL("grad " << info.name, analytic, numeric, tol, 1e-5, 1e-7);
  }

  Mat<double> Uw = p.U, numeric_dU(p.U.rows(), p.U.cols());
  for (Eigen::Index i = 0; i < Uw.size(); ++i) {
    const double orig = Uw.data()[i];
    Uw.data()[i] = orig + h;
    const double lp = mixer_loss(mixer, layout, p.params, p, Uw);
    Uw.data()[i] = orig - h;
    const double lm = mixer_loss(mixer, layout, p.params, p, Uw);
    Uw.data()[i] = orig;
    numeric_dU.data()[i] = (lp - lm) / (2 * h);
  }
  MAMBARL_CHECK_CLOSE_REL("grad input U", dU, numeric_dU, tol, 1e-5, 1e-7);
}

// T calls with T=1 on the carried state == one chunk forward; and two halves
// == the whole. Same arithmetic in the same order, so agreement is to ~1e-12.
inline void check_step_equals_chunk(const Mixer<double>& mixer, const ParamLayout& layout,
                                    const MixerProblem& p) {
  ParamView<double> P(layout, const_cast<double*>(p.params.data()));
  const size_t ss = mixer.state_size();
  std::vector<double> state_chunk = p.state0;
  Mat<double> Y_chunk;
  auto cache = mixer.make_cache();
  mixer.forward(P, p.U, p.starts.data(), p.T, p.B, state_chunk.data(), ss, Y_chunk, *cache);

  std::vector<double> state_step = p.state0;
  Mat<double> Y_step(p.T * p.B, p.D), y;
  auto step_cache = mixer.make_cache();
  for (int t = 0; t < p.T; ++t) {
    const Mat<double> u = p.U.middleRows(t * p.B, p.B);
    mixer.forward(P, u, p.starts.data() + t * p.B, 1, p.B, state_step.data(), ss, y, *step_cache);
    Y_step.middleRows(t * p.B, p.B) = y;
  }
  MAMBARL_CHECK_CLOSE_REL("step x T vs chunk: Y", Y_step, Y_chunk, 1e-12, 1e-10, 1e-12);
  if (ss > 0) {
    ConstVecMap<double> a(state_step.data(), static_cast<Eigen::Index>(state_step.size()));
    ConstVecMap<double> b(state_chunk.data(), static_cast<Eigen::Index>(state_chunk.size()));
    MAMBARL_CHECK_CLOSE_REL("step x T vs chunk: final state", a, b, 1e-12, 1e-10, 1e-12);
  }

  // Two halves == whole.
  const int T1 = p.T / 2;
  std::vector<double> state_halves = p.state0;
  Mat<double> Y_halves(p.T * p.B, p.D), y1;
  const Mat<double> U1 = p.U.topRows(T1 * p.B), U2 = p.U.bottomRows((p.T - T1) * p.B);
  mixer.forward(P, U1, p.starts.data(), T1, p.B, state_halves.data(), ss, y1, *cache);
  Y_halves.topRows(T1 * p.B) = y1;
  mixer.forward(P, U2, p.starts.data() + T1 * p.B, p.T - T1, p.B, state_halves.data(), ss, y1,
                *cache);
  Y_halves.bottomRows((p.T - T1) * p.B) = y1;
  MAMBARL_CHECK_CLOSE_REL("two halves vs whole: Y", Y_halves, Y_chunk, 1e-12, 1e-10, 1e-12);
}

// With a reset of env b at step t0, Y[t >= t0, b] must not depend on U[t < t0, b]
// nor on the initial state, and the gradient of a loss on steps >= t0 must be
// zero on earlier inputs of env b. Other envs must be unaffected by b's reset.
inline void check_reset_cuts_history(const Mixer<double>& mixer, const ParamLayout& layout,
                                     MixerProblem p, int b, int t0) {
  BOOST_REQUIRE(t0 > 0 && t0 < p.T && b < p.B);
  ParamView<double> P(layout, p.params.data());
  const size_t ss = mixer.state_size();
  for (int t = 0; t < p.T; ++t) p.starts[t * p.B + b] = (t == t0);
  auto run = [&](const Mat<double>& U, const std::vector<double>& s0, Mat<double>& Y) {
    std::vector<double> st = s0;
    auto c = mixer.make_cache();
    mixer.forward(P, U, p.starts.data(), p.T, p.B, st.data(), ss, Y, *c);
  };
  Mat<double> Y_ref, Y_alt;
  run(p.U, p.state0, Y_ref);
  // Scramble env b's past (inputs before t0 and its initial state).
  Mat<double> U_alt = p.U;
  std::vector<double> s_alt = p.state0;
  Rng rng(99, 7);
  for (int t = 0; t < t0; ++t)
    for (int d = 0; d < p.D; ++d) U_alt(t * p.B + b, d) += rng.normal();
  for (size_t i = 0; i < ss; ++i) s_alt[b * ss + i] += rng.normal();
  run(U_alt, s_alt, Y_alt);
  for (int t = 0; t < p.T; ++t)
    for (int e = 0; e < p.B; ++e) {
      const bool must_match = (e != b) || t >= t0;
      if (!must_match) continue;
      const double diff = (Y_ref.row(t * p.B + e) - Y_alt.row(t * p.B + e)).norm();
      BOOST_CHECK_MESSAGE(diff == 0.0, "reset of env " << b << " at t=" << t0
                                                       << " leaks history into env " << e
                                                       << " t=" << t << " (diff " << diff << ")");
    }

  // Gradient: loss on env b's rows from t0 on only; dU on its earlier rows must be 0.
  Mat<double> R = Mat<double>::Zero(p.T * p.B, p.D);
  for (int t = t0; t < p.T; ++t) R.row(t * p.B + b) = p.R.row(t * p.B + b);
  std::vector<double> st = p.state0, grads(layout.size(), 0.0);
  auto c = mixer.make_cache();
  Mat<double> Y, dU;
  mixer.forward(P, p.U, p.starts.data(), p.T, p.B, st.data(), ss, Y, *c);
  mixer.backward(P, R, *c, ParamView<double>(layout, grads.data()), dU);
  double leaked = 0;
  for (int t = 0; t < t0; ++t) leaked += dU.row(t * p.B + b).norm();
  BOOST_CHECK_MESSAGE(leaked == 0.0, "gradient crosses the reset at t=" << t0 << ": " << leaked);
  double after = 0;
  for (int t = t0; t < p.T; ++t) after += dU.row(t * p.B + b).norm();
  BOOST_CHECK_MESSAGE(after > 0.0, "no gradient at all after the reset: vacuous test");
}

// The same problem through a float and a double instance of one mixer type.
template <template <typename> class MixerT, typename Config>
void check_float_matches_double(const Config& cfg) {
  const int T = 16, B = 4;
  ParamLayout layout, layout_f;
  MixerT<double> mixer_d(cfg, layout, "m.");
  MixerT<float> mixer_f(cfg, layout_f, "m.");
  std::vector<uint8_t> starts(T * B, 0);
  starts[0 * B + 1] = starts[5 * B + 0] = starts[11 * B + 0] = starts[9 * B + 3] = 1;
  const MixerProblem p = make_problem(mixer_d, layout, T, B, starts, 15);
  const size_t ss = mixer_d.state_size();

  std::vector<double> state_d = p.state0, grads_d(layout.size(), 0.0);
  Mat<double> Y_d, dU_d;
  auto cache_d = mixer_d.make_cache();
  ParamView<double> P_d(layout, const_cast<double*>(p.params.data()));
  mixer_d.forward(P_d, p.U, starts.data(), T, B, state_d.data(), ss, Y_d, *cache_d);
  mixer_d.backward(P_d, p.R, *cache_d, ParamView<double>(layout, grads_d.data()), dU_d);

  std::vector<float> params_f(p.params.begin(), p.params.end()), grads_f(layout.size(), 0.f);
  std::vector<float> state_f(p.state0.begin(), p.state0.end());
  const Mat<float> U_f = p.U.cast<float>(), R_f = p.R.cast<float>();
  Mat<float> Y_f, dU_f;
  auto cache_f = mixer_f.make_cache();
  ParamView<float> P_f(layout_f, params_f.data());
  mixer_f.forward(P_f, U_f, starts.data(), T, B, state_f.data(), ss, Y_f, *cache_f);
  mixer_f.backward(P_f, R_f, *cache_f, ParamView<float>(layout_f, grads_f.data()), dU_f);

  // float eps is 6e-8; each output is a few dot products of length <= 64 and
  // a contracting recurrence over 16 steps, and Eigen's float exp/logistic
  // are good to a few ulp, so ~1e-7 is expected (measured 1e-7 to 3e-7 on
  // every tensor for GRU, MLP and Mamba-1). 1e-5 leaves a margin and still
  // fails on any float-only slip (a wrong gate or exp constant shows up at
  // 1e-3 or worse).
  BOOST_TEST(rel_error(Y_f, Y_d) < 1e-5, "Y rel error " << rel_error(Y_f, Y_d));
  BOOST_TEST(rel_error(dU_f, dU_d) < 1e-5, "dU rel error " << rel_error(dU_f, dU_d));
  if (ss > 0) {
    const ConstVecMap<float> sf(state_f.data(), static_cast<Eigen::Index>(state_f.size()));
    const ConstVecMap<double> sd(state_d.data(), static_cast<Eigen::Index>(state_d.size()));
    BOOST_TEST(rel_error(sf, sd) < 1e-5, "state rel error " << rel_error(sf, sd));
  }
  for (const auto& info : layout.params()) {
    const ConstVecMap<float> gf(grads_f.data() + info.offset, static_cast<Eigen::Index>(info.numel));
    const ConstVecMap<double> gd(grads_d.data() + info.offset, static_cast<Eigen::Index>(info.numel));
    BOOST_TEST(rel_error(gf, gd) < 1e-5, info.name << " grad rel error " << rel_error(gf, gd));
  }
}


}  // namespace mambarl::test

// GRU mixer, CPU reference: forward and backward through time with per-env
// resets (policy/MATH.md "Episode boundaries": h <- 0 before a step with s_t = 1).
//
// Work split: the input side W_ih u + b_ih has no recurrence, so it is one
// GEMM over all T*B rows; only W_hh h + b_hh runs per step, as a GEMM over
// the B rows of that step. The backward mirrors this: the per-step sweep
// only carries dL/dh (one (B, 3D) x (3D, D) GEMM per step) and records the
// gate gradients, and all four parameter gradients and dU are whole-chunk
// GEMMs afterwards. That is why the cache keeps h_{t-1} for every row: dW_hh
// becomes one dGh^T H_prev product instead of T small ones.
#include "policy/gru.hpp"

#include <vector>

#include "policy/ops.hpp"

namespace mambarl {

void GruConfig::validate() const {
  MAMBARL_CHECK(d_model >= 1, "gru.d_model must be >= 1, got " << d_model);
}

template <typename S>
struct GruMixer<S>::Cache final : MixerCache {
  int T = 0, B = 0;
  std::vector<uint8_t> starts;  // (T*B)
  Mat<S> u;                     // (T*B, D) input, for dW_ih
  Mat<S> gates;                 // (T*B, 3D) [r z n] after σ / tanh (input pre-activations before)
  Mat<S> hn;                    // (T*B, D) W_hn h_{t-1} + b_hn, the part r gates
  Mat<S> h_prev;                // (T*B, D) h entering step t, zero at a start
  Mat<S> gh_step;               // (B, 3D) W_hh h_{t-1} + b_hh of one step
  // backward
  Mat<S> dgi;                   // (T*B, 3D) dL/d(W_ih u + b_ih)
  Mat<S> dgh;                   // (T*B, 3D) dL/d(W_hh h + b_hh); differs from dgi in the n block
  Mat<S> dh;                    // (B, D) dL/dh_t, then dL/dh_{t-1}
};

template <typename S>
typename GruMixer<S>::Cache& GruMixer<S>::cache_of(MixerCache& base) const {
  auto* c = dynamic_cast<Cache*>(&base);
  MAMBARL_CHECK(c != nullptr, "GruMixer was given a cache made by another mixer");
  return *c;
}

template <typename S>
GruMixer<S>::GruMixer(const GruConfig& cfg, ParamLayout& layout, const std::string& prefix)
    : cfg_(cfg) {
  cfg_.validate();
  D_ = cfg_.d_model;
  // nn.GRU's registration order.
  w_ih_ = layout.add(prefix + "weight_ih", {3 * D_, D_}, true);
  w_hh_ = layout.add(prefix + "weight_hh", {3 * D_, D_}, true);
  b_ih_ = layout.add(prefix + "bias_ih", {3 * D_}, false);
  b_hh_ = layout.add(prefix + "bias_hh", {3 * D_}, false);
}

template <typename S>
void GruMixer<S>::init_params(const ParamView<S>& P, Rng& rng) const {
  // nn.GRU.reset_parameters: uniform(±1/sqrt(hidden_size)) for every tensor,
  // which is init_linear_default's bound with fan_in = D.
  init_linear_default<S>(P.ptr(w_ih_), P.ptr(b_ih_), 3 * D_, D_, rng);
  init_linear_default<S>(P.ptr(w_hh_), P.ptr(b_hh_), 3 * D_, D_, rng);
}

template <typename S>
std::unique_ptr<MixerCache> GruMixer<S>::make_cache() const {
  return std::make_unique<Cache>();
}

template <typename S>
void GruMixer<S>::forward(const ParamView<S>& P, const Mat<S>& U, const uint8_t* starts, int T,
                          int B, S* state, size_t state_stride, Mat<S>& Y,
                          MixerCache& base) const {
  MAMBARL_CHECK(T > 0 && B > 0, "gru forward: T (" << T << ") and B (" << B << ") must be positive");
  MAMBARL_CHECK(U.rows() == static_cast<Eigen::Index>(T) * B && U.cols() == D_,
                "gru forward: U is (" << U.rows() << ", " << U.cols() << "), expected (" << T * B
                                      << ", " << D_ << ")");
  MAMBARL_CHECK(B == 1 || state_stride >= state_size(),
                "gru forward: state_stride (" << state_stride << ") < state_size (" << state_size()
                                              << ")");
  Cache& c = cache_of(base);
  const Eigen::Index M = static_cast<Eigen::Index>(T) * B;
  c.T = T;
  c.B = B;
  c.starts.assign(starts, starts + M);
  c.u = U;  // before Y is written: the caller may pass the same matrix for both
  linear_forward<S>(c.u, P.mat(w_ih_), P.ptr(b_ih_), c.gates);  // (M, 3D)
  c.hn.resize(M, D_);
  c.h_prev.resize(M, D_);
  c.gh_step.resize(B, 3 * D_);
  Y.resize(M, D_);

  const MatMap<S> w_hh = P.mat(w_hh_);
  for (int t = 0; t < T; ++t) {
    const Eigen::Index r0 = static_cast<Eigen::Index>(t) * B;
    auto hp = c.h_prev.middleRows(r0, B);  // (B, D)
    for (int b = 0; b < B; ++b) {
      if (starts[r0 + b])
        hp.row(b).setZero();
      else if (t == 0)
        hp.row(b) = ConstVecMap<S>(state + b * state_stride, D_).transpose();
      else
        hp.row(b) = Y.row(r0 - B + b);
    }
    linear_forward<S>(hp, w_hh, P.ptr(b_hh_), c.gh_step);
    // In place over the input pre-activations: each element is read once, then overwritten.
    auto g = c.gates.middleRows(r0, B);  // (B, 3D)
    g.leftCols(2 * D_) = (g.leftCols(2 * D_).array() + c.gh_step.leftCols(2 * D_).array())
                             .logistic()
                             .matrix();
    c.hn.middleRows(r0, B) = c.gh_step.rightCols(D_);
    g.rightCols(D_) =
        (g.rightCols(D_).array() + g.leftCols(D_).array() * c.gh_step.rightCols(D_).array())
            .tanh()
            .matrix();
    const auto z = g.middleCols(D_, D_).array();
    Y.middleRows(r0, B) = ((S(1) - z) * g.rightCols(D_).array() + z * hp.array()).matrix();
  }
  for (int b = 0; b < B; ++b)
    VecMap<S>(state + b * state_stride, D_) = Y.row(M - B + b).transpose();
}

// Per step, with dh = dL/dh_t (from Y_t and from step t+1):
//   d n_pre = dh ⊙ (1-z) ⊙ (1-n²)             (= dgi_n)
//   dgh_n   = d n_pre ⊙ r
//   dgi_z = dgh_z = dh ⊙ (h_{t-1} - n) ⊙ z(1-z)
//   dgi_r = dgh_r = d n_pre ⊙ hn ⊙ r(1-r)
//   dh_{t-1} = dh ⊙ z + dgh W_hh, cut to 0 for envs that started at t.
template <typename S>
void GruMixer<S>::backward(const ParamView<S>& P, const Mat<S>& dY, MixerCache& base,
                           const ParamView<S>& G, Mat<S>& dU) const {
  Cache& c = cache_of(base);
  const int B = c.B;
  const Eigen::Index M = static_cast<Eigen::Index>(c.T) * B;
  MAMBARL_CHECK(dY.rows() == M && dY.cols() == D_,
                "gru backward: dY is (" << dY.rows() << ", " << dY.cols() << "), expected (" << M
                                        << ", " << D_ << ")");
  c.dgi.resize(M, 3 * D_);
  c.dgh.resize(M, 3 * D_);
  c.dh.setZero(B, D_);
  const MatMap<S> w_hh = P.mat(w_hh_);
  for (int t = c.T - 1; t >= 0; --t) {
    const Eigen::Index r0 = static_cast<Eigen::Index>(t) * B;
    c.dh += dY.middleRows(r0, B);
    const auto g = c.gates.middleRows(r0, B);  // (B, 3D)
    const auto r = g.leftCols(D_).array();
    const auto z = g.middleCols(D_, D_).array();
    const auto n = g.rightCols(D_).array();
    const auto hp = c.h_prev.middleRows(r0, B).array();
    const auto dh = c.dh.array();
    auto dgi = c.dgi.middleRows(r0, B);  // (B, 3D)
    auto dgh = c.dgh.middleRows(r0, B);  // (B, 3D)
    dgi.rightCols(D_) = (dh * (S(1) - z) * (S(1) - n * n)).matrix();
    dgh.rightCols(D_) = (dgi.rightCols(D_).array() * r).matrix();
    dgi.middleCols(D_, D_) = (dh * (hp - n) * z * (S(1) - z)).matrix();
    dgi.leftCols(D_) =
        (dgi.rightCols(D_).array() * c.hn.middleRows(r0, B).array() * r * (S(1) - r)).matrix();
    dgh.leftCols(2 * D_) = dgi.leftCols(2 * D_);
    c.dh.array() *= z;
    c.dh.noalias() += dgh * w_hh;
    // h_{t-1} was a constant zero for these envs: nothing flows past the reset.
    for (int b = 0; b < B; ++b)
      if (c.starts[static_cast<size_t>(r0 + b)]) c.dh.row(b).setZero();
  }
  // What is left in c.dh is dL/d(initial state): data in PPO, so dropped.
  linear_backward<S>(c.h_prev, w_hh, c.dgh, G.mat(w_hh_), G.ptr(b_hh_), nullptr);
  linear_backward<S>(c.u, P.mat(w_ih_), c.dgi, G.mat(w_ih_), G.ptr(b_ih_), &dU);
}

template class GruMixer<float>;
template class GruMixer<double>;

}  // namespace mambarl

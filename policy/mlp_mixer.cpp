// MLP mixer, CPU reference: two whole-chunk GEMMs and a silu, no time loop.
#include "policy/mlp_mixer.hpp"

#include "policy/ops.hpp"

namespace mambarl {

void MlpConfig::validate() const {
  MAMBARL_CHECK(d_model >= 1, "mlp.d_model must be >= 1, got " << d_model);
  // Same range as mamba1.expand: a wider hidden layer than 8 D is a typo here.
  MAMBARL_CHECK(expand >= 1 && expand <= 8, "mlp.expand must be in [1, 8], got " << expand);
}

template <typename S>
struct MlpMixer<S>::Cache final : MixerCache {
  Mat<S> u;    // (T*B, D) input, for dW1
  Mat<S> pre;  // (T*B, E) W1 u + b1
  Mat<S> sig;  // (T*B, E) σ(pre), shared by silu and its derivative
  Mat<S> act;  // (T*B, E) silu(pre), for dW2
  Mat<S> dact; // (T*B, E) dL/dact, then dL/dpre
};

template <typename S>
typename MlpMixer<S>::Cache& MlpMixer<S>::cache_of(MixerCache& base) const {
  auto* c = dynamic_cast<Cache*>(&base);
  MAMBARL_CHECK(c != nullptr, "MlpMixer was given a cache made by another mixer");
  return *c;
}

template <typename S>
MlpMixer<S>::MlpMixer(const MlpConfig& cfg, ParamLayout& layout, const std::string& prefix)
    : cfg_(cfg) {
  cfg_.validate();
  D_ = cfg_.d_model;
  E_ = cfg_.d_inner();
  fc1_w_ = layout.add(prefix + "fc1.weight", {E_, D_}, true);
  fc1_b_ = layout.add(prefix + "fc1.bias", {E_}, false);
  fc2_w_ = layout.add(prefix + "fc2.weight", {D_, E_}, true);
  fc2_b_ = layout.add(prefix + "fc2.bias", {D_}, false);
}

template <typename S>
void MlpMixer<S>::init_params(const ParamView<S>& P, Rng& rng) const {
  init_linear_default<S>(P.ptr(fc1_w_), P.ptr(fc1_b_), E_, D_, rng);
  init_linear_default<S>(P.ptr(fc2_w_), P.ptr(fc2_b_), D_, E_, rng);
}

template <typename S>
std::unique_ptr<MixerCache> MlpMixer<S>::make_cache() const {
  return std::make_unique<Cache>();
}

template <typename S>
void MlpMixer<S>::forward(const ParamView<S>& P, const Mat<S>& U, const uint8_t* /*starts*/,
                          int T, int B, S* /*state*/, size_t /*state_stride*/, Mat<S>& Y,
                          MixerCache& base) const {
  MAMBARL_CHECK(T > 0 && B > 0, "mlp forward: T (" << T << ") and B (" << B << ") must be positive");
  MAMBARL_CHECK(U.rows() == static_cast<Eigen::Index>(T) * B && U.cols() == D_,
                "mlp forward: U is (" << U.rows() << ", " << U.cols() << "), expected (" << T * B
                                      << ", " << D_ << ")");
  Cache& c = cache_of(base);
  c.u = U;  // kept for dW1; also makes Y aliasing U harmless
  linear_forward<S>(c.u, P.mat(fc1_w_), P.ptr(fc1_b_), c.pre);  // (M, E)
  c.sig = c.pre.array().logistic().matrix();
  c.act = (c.pre.array() * c.sig.array()).matrix();
  linear_forward<S>(c.act, P.mat(fc2_w_), P.ptr(fc2_b_), Y);  // (M, D)
}

// silu'(v) = σ(v) (1 + v (1 - σ(v))).
template <typename S>
void MlpMixer<S>::backward(const ParamView<S>& P, const Mat<S>& dY, MixerCache& base,
                           const ParamView<S>& G, Mat<S>& dU) const {
  Cache& c = cache_of(base);
  MAMBARL_CHECK(dY.rows() == c.u.rows() && dY.cols() == D_,
                "mlp backward: dY is (" << dY.rows() << ", " << dY.cols() << "), expected ("
                                        << c.u.rows() << ", " << D_ << ")");
  linear_backward<S>(c.act, P.mat(fc2_w_), dY, G.mat(fc2_w_), G.ptr(fc2_b_), &c.dact);
  const auto s = c.sig.array();
  c.dact.array() *= s * (S(1) + c.pre.array() * (S(1) - s));
  linear_backward<S>(c.u, P.mat(fc1_w_), c.dact, G.mat(fc1_w_), G.ptr(fc1_b_), &dU);
}

template class MlpMixer<float>;
template class MlpMixer<double>;

}  // namespace mambarl

// Elementwise functions and the two dense layers (Linear, RMSNorm) of the CPU
// reference, each with its backward. Shapes: X (M, in) token-rows, W (out, in)
// as PyTorch stores it, so a checkpoint maps one-to-one onto nn.Linear.
#pragma once

#include <cmath>

#include "kernels/base/rng.hpp"
#include "policy/tensor.hpp"

namespace mambarl {

constexpr double kNormEps = 1e-5;  // policy/MATH.md "Notation": all norms use eps = 1e-5

template <typename S>
inline S sigmoid(S v) {
  return S(1) / (S(1) + std::exp(-v));
}
template <typename S>
inline S silu(S v) {
  return v * sigmoid(v);
}
// d silu / dv = s (1 + v (1 - s)), s = sigmoid(v)
template <typename S>
inline S silu_grad(S v) {
  const S s = sigmoid(v);
  return s * (S(1) + v * (S(1) - s));
}
// softplus(v) = log(1 + e^v), computed without overflow for large v.
template <typename S>
inline S softplus(S v) {
  return v > S(20) ? v : std::log1p(std::exp(v));
}

// Y (M, out) = X (M, in) W^T (out, in) + b (out); b may be null.
template <typename S, typename XT, typename YT>
inline void linear_forward(const Eigen::MatrixBase<XT>& X, const MatMap<S>& W, const S* b,
                           Eigen::MatrixBase<YT>& Y) {
  Y.noalias() = X * W.transpose();
  if (b) Y.rowwise() += ConstVecMap<S>(b, W.rows()).transpose();
}

// Accumulates dW += dY^T X and db += colsum(dY); writes dX = dY W when dX is given.
template <typename S, typename XT, typename DYT>
inline void linear_backward(const Eigen::MatrixBase<XT>& X, const MatMap<S>& W,
                            const Eigen::MatrixBase<DYT>& dY, MatMap<S> dW, S* db,
                            Mat<S>* dX) {
  dW.noalias() += dY.transpose() * X;
  if (db) VecMap<S>(db, W.rows()) += dY.colwise().sum().transpose();
  if (dX) dX->noalias() = dY * W;
}

// RMSNorm over each row: Y = X ⊙ w / sqrt(mean(X²) + eps). Saves 1/rms per row
// in rstd (M) for the backward.
template <typename S>
inline void rmsnorm_forward(const Mat<S>& X, const S* w, Mat<S>& Y, Vec<S>& rstd) {
  const auto n = X.cols();
  Y.resize(X.rows(), n);
  rstd.resize(X.rows());
  ConstVecMap<S> wv(w, n);
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const S r = S(1) / std::sqrt(X.row(i).squaredNorm() / S(n) + S(kNormEps));
    rstd[i] = r;
    Y.row(i) = (X.row(i).array() * wv.transpose().array() * r).matrix();
  }
}

// dX = r g - X r³ (X·g)/n with g = w ⊙ dY; dw += colsum(dY ⊙ X r).
template <typename S>
inline void rmsnorm_backward(const Mat<S>& X, const S* w, const Vec<S>& rstd, const Mat<S>& dY,
                             Mat<S>& dX, S* dw) {
  const auto n = X.cols();
  dX.resize(X.rows(), n);
  ConstVecMap<S> wv(w, n);
  VecMap<S> dwv(dw, n);
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const S r = rstd[i];
    const RowVec<S> g = (dY.row(i).array() * wv.transpose().array()).matrix();
    const S dot = X.row(i).dot(g);
    dX.row(i) = r * g - X.row(i) * (r * r * r * dot / S(n));
    dwv += (dY.row(i).array() * X.row(i).array() * r).matrix().transpose();
  }
}

// PyTorch nn.Linear default (kaiming_uniform with a=√5): weight and bias both
// uniform in ±1/sqrt(fan_in).
template <typename S>
inline void init_linear_default(S* w, S* b, int out, int in, Rng& rng) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  for (int i = 0; i < out * in; ++i) w[i] = static_cast<S>(rng.uniform(-bound, bound));
  if (b)
    for (int i = 0; i < out; ++i) b[i] = static_cast<S>(rng.uniform(-bound, bound));
}

// mamba_ssm's dt initialisation: dt log-uniform in [dt_min, dt_max], floored,
// stored as its inverse softplus so that softplus(bias) == dt at init.
template <typename S>
inline void init_dt_bias(S* bias, int n, double dt_min, double dt_max, double floor, Rng& rng) {
  for (int i = 0; i < n; ++i) {
    double dt = std::exp(rng.uniform(std::log(dt_min), std::log(dt_max)));
    if (dt < floor) dt = floor;
    bias[i] = static_cast<S>(dt + std::log(-std::expm1(-dt)));
  }
}

}  // namespace mambarl

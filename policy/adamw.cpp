#include "policy/adamw.hpp"

#include <cmath>

namespace mambarl {

template <typename S>
double clip_grad_norm(S* grads, size_t n, double max_norm) {
  double sq = 0;  // accumulate in double: a float sum over 1e6 terms loses digits
  for (size_t i = 0; i < n; ++i) sq += static_cast<double>(grads[i]) * grads[i];
  const double norm = std::sqrt(sq);
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm) {
    // PyTorch's clip_grad_norm_: scale by max_norm / (norm + 1e-6).
    const S scale = static_cast<S>(max_norm / (norm + 1e-6));
    for (size_t i = 0; i < n; ++i) grads[i] *= scale;
  }
  return norm;
}

template <typename S>
AdamW<S>::AdamW(const ParamLayout& layout, const AdamWConfig& cfg)
    : cfg_(cfg), m_(layout.size(), S(0)), v_(layout.size(), S(0)), decay_(layout.size(), S(0)) {
  for (const auto& p : layout.params())
    if (p.weight_decay)
      for (size_t i = 0; i < p.numel; ++i) decay_[p.offset + i] = S(1);
}

template <typename S>
void AdamW<S>::step(S* params, const S* grads, double lr) {
  ++t_;
  const double bc1 = 1.0 - std::pow(cfg_.beta1, static_cast<double>(t_));
  const double bc2 = 1.0 - std::pow(cfg_.beta2, static_cast<double>(t_));
  const S b1 = static_cast<S>(cfg_.beta1), b2 = static_cast<S>(cfg_.beta2);
  const S step_size = static_cast<S>(lr / bc1);
  const S inv_sqrt_bc2 = static_cast<S>(1.0 / std::sqrt(bc2));
  const S eps = static_cast<S>(cfg_.eps);
  const S wd = static_cast<S>(lr * cfg_.weight_decay);
  for (size_t i = 0; i < m_.size(); ++i) {
    const S g = grads[i];
    params[i] -= wd * decay_[i] * params[i];  // decoupled decay, before the Adam step (PyTorch order)
    m_[i] = b1 * m_[i] + (S(1) - b1) * g;
    v_[i] = b2 * v_[i] + (S(1) - b2) * g * g;
    params[i] -= step_size * m_[i] / (std::sqrt(v_[i]) * inv_sqrt_bc2 + eps);
  }
}

template class AdamW<float>;
template class AdamW<double>;
template double clip_grad_norm<float>(float*, size_t, double);
template double clip_grad_norm<double>(double*, size_t, double);

}  // namespace mambarl

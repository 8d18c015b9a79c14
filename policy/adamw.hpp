// AdamW (Loshchilov & Hutter: decoupled weight decay, bias-corrected moments)
// and global grad-norm clipping over the flat parameter buffer. Weight decay
// applies only where the layout says so (no decay on A_log, D, dt biases,
// norm weights and biases, as mamba_ssm). Moments are float32/64 like the
// master weights whatever the compute dtype.
#pragma once

#include <vector>

#include "policy/param_layout.hpp"

namespace mambarl {

struct AdamWConfig {
  double lr = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;  // PyTorch's default; policy/MATH.md does not override it
  double weight_decay = 0.0;
  double max_grad_norm = 0.5;  // <= 0 disables clipping
};

// Scales grads so that their global L2 norm is at most max_norm; returns the
// norm before clipping (NaN/Inf propagate so the caller can refuse the step).
template <typename S>
double clip_grad_norm(S* grads, size_t n, double max_norm);

template <typename S>
class AdamW {
 public:
  AdamW(const ParamLayout& layout, const AdamWConfig& cfg);

  // One update with learning rate `lr` (the schedule lives with the caller).
  void step(S* params, const S* grads, double lr);

  long long step_count() const { return t_; }
  std::vector<S>& exp_avg() { return m_; }
  std::vector<S>& exp_avg_sq() { return v_; }
  const std::vector<S>& exp_avg() const { return m_; }
  const std::vector<S>& exp_avg_sq() const { return v_; }
  void set_step_count(long long t) { t_ = t; }
  const AdamWConfig& config() const { return cfg_; }

 private:
  AdamWConfig cfg_;
  std::vector<S> m_, v_;      // first and second moments, layout.size()
  std::vector<S> decay_;      // 1 where weight decay applies, else 0
  long long t_ = 0;
};

extern template class AdamW<float>;
extern template class AdamW<double>;
extern template double clip_grad_norm<float>(float*, size_t, double);
extern template double clip_grad_norm<double>(double*, size_t, double);

}  // namespace mambarl

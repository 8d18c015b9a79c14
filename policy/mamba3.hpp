// The Mamba-3 SISO mixer on the CPU (policy/MATH.md "Mamba-3 SISO mixer"): a
// trapezoidal-discretised SSM with data-dependent rotary angles on B/C, no
// conv, per-head scalar decay, carried (S, k_prev, v_prev, φ) per env.
//
// Heads are the SIMD lanes of the recurrence: inside forward/backward an env's
// state is held lane-major ((P*N, H) etc.), so every per-step operation is a
// lane-wise multiply-add with no horizontal sums. The carried state keeps the
// official (H, P, N) layout; the mixer transposes at chunk entry and exit.
//
// Parameter names follow the official state-spaces/mamba Mamba3 module
// (in_proj.weight, dt_bias, B_bias, C_bias, B_norm.weight, C_norm.weight, D,
// norm.weight, out_proj.weight) so a checkpoint maps onto it by name; the
// one shape difference is B_bias/C_bias, (H, N) here vs (H, 1, N) there.
#pragma once

#include <memory>
#include <string>

#include "policy/mixer.hpp"

namespace mambarl {

struct Mamba3Config {
  static constexpr int kMaxHeads = 256;  // the recurrence keeps per-head lanes on the stack
  int d_model = 0;             // D
  int d_state = 16;            // N
  int expand = 2;              // E = expand*D
  int headdim = 16;            // P; H = E / P
  int ngroups = 1;             // G; H % G == 0
  double rope_fraction = 0.5;  // 0.5 or 1.0; Na = floor(N * rope_fraction) / 2
  double a_floor = 1e-4;       // A <= -a_floor keeps every head decaying
  bool is_outproj_norm = false;
  double dt_min = 1e-3, dt_max = 1e-1, dt_init_floor = 1e-4;
  double out_proj_init_scale = 1.0;  // the model sets 1/sqrt(n_layers)

  // Throws mambarl::Error naming the field, e.g.
  // "mamba3.headdim (16) must divide d_inner (24)".
  void validate() const;
  int d_inner() const { return expand * d_model; }
  int nheads() const { return d_inner() / headdim; }
  // As the official module: floor(N * fraction), made even, halved.
  int num_rope_angles() const { return static_cast<int>(d_state * rope_fraction) / 2; }
  // z, x (E each), B, C (G*N each), dd_dt, dd_A, λ (H each), θ (Na).
  int in_proj_rows() const {
    return 2 * d_inner() + 2 * ngroups * d_state + 3 * nheads() + num_rope_angles();
  }
};

template <typename S>
class Mamba3Mixer final : public Mixer<S> {
 public:
  // prefix like "layers.0.mixer."; validates cfg and registers the parameters.
  Mamba3Mixer(const Mamba3Config& cfg, ParamLayout& layout, const std::string& prefix);

  std::string type() const override { return "mamba3"; }
  int d_model() const override { return cfg_.d_model; }
  // S (H×P×N), then k_prev (H×N), v_prev (H×P), φ (H×Na).
  size_t state_size() const override;
  const Mamba3Config& config() const { return cfg_; }

  void init_params(const ParamView<S>& P, Rng& rng) const override;
  std::unique_ptr<MixerCache> make_cache() const override;
  void forward(const ParamView<S>& P, const Mat<S>& U, const uint8_t* starts, int T, int B,
               S* state, size_t state_stride, Mat<S>& Y, MixerCache& cache) const override;
  void backward(const ParamView<S>& P, const Mat<S>& dY, MixerCache& cache,
                const ParamView<S>& G, Mat<S>& dU) const override;

 private:
  struct Cache;  // defined in mamba3.cpp
  Cache& cache_of(MixerCache& base) const;

  // Forward stages, in order; each reads what the previous ones left in the cache.
  void head_scalars_forward(const ParamView<S>& P, Cache& c) const;  // dt, A, λ, α, β, γ
  void angles_forward(S* state, size_t state_stride, Cache& c) const;  // φ scan, cos, sin
  void rotate_qk(const ParamView<S>& P, Cache& c) const;               // k, q
  void ssm_forward(const ParamView<S>& P, S* state, size_t state_stride, Cache& c) const;
  void gate_forward(const ParamView<S>& P, Cache& c) const;
  // Backward stages, in reverse order.
  void gate_backward(const ParamView<S>& P, const ParamView<S>& G, Cache& c) const;
  void ssm_backward(const ParamView<S>& P, const ParamView<S>& G, Cache& c) const;
  void rotate_angles_backward(Cache& c) const;
  void head_scalars_backward(const ParamView<S>& G, Cache& c) const;
  void bc_backward(const ParamView<S>& P, const ParamView<S>& G, Cache& c) const;

  Mamba3Config cfg_;
  int D_, E_, N_, P_, H_, G_, Na_, R_;        // R_ = in_proj rows
  int o_x_, o_b_, o_c_, o_dt_, o_a_, o_lam_, o_th_;  // column offsets into in_proj output
  ParamId in_proj_, dt_bias_, b_bias_, c_bias_, b_norm_, c_norm_, d_skip_, norm_ = -1, out_proj_;
};

extern template class Mamba3Mixer<float>;
extern template class Mamba3Mixer<double>;

}  // namespace mambarl

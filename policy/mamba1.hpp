// The Mamba-1 selective-SSM mixer on the CPU (policy/MATH.md "Mamba-1 mixer"):
// in_proj -> causal depthwise conv -> silu -> input-dependent (Δ, B, C) ->
// diagonal SSM scan over E channels × N states -> skip D -> silu(z) gate ->
// out_proj, with the SSM state H and the conv window carried per env.
//
// Parameter names follow mamba_ssm's Mamba module (in_proj.weight,
// conv1d.weight, conv1d.bias, x_proj.weight, dt_proj.weight, dt_proj.bias,
// A_log, D, out_proj.weight) so a checkpoint maps onto it by name; the one
// shape difference is conv1d.weight, (E, d_conv) here vs (E, 1, d_conv) there.
#pragma once

#include <memory>
#include <string>

#include "policy/mixer.hpp"

namespace mambarl {

struct Mamba1Config {
  int d_model = 0;   // D
  int d_state = 16;  // N
  int d_conv = 4;
  int expand = 2;    // E = expand * D
  int dt_rank = 0;   // R; 0 means ceil(D / 16)
  double dt_min = 1e-3, dt_max = 1e-1, dt_init_floor = 1e-4;
  // A starts at -a_init_scale * (n + 1) for state n: 1 is mamba_ssm's S4D-real.
  double a_init_scale = 1.0;
  // The model sets 1/sqrt(n_layers) (mamba_ssm's prenorm-residual rescale).
  double out_proj_init_scale = 1.0;

  // Throws mambarl::Error naming the field, e.g.
  // "mamba1.d_state must be in [1, 256], got 0".
  void validate() const;
  int d_inner() const { return expand * d_model; }
  int resolved_dt_rank() const { return dt_rank > 0 ? dt_rank : (d_model + 15) / 16; }
};

template <typename S>
class Mamba1Mixer final : public Mixer<S> {
 public:
  // prefix like "layers.0.mixer."; validates cfg and registers the parameters.
  Mamba1Mixer(const Mamba1Config& cfg, ParamLayout& layout, const std::string& prefix);

  std::string type() const override { return "mamba1"; }
  int d_model() const override { return D_; }
  // H (E×N, e-major), then the conv window: the last d_conv-1 x values, (d_conv-1)×E, oldest first.
  size_t state_size() const override;
  const Mamba1Config& config() const { return cfg_; }

  void init_params(const ParamView<S>& P, Rng& rng) const override;
  std::unique_ptr<MixerCache> make_cache() const override;
  void forward(const ParamView<S>& P, const Mat<S>& U, const uint8_t* starts, int T, int B,
               S* state, size_t state_stride, Mat<S>& Y, MixerCache& cache) const override;
  void backward(const ParamView<S>& P, const Mat<S>& dY, MixerCache& cache,
                const ParamView<S>& G, Mat<S>& dU) const override;

 private:
  struct Cache;  // defined in mamba1.cpp
  Cache& cache_of(MixerCache& base) const;

  // Forward stages, in order; each reads what the previous ones left in the cache.
  void conv_forward(const ParamView<S>& P, S* state, size_t state_stride, Cache& c) const;
  void dt_forward(const ParamView<S>& P, Cache& c) const;  // δ, B, C, Δ, Δ⊙xc
  void scan_forward(const ParamView<S>& P, S* state, size_t state_stride, Cache& c) const;
  // Backward stages, in reverse order.
  void scan_backward(const ParamView<S>& P, const ParamView<S>& G, Cache& c) const;
  void dt_backward(const ParamView<S>& P, const ParamView<S>& G, Cache& c) const;
  void conv_backward(const ParamView<S>& P, const ParamView<S>& G, Cache& c) const;

  // Where the conv tap at time ts reads x from, for a token whose segment
  // (since its env's last start) begins at first_valid: a row of x, a row of
  // the initial window, or nullptr for a zero (before a start).
  const S* conv_source(const Cache& c, int ts, int b, int first_valid) const;

  Mamba1Config cfg_;
  int D_, E_, N_, K_, R_;  // d_model, d_inner, d_state, d_conv, dt_rank
  ParamId in_proj_, conv_w_, conv_b_, x_proj_, dt_proj_w_, dt_proj_b_, a_log_, d_skip_, out_proj_;
};

extern template class Mamba1Mixer<float>;
extern template class Mamba1Mixer<double>;

}  // namespace mambarl

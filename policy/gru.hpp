// The GRU baseline mixer on the CPU: one nn.GRU layer with hidden size D, so
// the output of step t is the hidden state itself (Y_t = h_t). It gives the
// results tables a classic recurrent row next to the Mamba blocks, inside the
// same pre-norm residual model (h += Mixer(RMSNorm(h))).
//
//   r  = σ(W_ir u + b_ir + W_hr h + b_hr)
//   z  = σ(W_iz u + b_iz + W_hz h + b_hz)
//   n  = tanh(W_in u + b_in + r ⊙ (W_hn h + b_hn))
//   h' = (1 - z) ⊙ n + z ⊙ h
//
// Parameter names, shapes and the gate order (r, z, n) are PyTorch's
// (weight_ih_l0 etc. without the "_l0"), so a checkpoint maps onto nn.GRU.
#pragma once

#include <memory>
#include <string>

#include "policy/mixer.hpp"

namespace mambarl {

struct GruConfig {
  int d_model = 0;  // D, also the hidden size

  // Throws mambarl::Error naming the field, e.g. "gru.d_model must be >= 1, got 0".
  void validate() const;
};

template <typename S>
class GruMixer final : public Mixer<S> {
 public:
  // prefix like "layers.0.mixer."; validates cfg and registers the parameters.
  GruMixer(const GruConfig& cfg, ParamLayout& layout, const std::string& prefix);

  std::string type() const override { return "gru"; }
  int d_model() const override { return D_; }
  size_t state_size() const override { return static_cast<size_t>(D_); }  // h (D)
  const GruConfig& config() const { return cfg_; }

  // PyTorch's GRU init: every tensor uniform in ±1/sqrt(D).
  void init_params(const ParamView<S>& P, Rng& rng) const override;
  std::unique_ptr<MixerCache> make_cache() const override;
  void forward(const ParamView<S>& P, const Mat<S>& U, const uint8_t* starts, int T, int B,
               S* state, size_t state_stride, Mat<S>& Y, MixerCache& cache) const override;
  void backward(const ParamView<S>& P, const Mat<S>& dY, MixerCache& cache,
                const ParamView<S>& G, Mat<S>& dU) const override;

 private:
  struct Cache;  // defined in gru.cpp
  Cache& cache_of(MixerCache& base) const;

  GruConfig cfg_;
  int D_;
  ParamId w_ih_, w_hh_, b_ih_, b_hh_;
};

extern template class GruMixer<float>;
extern template class GruMixer<double>;

}  // namespace mambarl

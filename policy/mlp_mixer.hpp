// The memory-less baseline mixer: a per-token two-layer MLP,
//   Y = W2 silu(W1 U + b1) + b2,   hidden width E = expand * D,
// in the same pre-norm residual slot as the Mamba blocks. It carries no state
// (state_size() == 0) and ignores the starts flags, so whatever it scores
// on a task is what a policy can do without memory: the floor of the
// results tables. Parameter names are nn.Linear's under fc1 / fc2.
#pragma once

#include <memory>
#include <string>

#include "policy/mixer.hpp"

namespace mambarl {

struct MlpConfig {
  int d_model = 0;  // D
  int expand = 2;   // E = expand * D

  // Throws mambarl::Error naming the field, e.g. "mlp.expand must be in [1, 8], got 0".
  void validate() const;
  int d_inner() const { return expand * d_model; }
};

template <typename S>
class MlpMixer final : public Mixer<S> {
 public:
  // prefix like "layers.0.mixer."; validates cfg and registers the parameters.
  MlpMixer(const MlpConfig& cfg, ParamLayout& layout, const std::string& prefix);

  std::string type() const override { return "mlp"; }
  int d_model() const override { return D_; }
  size_t state_size() const override { return 0; }
  const MlpConfig& config() const { return cfg_; }

  // nn.Linear's default init for fc1 and fc2.
  void init_params(const ParamView<S>& P, Rng& rng) const override;
  std::unique_ptr<MixerCache> make_cache() const override;
  // starts and state are not read (state may be null).
  void forward(const ParamView<S>& P, const Mat<S>& U, const uint8_t* starts, int T, int B,
               S* state, size_t state_stride, Mat<S>& Y, MixerCache& cache) const override;
  void backward(const ParamView<S>& P, const Mat<S>& dY, MixerCache& cache,
                const ParamView<S>& G, Mat<S>& dU) const override;

 private:
  struct Cache;  // defined in mlp_mixer.cpp
  Cache& cache_of(MixerCache& base) const;

  MlpConfig cfg_;
  int D_, E_;
  ParamId fc1_w_, fc1_b_, fc2_w_, fc2_b_;
};

extern template class MlpMixer<float>;
extern template class MlpMixer<double>;

}  // namespace mambarl

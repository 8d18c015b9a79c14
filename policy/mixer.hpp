// The sequence-mixer interface every recurrent block implements (Mamba-1,
// Mamba-3 SISO, and the GRU / MLP baselines).
//
// A mixer maps the normed residual stream U (T*B, D) to Y (T*B, D) while
// carrying a recurrent state per env. One entry point serves both roles:
// the actor's T=1 step is forward() with T=1 on the carried state, and the
// learner's chunk is forward() with T>1 from the stored initial state; so
// "T steps == one chunk" holds by construction of the state hand-off, and the
// tests check that hand-off (conv window, angles, k/v_prev) explicitly.
//
// Resets: starts[t*B+b] = 1 zeroes env b's state before step t, for this env
// only (policy/MATH.md, "Episode boundaries"). The backward pass sends no gradient
// through a reset and none into the initial state (it is data in PPO).
//
// State layout: the state of one env for one layer is state_size() contiguous
// scalars; env b's slice starts at state + b * state_stride (the model packs
// all layers of one env into one row). Every state component resets to zero,
// so reset-by-mask is a memset of the slice and needs no mixer code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/base/rng.hpp"
#include "policy/param_layout.hpp"
#include "policy/tensor.hpp"

namespace mambarl {

// What forward() saves for backward(). Each mixer derives its own; caches
// are reused across calls so that, once shapes are stable, no call allocates.
struct MixerCache {
  virtual ~MixerCache() = default;
};

template <typename S>
class Mixer {
 public:
  virtual ~Mixer() = default;

  virtual std::string type() const = 0;  // "mamba1", "mamba3", "gru", "mlp"
  virtual int d_model() const = 0;
  virtual size_t state_size() const = 0;  // scalars per env for this layer (may be 0)

  // Fills this mixer's slices of the flat parameter buffer (mamba_ssm rules).
  virtual void init_params(const ParamView<S>& P, Rng& rng) const = 0;

  virtual std::unique_ptr<MixerCache> make_cache() const = 0;

  //   U      (T*B, D)  normed input, row t*B + b
  //   starts (T*B)     episode_start flag of env b at step t (0 or 1)
  //   state  env b's slice at state + b*state_stride; in: before t=0, out: after t=T-1
  //   Y      (T*B, D)  output, resized by the callee
  virtual void forward(const ParamView<S>& P, const Mat<S>& U, const uint8_t* starts, int T,
                       int B, S* state, size_t state_stride, Mat<S>& Y,
                       MixerCache& cache) const = 0;

  // Backward of the last forward() run on `cache`: accumulates parameter
  // gradients into G (same layout as P) and writes dU (T*B, D).
  virtual void backward(const ParamView<S>& P, const Mat<S>& dY, MixerCache& cache,
                        const ParamView<S>& G, Mat<S>& dU) const = 0;
};

}  // namespace mambarl

// The recurrent actor-critic model (policy/MATH.md "Actor-critic model"):
//   h⁰ = W_obs o + b_obs (+ e_start at an episode's first step);  hˡ⁺¹ = hˡ + Mixerˡ(RMSNorm(hˡ; wˡ));  f = RMSNorm(h^L; w_f)
//   head = W_π f + b_π (logits, or the Gaussian mean; log σ a parameter);  V = W_v f + b_v
// The mixer of every layer comes from a factory, so Mamba-1, Mamba-3, GRU and
// MLP all share this one model, its heads, its checkpoint names and its tests.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "policy/mixer.hpp"

namespace mambarl {

struct HeadSpec {
  bool discrete = true;
  int action_dim = 0;  // discrete: number of actions; continuous: action dimensions
  int act_width() const { return discrete ? 1 : action_dim; }  // floats per action
};

struct ActorCriticSpec {
  int obs_dim = 0;
  HeadSpec head;
  int d_model = 0;
  int n_layers = 0;
  double log_std_init = 0.0;  // continuous heads only
  // A learned vector e_start added to h⁰ at each episode's first step
  // (policy.start_embedding): it tells the blocks where an episode begins.
  // Mamba's write gates (dt, B) depend on the current input only, so without
  // it a Mamba-3 layer cannot store "the first observation" and nothing
  // after it (POPGym RepeatFirst; policy/MATH.md "Episode-start embedding").
  bool start_embedding = false;
  void validate() const;
};

template <typename S>
class ActorCritic {
 public:
  using MixerFactory =
      std::function<std::unique_ptr<Mixer<S>>(ParamLayout& layout, const std::string& prefix)>;

  ActorCritic(const ActorCriticSpec& spec, const MixerFactory& make_mixer);

  const ActorCriticSpec& spec() const { return spec_; }
  const ParamLayout& layout() const { return layout_; }
  const Mixer<S>& mixer(int l) const { return *mixers_[static_cast<size_t>(l)]; }
  size_t state_size() const { return state_size_; }  // scalars per env, all layers
  size_t layer_state_offset(int l) const { return state_offsets_[static_cast<size_t>(l)]; }

  // Fills the whole flat parameter buffer, reproducibly from `seed`.
  void init_params(S* params, uint64_t seed) const;

  // Everything forward() keeps for backward(); reused across calls.
  struct Cache {
    std::vector<Mat<S>> h;       // L+1 residual streams, each (T*B, D)
    std::vector<Mat<S>> normed;  // L pre-mixer norms, (T*B, D)
    std::vector<Vec<S>> rstd;    // L, (T*B)
    std::vector<std::unique_ptr<MixerCache>> mixer;
    Mat<S> mix_out;              // (T*B, D) scratch
    Mat<S> f;                    // (T*B, D) final norm output
    Vec<S> rstd_f;               // (T*B)
    Mat<S> obs;                  // (T*B, obs_dim) copy of the input, for dW_obs
    std::vector<uint8_t> starts; // (T*B) copy of the episode starts, for de_start (start embedding only)
    // backward scratch
    Mat<S> dh, dn, dmix;         // (T*B, D)
  };
  Cache make_cache() const;

  //   obs    (T*B, obs_dim)    row t*B + b
  //   starts (T*B)             episode_start flags
  //   state  (B, state_size()) in: before t=0; out: after the last step
  //   head   (T*B, action_dim) logits or Gaussian mean;  values (T*B)
  void forward(const S* params, const Mat<S>& obs, const uint8_t* starts, int T, int B, S* state,
               Cache& cache, Mat<S>& head, Vec<S>& values) const;

  // Accumulates into grads (flat, same layout) the gradient of a loss whose
  // derivatives w.r.t. head and values are dhead (T*B, A) and dvalues (T*B).
  // The value head gets all of dvalues; the layers below it (shared with
  // the policy head) get value_trunk_coef · dvalues, so 1 is the exact
  // gradient and 0 keeps the value loss out of them.
  // (The loss adds its own log σ gradient.)
  void backward(const S* params, Cache& cache, const Mat<S>& dhead, const Vec<S>& dvalues,
                double value_trunk_coef, S* grads) const;

  // Zeroes the recurrent state of every env b with mask[b] != 0.
  void reset_state(S* state, int B, const uint8_t* mask) const;

  ParamId log_std_id() const { return log_std_; }  // -1 for discrete heads

 private:
  ActorCriticSpec spec_;
  ParamLayout layout_;
  std::vector<std::unique_ptr<Mixer<S>>> mixers_;
  std::vector<size_t> state_offsets_;
  size_t state_size_ = 0;
  ParamId obs_w_, obs_b_, start_embed_ = -1, norm_f_, pi_w_, pi_b_, v_w_, v_b_, log_std_ = -1;
  std::vector<ParamId> norm_w_;
};

extern template class ActorCritic<float>;
extern template class ActorCritic<double>;

}  // namespace mambarl

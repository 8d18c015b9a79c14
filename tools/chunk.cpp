#include "tools/chunk.hpp"

namespace mambarl {

void Chunk::allocate(int T_, int B_, int obs_dim_, int act_width_, size_t state_size_, int context_T_) {
  T = T_, B = B_, obs_dim = obs_dim_, act_width = act_width_, state_size = state_size_, context_T = context_T_;
  const size_t n = static_cast<size_t>(T) * B;
  obs.assign(n * obs_dim, 0.0f);
  actions.assign(n * act_width, 0.0f);
  for (auto* v : {&logp, &values, &rewards, &final_values, &advantages, &returns}) v->assign(n, 0.0f);
  for (auto* v : {&starts, &terminated, &truncated}) v->assign(n, 0);
  next_values.assign(static_cast<size_t>(B), 0.0f);
  initial_state.assign(static_cast<size_t>(B) * state_size, 0.0f);
  context_obs.assign(static_cast<size_t>(context_T) * B * obs_dim, 0.0f);
  context_starts.assign(static_cast<size_t>(context_T) * B, 0);
}

}  // namespace mambarl

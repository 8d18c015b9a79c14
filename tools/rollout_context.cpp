#include "tools/rollout_context.hpp"

#include <algorithm>

#include "kernels/base/check.hpp"

namespace mambarl {

RolloutContext::RolloutContext(int chunk_len, int context_T, int B, int obs_dim, size_t state_size)
    : T_(chunk_len), context_T_(context_T) {
  MAMBARL_CHECK(chunk_len >= 1 && context_T >= 0 && context_T % chunk_len == 0,
                "RolloutContext: " << context_T << " context steps are not whole chunks of " << chunk_len);
  const size_t rows = static_cast<size_t>(context_T) * B;
  obs_.assign(rows * obs_dim, 0.0f);
  starts_.assign(rows, 0);
  states_.assign(static_cast<size_t>(context_T / chunk_len) * B * state_size, 0.0f);
}

void RolloutContext::fill(Chunk& c, const std::vector<float>& chunk_start) const {
  MAMBARL_CHECK(c.context_T == context_T_ && c.T == T_,
                "a chunk of T=" << c.T << " with " << c.context_T << " context steps for a rollout of T=" << T_
                                << " with " << context_T_);
  c.context_obs = obs_;
  c.context_starts = starts_;
  c.initial_state.assign(states_.begin(), states_.begin() + static_cast<std::ptrdiff_t>(chunk_start.size()));
}

void RolloutContext::push(const Chunk& c, const std::vector<float>& chunk_start) {
  // Left shifts by one chunk (std::copy is safe when the target starts
  // before the source), then the new chunk at the end.
  const auto roll = [](auto& hist, const auto& newest) {
    std::copy(hist.begin() + static_cast<std::ptrdiff_t>(newest.size()), hist.end(), hist.begin());
    std::copy(newest.begin(), newest.end(), hist.end() - static_cast<std::ptrdiff_t>(newest.size()));
  };
  roll(obs_, c.obs);
  roll(starts_, c.starts);
  roll(states_, chunk_start);
}

}  // namespace mambarl

#include "tools/rollout.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/base/check.hpp"

namespace mambarl {

namespace {

// The lanes' parts of one piece of worker state, in column order. Parts of
// unequal size could not be split again on load, so they are refused here.
template <typename T, typename Lanes, typename Get>
std::vector<T> concat_parts(const Lanes& lanes, const char* what, Get get) {
  std::vector<T> all, part;
  for (size_t l = 0; l < lanes.size(); ++l) {
    get(lanes[l], part);
    MAMBARL_CHECK(l == 0 || part.size() * l == all.size(),
                  what << ": lane " << l << " has " << part.size() << " elements, lane 0 " << all.size() / l);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

template <typename T, typename Lanes, typename Set>
void split_parts(Lanes& lanes, const std::vector<T>& all, const char* what, Set set) {
  MAMBARL_CHECK(all.size() % lanes.size() == 0,
                what << ": " << all.size() << " elements do not split into " << lanes.size() << " equal lanes");
  const size_t n = all.size() / lanes.size();
  for (size_t l = 0; l < lanes.size(); ++l) {
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(l * n);
    set(lanes[l], std::vector<T>(first, first + static_cast<std::ptrdiff_t>(n)));
  }
}

}  // namespace

RolloutWorker::RolloutWorker(std::vector<RolloutLane> lanes, int chunk_len, int context_T) {
  MAMBARL_CHECK(!lanes.empty(), "a rollout worker needs at least one lane");
  const int O = lanes[0].env->spec().obs_dim;
  for (auto& in : lanes) {
    Lane l;
    static_cast<RolloutLane&>(l) = std::move(in);
    l.col0 = B_;
    l.B = l.env->num_envs();
    MAMBARL_CHECK(l.actor->num_envs() == l.B, "lane " << lanes_.size() << ": an actor of " << l.actor->num_envs()
                                                      << " envs for " << l.B << " envs");
    MAMBARL_CHECK(lanes_.empty() || l.B == lanes_[0].B,
                  "lane " << lanes_.size() << " has " << l.B << " envs, lane 0 " << lanes_[0].B);
    B_ += l.B;
    lanes_.push_back(std::move(l));
  }
  obs_.assign(static_cast<size_t>(B_) * O, 0.0f);
  for (auto& l : lanes_) {
    l.env->reset(l.env_seed, l.first_env);
    std::copy(l.env->obs(), l.env->obs() + static_cast<size_t>(l.B) * O,
              obs_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(l.col0) * O));
  }
  peek_.assign(static_cast<size_t>(B_), 0.0f);
  starts_.assign(static_cast<size_t>(B_), 1);  // the first step of a run starts an episode
  if (context_T > 0)
    context_ = RolloutContext(chunk_len, context_T, B_, O, static_cast<size_t>(lanes_[0].actor->state_size()));
}

void RolloutWorker::set_weights(const std::vector<float>& weights, long long version) {
  for (auto& l : lanes_) l.actor->set_weights(weights, version);
}

std::vector<uint8_t> RolloutWorker::save_env_state() const {
  return concat_parts<uint8_t>(lanes_, "env state", [](const Lane& l, std::vector<uint8_t>& out) {
    out = l.env->save_state();
  });
}

void RolloutWorker::load_env_state(const std::vector<uint8_t>& bytes) {
  split_parts(lanes_, bytes, "env state", [](Lane& l, const std::vector<uint8_t>& part) { l.env->load_state(part); });
}

// Each lane's state straight into its rows of `state`: once per chunk, and
// hundreds of MB at tens of thousands of envs, so no temporaries.
void RolloutWorker::get_actor_state(std::vector<float>& state) {
  const size_t S = lanes_[0].actor->state_size();
  state.resize(static_cast<size_t>(B_) * S);
  for (const Lane& l : lanes_) l.actor->get_state(state.data() + static_cast<size_t>(l.col0) * S);
}

void RolloutWorker::set_actor_state(const std::vector<float>& state) {
  split_parts(lanes_, state, "actor state", [](Lane& l, const std::vector<float>& part) { l.actor->set_state(part); });
}

void RolloutWorker::get_actor_rng(std::vector<uint8_t>& bytes) {
  bytes = concat_parts<uint8_t>(lanes_, "actor rng", [](const Lane& l, std::vector<uint8_t>& out) {
    l.actor->get_rng(out);
  });
}

void RolloutWorker::set_actor_rng(const std::vector<uint8_t>& bytes) {
  split_parts(lanes_, bytes, "actor rng", [](Lane& l, const std::vector<uint8_t>& part) { l.actor->set_rng(part); });
}

void RolloutWorker::load_inputs(const Lane& l, Chunk& c, int t) {
  const size_t at = static_cast<size_t>(t) * B_ + static_cast<size_t>(l.col0);  // (t, col0) in (T, B)
  const auto first = static_cast<std::ptrdiff_t>(l.col0), n = static_cast<std::ptrdiff_t>(l.B);
  const auto O = static_cast<std::ptrdiff_t>(c.obs_dim);
  std::copy(obs_.begin() + first * O, obs_.begin() + (first + n) * O,
            c.obs.begin() + static_cast<std::ptrdiff_t>(at) * O);
  std::copy(starts_.begin() + first, starts_.begin() + first + n, c.starts.begin() + static_cast<std::ptrdiff_t>(at));
}

void RolloutWorker::begin_step(Lane& l, Chunk& c, int t) {
  load_inputs(l, c, t);
  // obs_/starts_ of this lane stay untouched until end_step: only record_step
  // of this same lane writes them, and it runs after end_step.
  l.actor->act_begin(obs_.data() + static_cast<size_t>(l.col0) * c.obs_dim, starts_.data() + l.col0);
  l.begun_t = t;
}

void RolloutWorker::end_step(Lane& l, Chunk& c, int t) {
  const size_t at = static_cast<size_t>(t) * B_ + static_cast<size_t>(l.col0);
  l.begun_t = -1;  // act_end ends the step even when it fails
  l.actor->act_end(c.actions.data() + at * c.act_width, c.logp.data() + at, c.values.data() + at);
}

// Everything after the actor's step, the same for one lane and several: step
// the lane's envs with the actions of row t, record rewards, flags and
// finished episodes, bootstrap truncated envs, and take the next observation.
void RolloutWorker::record_step(Lane& l, Chunk& c, int t) {
  const size_t at = static_cast<size_t>(t) * B_ + static_cast<size_t>(l.col0);
  l.env->step(c.actions.data() + at * c.act_width);
  env_steps_.fetch_add(l.B, std::memory_order_relaxed);
  const float* r = l.env->reward();
  const uint8_t* term = l.env->terminated();
  const uint8_t* trunc = l.env->truncated();
  bool any_trunc = false;
  for (int b = 0; b < l.B; ++b) {
    c.rewards[at + b] = r[b];
    c.terminated[at + b] = term[b];
    c.truncated[at + b] = trunc[b];
    c.final_values[at + b] = 0.0f;
    any_trunc = any_trunc || trunc[b];
    starts_[static_cast<size_t>(l.col0 + b)] = term[b] || trunc[b];
    if (term[b] || trunc[b]) {
      c.episode_returns.push_back(l.env->episode_return()[b]);
      c.episode_lengths.push_back(l.env->episode_length()[b]);
    }
  }
  // A time limit is not a terminal state: bootstrap from V(final obs),
  // evaluated on the state that saw the episode (before the reset).
  float* peek = peek_.data() + l.col0;
  if (any_trunc) {
    l.actor->peek_values(l.env->final_obs(), trunc, peek);
    for (int b = 0; b < l.B; ++b)
      if (trunc[b]) c.final_values[at + b] = peek[b];
  }
  std::copy(l.env->obs(), l.env->obs() + static_cast<size_t>(l.B) * c.obs_dim,
            obs_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(l.col0) * c.obs_dim));
}

void RolloutWorker::end_begun_steps(Chunk& c) noexcept {
  for (auto& l : lanes_)
    if (l.begun_t >= 0) try {
        end_step(l, c, l.begun_t);
      } catch (const std::exception&) {
        // The failure being reported is the first one; this actor's own error adds nothing.
      }
}

void RolloutWorker::collect(Chunk& c) {
  MAMBARL_CHECK(c.B == B_, "a chunk of " << c.B << " envs for a worker of " << B_);
  const bool context = context_.context_T() > 0;
  if (context) {
    get_actor_state(chunk_start_);
    context_.fill(c, chunk_start_);
  } else {
    get_actor_state(c.initial_state);
  }
  c.policy_version = lanes_[0].actor->weights_version();
  c.episode_returns.clear();
  c.episode_lengths.clear();
  const bool split = lanes_.size() > 1;
  try {
    if (split)
      for (auto& l : lanes_) begin_step(l, c, 0);
    for (int t = 0; t < c.T; ++t)
      for (auto& l : lanes_) {
        if (split) {
          end_step(l, c, t);
        } else {
          const size_t at = static_cast<size_t>(t) * B_;
          load_inputs(l, c, t);
          l.actor->act(obs_.data(), starts_.data(), c.actions.data() + at * c.act_width, c.logp.data() + at,
                       c.values.data() + at);
        }
        record_step(l, c, t);
        // The pipeline drains at the chunk's end: the next chunk may come with new weights.
        if (split && t + 1 < c.T) begin_step(l, c, t + 1);
      }
  } catch (...) {
    end_begun_steps(c);
    throw;
  }
  for (auto& l : lanes_)
    l.actor->peek_values(obs_.data() + static_cast<size_t>(l.col0) * c.obs_dim, nullptr,
                         c.next_values.data() + l.col0);
  if (context) context_.push(c, chunk_start_);
}

}  // namespace mambarl

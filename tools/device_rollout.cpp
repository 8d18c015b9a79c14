#include "tools/device_rollout.hpp"

#include "kernels/gae.cuh"
#include "kernels/graph_if_any.cuh"
#include "kernels/return_norm.cuh"
#include "kernels/reward_scale.cuh"
#include "kernels/rollout_record.cuh"
#include "tools/return_normalizer.hpp"

namespace mambarl {

DeviceChunk::DeviceChunk(int T_, int B_, int obs_dim_, int act_width_, size_t state_size_, int context_T_)
    : T(T_), B(B_), obs_dim(obs_dim_), act_width(act_width_), context_T(context_T_), state_size(state_size_) {
  MAMBARL_CHECK(context_T >= 0 && context_T % T == 0,
                "DeviceChunk: " << context_T << " context steps are not whole chunks of " << T);
  const size_t n = static_cast<size_t>(T) * B, window = static_cast<size_t>(context_T + T) * B;
  obs = DeviceBuffer<float>(window * obs_dim);
  actions = DeviceBuffer<float>(n * act_width);
  logp = DeviceBuffer<float>(n);
  values = DeviceBuffer<float>(n);
  rewards = DeviceBuffer<float>(n);
  starts = DeviceBuffer<uint8_t>(window);
  terminated = DeviceBuffer<uint8_t>(n);
  truncated = DeviceBuffer<uint8_t>(n);
  final_values = DeviceBuffer<float>(n);
  next_values = DeviceBuffer<float>(static_cast<size_t>(B));
  initial_state = DeviceBuffer<float>(static_cast<size_t>(context_chunks() + 1) * B * state_size);
  advantages = DeviceBuffer<float>(n);
  returns = DeviceBuffer<float>(n);
  episode_return = DeviceBuffer<float>(n);
  episode_length = DeviceBuffer<int32_t>(n);
}

void DeviceChunk::copy_from(const DeviceChunk& from, cudaStream_t s) {
  MAMBARL_CHECK(from.T == T && from.B == B && from.obs_dim == obs_dim && from.act_width == act_width &&
                    from.context_T == context_T && from.state_size == state_size,
                "DeviceChunk::copy_from: a chunk of another shape");
  const auto copy = [&](auto& to, const auto& src) {
    MAMBARL_CUDA_CHECK(cudaMemcpyAsync(to.data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice, s));
  };
  copy(obs, from.obs);
  copy(actions, from.actions);
  copy(logp, from.logp);
  copy(values, from.values);
  copy(rewards, from.rewards);
  copy(starts, from.starts);
  copy(terminated, from.terminated);
  copy(truncated, from.truncated);
  copy(final_values, from.final_values);
  copy(next_values, from.next_values);
  copy(initial_state, from.initial_state);
  copy(advantages, from.advantages);
  copy(returns, from.returns);
  copy(episode_return, from.episode_return);
  copy(episode_length, from.episode_length);
}

DeviceRollout::DeviceRollout(std::unique_ptr<GpuVecEnv> env, std::unique_ptr<ActorHandle> actor,
                             uint64_t env_seed, int chunk_len, const AlgoConfig& algo, size_t state_size)
    : env_(std::move(env)),
      actor_(std::move(actor)),
      algo_(algo),
      B_(env_->num_envs()),
      O_(env_->spec().obs_dim),
      chunk_(chunk_len, B_, O_, action_width(env_->spec().action), state_size, algo.context_len()),
      starts_(static_cast<size_t>(B_)),
      peek_(static_cast<size_t>(B_)),
      scaler_(3 + static_cast<size_t>(B_)),
      return_stats_(3),
      terminated_h_(static_cast<size_t>(chunk_len) * B_),
      truncated_h_(static_cast<size_t>(chunk_len) * B_),
      episode_return_h_(static_cast<size_t>(chunk_len) * B_),
      episode_length_h_(static_cast<size_t>(chunk_len) * B_) {
  MAMBARL_CHECK(actor_->num_envs() == B_,
                "DeviceRollout: the actor has " << actor_->num_envs() << " envs, the GPU env " << B_);
  const cudaStream_t s = stream();
  env_->reset(env_seed, s);
  MAMBARL_CUDA_CHECK(cudaMemsetAsync(starts_.data(), 1, starts_.bytes(), s));  // the run's first step starts episodes
  // The context before the first chunk: zeros, which the first step's reset
  // keeps out of the loss and the gradient (tools/rollout_context.hpp).
  MAMBARL_CUDA_CHECK(cudaMemsetAsync(chunk_.obs.data(), 0, chunk_.obs.bytes(), s));
  MAMBARL_CUDA_CHECK(cudaMemsetAsync(chunk_.starts.data(), 0, chunk_.starts.bytes(), s));
  MAMBARL_CUDA_CHECK(cudaMemsetAsync(chunk_.initial_state.data(), 0, chunk_.initial_state.bytes(), s));
  std::vector<double> scaler(scaler_.size(), 0.0);
  scaler[1] = 1.0;  // RewardScaler's initial (mean 0, var 1, count 0)
  set_reward_scaler_state(scaler);  // synchronises the stream
  set_return_normalizer_state(ReturnNormalizer().state());
  (void)cuda::graph_conditionals_supported();  // probed here, not first inside the chunk's capture
}

DeviceRollout::~DeviceRollout() {
  if (in_flight_) (void)cudaStreamSynchronize(stream());  // a destructor reports nothing
}

// Block k + 1 of the window into block k, oldest first (so each source is
// read before it is overwritten): the last chunk becomes context.
void DeviceRollout::shift_window(cudaStream_t s) {
  DeviceChunk& c = chunk_;
  const size_t rows = static_cast<size_t>(c.T) * B_, states = static_cast<size_t>(B_) * c.state_size;
  const auto move = [&](auto* base, size_t block) {
    for (int k = 0; k < c.context_chunks(); ++k)
      MAMBARL_CUDA_CHECK(cudaMemcpyAsync(base + k * block, base + (k + 1) * block, block * sizeof(*base),
                                         cudaMemcpyDeviceToDevice, s));
  };
  move(c.obs.data(), rows * O_);
  move(c.starts.data(), rows);
  if (states) move(c.initial_state.data(), states);
}

void DeviceRollout::record(cudaStream_t s) {
  DeviceChunk& c = chunk_;
  const int B = B_, O = O_, W = c.act_width;
  shift_window(s);
  actor_->enqueue_get_state(s, c.initial_state.data() + static_cast<size_t>(c.context_chunks()) * B * c.state_size);
  for (int t = 0; t < c.T; ++t) {
    const size_t row = static_cast<size_t>(t) * B, window_row = static_cast<size_t>(c.context_T + t) * B;
    float* obs_t = c.obs.data() + window_row * O;
    uint8_t* starts_t = c.starts.data() + window_row;
    float* act_t = c.actions.data() + row * W;
    MAMBARL_CUDA_CHECK(cudaMemcpyAsync(obs_t, env_->obs(), sizeof(float) * B * O, cudaMemcpyDeviceToDevice, s));
    MAMBARL_CUDA_CHECK(cudaMemcpyAsync(starts_t, starts_.data(), starts_.bytes(), cudaMemcpyDeviceToDevice, s));
    actor_->enqueue_act(s, obs_t, starts_t, act_t, c.logp.data() + row, c.values.data() + row);
    env_->step(act_t, s);
    // A time limit is not a terminal state: bootstrap from V(final obs), on
    // the state that saw the episode (the reset happens at the next act), for
    // the truncated envs only (record_env_step keeps no other final value),
    // and only on steps where some env truncated.
    cuda::capture_if_any(s, peek_stream_.get(), env_->truncated(), B, [&](cudaStream_t ps) {
      actor_->enqueue_peek_values(ps, env_->final_obs(), env_->truncated(), peek_.data());
    });
    cuda::EnvStepRecord r;
    r.B = B;
    r.reward = env_->reward();
    r.terminated = env_->terminated();
    r.truncated = env_->truncated();
    r.episode_return = env_->episode_return();
    r.episode_length = env_->episode_length();
    r.final_value = peek_.data();
    r.row_reward = c.rewards.data() + row;
    r.row_terminated = c.terminated.data() + row;
    r.row_truncated = c.truncated.data() + row;
    r.row_final_value = c.final_values.data() + row;
    r.row_episode_return = c.episode_return.data() + row;
    r.row_episode_length = c.episode_length.data() + row;
    r.next_starts = starts_.data();
    cuda::record_env_step(r, s);
  }
  actor_->enqueue_peek_values(s, env_->obs(), nullptr, c.next_values.data());
  if (algo_.normalize_rewards) {
    cuda::RewardScaleArgs a;
    a.T = c.T;
    a.B = B;
    a.rewards = c.rewards.data();
    a.terminated = c.terminated.data();
    a.truncated = c.truncated.data();
    a.stats = scaler_.data();
    a.returns = scaler_.data() + 3;
    cuda::scale_rewards(a, algo_.gamma, s);
  }
  if (algo_.normalize_returns)
    for (auto* v : {&c.values, &c.final_values, &c.next_values})
      cuda::denormalize_values(v->data(), v->size(), return_stats_.data(), s);
  const GaeInputs g{c.T, B, c.rewards.data(), c.values.data(), c.terminated.data(), c.truncated.data(),
                    c.final_values.data(), c.next_values.data()};
  cuda::gae(g, algo_.gamma, algo_.gae_lambda, c.advantages.data(), c.returns.data(), s);
  if (algo_.normalize_returns) cuda::normalize_returns(c.returns.data(), c.returns.size(), return_stats_.data(), s);
}

void DeviceRollout::launch() {
  MAMBARL_CHECK(!in_flight_, "DeviceRollout::launch: the last chunk was not finished");
  const cudaStream_t s = stream();
  // The actor's host-side calls since the last chunk (set_weights; set_state
  // and set_rng on a resume) synchronise its own stream before returning
  // (plugin/plugin_host.hpp), and our stream was synchronised at the end of
  // the last chunk (finish), so the two never overlap.
  if (!graph_.captured()) {
    const DeviceChunk& c = chunk_;
    graph_.capture(s,
                   {GraphBinding::buffer("obs", c.obs), GraphBinding::buffer("actions", c.actions),
                    GraphBinding::buffer("rewards", c.rewards), GraphBinding::buffer("starts", c.starts),
                    GraphBinding::buffer("initial_state", c.initial_state),
                    GraphBinding::buffer("advantages", c.advantages), GraphBinding::buffer("next_starts", starts_),
                    GraphBinding::buffer("reward_scaler", scaler_),
                    GraphBinding::buffer("return_stats", return_stats_)},
                   [&](cudaStream_t cs) { record(cs); });
  }
  graph_.launch(s);
  in_flight_ = true;
  launched_version_ = actor_->weights_version();
  const size_t n = static_cast<size_t>(chunk_.T) * B_;
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(terminated_h_.data(), chunk_.terminated.data(), n, cudaMemcpyDeviceToHost, s));
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(truncated_h_.data(), chunk_.truncated.data(), n, cudaMemcpyDeviceToHost, s));
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(episode_return_h_.data(), chunk_.episode_return.data(),
                                     episode_return_h_.bytes(), cudaMemcpyDeviceToHost, s));
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(episode_length_h_.data(), chunk_.episode_length.data(),
                                     episode_length_h_.bytes(), cudaMemcpyDeviceToHost, s));
}

void DeviceRollout::finish(Chunk& stats) {
  MAMBARL_CHECK(in_flight_, "DeviceRollout::finish: no chunk was launched");
  const size_t n = static_cast<size_t>(chunk_.T) * B_;
  in_flight_ = false;  // whether the check below throws or not, the stream is synchronised
  env_->check_actions(stream());  // synchronises the stream
  stats.T = chunk_.T;
  stats.B = B_;
  stats.obs_dim = O_;
  stats.act_width = chunk_.act_width;
  stats.state_size = chunk_.state_size;
  stats.worker = 0;
  stats.policy_version = launched_version_;
  stats.episode_returns.clear();
  stats.episode_lengths.clear();
  for (size_t i = 0; i < n; ++i)
    if (terminated_h_.data()[i] || truncated_h_.data()[i]) {
      stats.episode_returns.push_back(episode_return_h_.data()[i]);
      stats.episode_lengths.push_back(episode_length_h_.data()[i]);
    }
}

std::vector<float> DeviceRollout::obs() const {
  return copy_to_host(env_->obs(), static_cast<size_t>(B_) * O_, stream());
}

std::vector<uint8_t> DeviceRollout::starts() const {
  return copy_to_host(starts_, stream());
}

void DeviceRollout::set_starts(const std::vector<uint8_t>& st) {
  MAMBARL_CHECK(st.size() == starts_.size(), "DeviceRollout: " << st.size() << " episode_start flags for " << B_ << " envs");
  copy_to_device(starts_.data(), st.data(), st.size(), stream());
}

std::vector<double> DeviceRollout::reward_scaler_state() const {
  return copy_to_host(scaler_, stream());
}

void DeviceRollout::set_reward_scaler_state(const std::vector<double>& s) {
  MAMBARL_CHECK(s.size() == scaler_.size(),
                "DeviceRollout: a reward-scaler state of " << s.size() << " values for " << B_ << " envs (want "
                                                           << scaler_.size() << ")");
  copy_to_device(scaler_.data(), s.data(), s.size(), stream());
}

std::vector<double> DeviceRollout::return_normalizer_state() const {
  return copy_to_host(return_stats_, stream());
}

bool DeviceRollout::set_return_normalizer_state(const std::vector<double>& s) {
  if (s.size() != return_stats_.size()) return false;
  copy_to_device(return_stats_.data(), s.data(), s.size(), stream());
  return true;
}

}  // namespace mambarl

namespace mambarl {

// The next chunk's context is the window's last K blocks (rows [T, context_T + T)).
std::vector<float> DeviceRollout::context_obs() const {
  const DeviceChunk& c = chunk_;
  const size_t first = static_cast<size_t>(c.T) * B_ * O_;
  return copy_to_host(c.obs.data() + first, c.obs.size() - first, stream());
}

std::vector<uint8_t> DeviceRollout::context_starts() const {
  const DeviceChunk& c = chunk_;
  const size_t first = static_cast<size_t>(c.T) * B_;
  return copy_to_host(c.starts.data() + first, c.starts.size() - first, stream());
}

std::vector<float> DeviceRollout::context_states() const {
  const DeviceChunk& c = chunk_;
  const size_t first = static_cast<size_t>(B_) * c.state_size;
  return copy_to_host(c.initial_state.data() + first, c.initial_state.size() - first, stream());
}

void DeviceRollout::set_context(const std::vector<float>& obs, const std::vector<uint8_t>& starts,
                                const std::vector<float>& states) {
  const DeviceChunk& c = chunk_;
  const size_t rows = static_cast<size_t>(c.context_T) * B_, first = static_cast<size_t>(c.T) * B_;
  const size_t nstates = static_cast<size_t>(c.context_chunks()) * B_ * c.state_size;
  MAMBARL_CHECK(obs.size() == rows * O_ && starts.size() == rows && states.size() == nstates,
                "DeviceRollout: a learner context of " << obs.size() << " obs, " << starts.size() << " flags and "
                                                       << states.size() << " state floats for " << c.context_T
                                                       << " steps of " << B_ << " envs");
  copy_to_device(chunk_.obs.data() + first * O_, obs.data(), obs.size(), stream());
  copy_to_device(chunk_.starts.data() + first, starts.data(), starts.size(), stream());
  copy_to_device(chunk_.initial_state.data() + static_cast<size_t>(B_) * c.state_size, states.data(), states.size(),
                 stream());
}

}  // namespace mambarl

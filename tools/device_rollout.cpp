#include "tools/device_rollout.hpp"

#include "kernels/gae.cuh"
#include "kernels/graph_if_any.cuh"
#include "kernels/reward_scale.cuh"
#include "kernels/rollout_record.cuh"

namespace mambarl {

DeviceChunk::DeviceChunk(int T_, int B_, int obs_dim_, int act_width_, size_t state_size_)
    : T(T_), B(B_), obs_dim(obs_dim_), act_width(act_width_), state_size(state_size_) {
  const size_t n = static_cast<size_t>(T) * B;
  obs = DeviceBuffer<float>(n * obs_dim);
  actions = DeviceBuffer<float>(n * act_width);
  logp = DeviceBuffer<float>(n);
  values = DeviceBuffer<float>(n);
  rewards = DeviceBuffer<float>(n);
  starts = DeviceBuffer<uint8_t>(n);
  terminated = DeviceBuffer<uint8_t>(n);
  truncated = DeviceBuffer<uint8_t>(n);
  final_values = DeviceBuffer<float>(n);
  next_values = DeviceBuffer<float>(static_cast<size_t>(B));
  initial_state = DeviceBuffer<float>(static_cast<size_t>(B) * state_size);
  advantages = DeviceBuffer<float>(n);
  returns = DeviceBuffer<float>(n);
  episode_return = DeviceBuffer<float>(n);
  episode_length = DeviceBuffer<int32_t>(n);
}

DeviceRollout::DeviceRollout(std::unique_ptr<GpuVecEnv> env, std::unique_ptr<ActorHandle> actor,
                             uint64_t env_seed, int chunk_len, const AlgoConfig& algo, size_t state_size)
    : env_(std::move(env)),
      actor_(std::move(actor)),
      algo_(algo),
      B_(env_->num_envs()),
      O_(env_->spec().obs_dim),
      chunk_(chunk_len, B_, O_, action_width(env_->spec().action), state_size),
      starts_(static_cast<size_t>(B_)),
      peek_(static_cast<size_t>(B_)),
      scaler_(3 + static_cast<size_t>(B_)),
      terminated_h_(static_cast<size_t>(chunk_len) * B_),
      truncated_h_(static_cast<size_t>(chunk_len) * B_),
      episode_return_h_(static_cast<size_t>(chunk_len) * B_),
      episode_length_h_(static_cast<size_t>(chunk_len) * B_) {
  MAMBARL_CHECK(actor_->num_envs() == B_,
                "DeviceRollout: the actor has " << actor_->num_envs() << " envs, the GPU env " << B_);
  const cudaStream_t s = stream();
  env_->reset(env_seed, s);
  MAMBARL_CUDA_CHECK(cudaMemsetAsync(starts_.data(), 1, starts_.bytes(), s));  // the run's first step starts episodes
  std::vector<double> scaler(scaler_.size(), 0.0);
  scaler[1] = 1.0;  // RewardScaler's initial (mean 0, var 1, count 0)
  set_reward_scaler_state(scaler);  // synchronises the stream
  (void)cuda::graph_conditionals_supported();  // probed here, not first inside the chunk's capture
}

void DeviceRollout::record(cudaStream_t s) {
  DeviceChunk& c = chunk_;
  const int B = B_, O = O_, W = c.act_width;
  actor_->enqueue_get_state(s, c.initial_state.data());
  for (int t = 0; t < c.T; ++t) {
    const size_t row = static_cast<size_t>(t) * B;
    float* obs_t = c.obs.data() + row * O;
    uint8_t* starts_t = c.starts.data() + row;
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
  const GaeInputs g{c.T, B, c.rewards.data(), c.values.data(), c.terminated.data(), c.truncated.data(),
                    c.final_values.data(), c.next_values.data()};
  cuda::gae(g, algo_.gamma, algo_.gae_lambda, c.advantages.data(), c.returns.data(), s);
}

void DeviceRollout::collect(Chunk& stats) {
  const cudaStream_t s = stream();
  // The actor's host-side calls since the last chunk (set_weights; set_state
  // and set_rng on a resume) synchronise its own stream before returning
  // (plugin/plugin_host.hpp), and our stream was synchronised at the end of
  // the last chunk, so the two never overlap.
  if (!graph_.captured()) {
    const DeviceChunk& c = chunk_;
    graph_.capture(s,
                   {GraphBinding::buffer("obs", c.obs), GraphBinding::buffer("actions", c.actions),
                    GraphBinding::buffer("rewards", c.rewards), GraphBinding::buffer("starts", c.starts),
                    GraphBinding::buffer("initial_state", c.initial_state),
                    GraphBinding::buffer("advantages", c.advantages), GraphBinding::buffer("next_starts", starts_),
                    GraphBinding::buffer("reward_scaler", scaler_)},
                   [&](cudaStream_t cs) { record(cs); });
  }
  graph_.launch(s);
  const size_t n = static_cast<size_t>(chunk_.T) * B_;
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(terminated_h_.data(), chunk_.terminated.data(), n, cudaMemcpyDeviceToHost, s));
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(truncated_h_.data(), chunk_.truncated.data(), n, cudaMemcpyDeviceToHost, s));
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(episode_return_h_.data(), chunk_.episode_return.data(),
                                     episode_return_h_.bytes(), cudaMemcpyDeviceToHost, s));
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(episode_length_h_.data(), chunk_.episode_length.data(),
                                     episode_length_h_.bytes(), cudaMemcpyDeviceToHost, s));
  env_->check_actions(s);  // synchronises s
  stats.T = chunk_.T;
  stats.B = B_;
  stats.obs_dim = O_;
  stats.act_width = chunk_.act_width;
  stats.state_size = chunk_.state_size;
  stats.worker = 0;
  stats.policy_version = actor_->weights_version();
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

}  // namespace mambarl

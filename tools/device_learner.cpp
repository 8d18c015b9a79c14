#include "tools/device_learner.hpp"

#include <algorithm>

#include "kernels/gather_columns.cuh"
#include "plugin/tensor_view.hpp"

namespace mambarl {

namespace {

mambarl_tensor device_view(void* p, int32_t dtype, std::initializer_list<int64_t> dims) {
  return make_view(p, dtype, dims, MAMBARL_DEVICE_CUDA);
}

}  // namespace

DeviceLearner::DeviceLearner(PolicyHandle& policy, const AlgoConfig& algo, uint64_t seed, const DeviceChunk& c)
    : policy_(policy), algo_(algo), rng_(make_shuffle_rng(seed)), Bm_(c.B / algo.minibatches) {
  MAMBARL_CHECK(algo.minibatches > 0 && c.B % algo.minibatches == 0,
                "DeviceLearner: " << algo.minibatches << " minibatches do not divide " << c.B << " envs");
  const size_t n = static_cast<size_t>(c.T) * Bm_, n_all = static_cast<size_t>(c.context_T + c.T) * Bm_;
  cols_h_ = PinnedBuffer<int>(static_cast<size_t>(Bm_));
  cols_ = DeviceBuffer<int>(static_cast<size_t>(Bm_));
  obs_ = DeviceBuffer<float>(n_all * c.obs_dim);
  actions_ = DeviceBuffer<float>(n * c.act_width);
  logp_ = DeviceBuffer<float>(n);
  adv_ = DeviceBuffer<float>(n);
  ret_ = DeviceBuffer<float>(n);
  starts_ = DeviceBuffer<uint8_t>(n_all);
  init_state_ = DeviceBuffer<float>(static_cast<size_t>(Bm_) * c.state_size);
}

UpdateStats DeviceLearner::learn(const DeviceChunk& c, double lr) {
  const cudaStream_t s = stream_.get();
  // Each sequence: the window's context_T + T steps of obs and starts
  // (tools/device_rollout.hpp), the loss arrays the chunk's T.
  const int T = c.T, Tall = c.context_T + c.T, B = c.B, Bm = Bm_, O = c.obs_dim, W = c.act_width;
  const int S = static_cast<int>(c.state_size);
  return run_minibatches(algo_, B, rng_, order_, [&](const int* cols, int) {
    // The previous train_step has returned, so its gather (and this staging buffer) is free.
    std::copy_n(cols, Bm, cols_h_.data());
    MAMBARL_CUDA_CHECK(cudaMemcpyAsync(cols_.data(), cols_h_.data(), cols_h_.bytes(), cudaMemcpyHostToDevice, s));
    const int* d = cols_.data();
    cuda::gather_columns(Tall, B, Bm, O, d, c.obs.data(), obs_.data(), s);
    cuda::gather_columns(T, B, Bm, W, d, c.actions.data(), actions_.data(), s);
    cuda::gather_columns(T, B, Bm, 1, d, c.logp.data(), logp_.data(), s);
    cuda::gather_columns(T, B, Bm, 1, d, c.advantages.data(), adv_.data(), s);
    cuda::gather_columns(T, B, Bm, 1, d, c.returns.data(), ret_.data(), s);
    cuda::gather_columns(Tall, B, Bm, 1, d, c.starts.data(), starts_.data(), s);
    cuda::gather_columns(1, B, Bm, S, d, c.initial_state.data(), init_state_.data(), s);  // block 0
    // train_step runs on the plugin's own stream: the minibatch must be complete first.
    MAMBARL_CUDA_CHECK(cudaStreamSynchronize(s));
    mambarl_chunk mc{};
    mc.obs = device_view(obs_.data(), MAMBARL_DTYPE_F32, {Tall, Bm, O});
    mc.actions = device_view(actions_.data(), MAMBARL_DTYPE_F32, {T, Bm, W});
    mc.old_logp = device_view(logp_.data(), MAMBARL_DTYPE_F32, {T, Bm});
    mc.advantages = device_view(adv_.data(), MAMBARL_DTYPE_F32, {T, Bm});
    mc.returns = device_view(ret_.data(), MAMBARL_DTYPE_F32, {T, Bm});
    mc.episode_start = device_view(starts_.data(), MAMBARL_DTYPE_U8, {Tall, Bm});
    mc.initial_state = device_view(init_state_.data(), MAMBARL_DTYPE_F32, {Bm, S});
    return policy_.train_step(mc, lr);
  });
}

}  // namespace mambarl

// GpuBatchedEnv<Env>: the GpuVecEnv behind every bundled env type, the CUDA
// twin of BatchedEnv<Env> (envs/batched_env.hpp). It owns the same buffers in
// device memory, laid out as BatchedEnv's host vectors, and one thread per env
// runs the same code: the env struct's MAMBARL_HD reset/step and EnvBatch's
// bookkeeping (envs/env_batch.hpp). So from the same seed and actions it
// writes what the CPU writes, bit for bit, with one exception: cartpole calls
// cos/sin on doubles, and CUDA's may differ from glibc's by an ulp (and the
// two compilers may contract different a*b+c into FMAs), so its state can
// differ in the last bits of a double, and its float observations by an ulp.
//
// Everything here is allocated at construction; reset() and step() only
// enqueue a kernel, so a caller can capture them into a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "envs/env_batch.hpp"
#include "envs/gpu_vec_env.hpp"
#include "kernels/base/check.hpp"
#include "kernels/base/rng.hpp"
#include "kernels/cuda_check.cuh"
#include "kernels/device_buffer.cuh"

namespace mambarl {
namespace gpu_env {

constexpr int kThreads = 128;  // envs per block

// The record of invalid actions is one 64-bit key: the env index in the high
// word, the action's float bits in the low one. atomicMin keeps the offence
// of the lowest env index, a deterministic choice (the first offence to
// arrive would be a race between threads); all ones means none.
constexpr unsigned long long kNoInvalidAction = ~0ull;

__device__ inline unsigned long long invalid_action_key(int b, float a) {
  return (static_cast<unsigned long long>(b) << 32) | __float_as_uint(a);
}

template <typename Env>
__global__ void reset_kernel(EnvBatch<Env> batch, int B, uint64_t seed) {
  const int b = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (b < B) batch.reset_env(b, seed);
}

// actions: (B) f32, discrete. An invalid action is recorded and its env left
// as it was; its outputs then read "nothing happened" (no reward, no episode end).
template <typename Env>
__global__ void step_kernel(EnvBatch<Env> batch, int B, int num_actions, const float* actions,
                            unsigned long long* invalid) {
  const int b = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (b >= B) return;
  const float a = actions[b];
  if (is_valid_action(a, num_actions)) {
    batch.step_env(b, static_cast<int>(a));
    return;
  }
  atomicMin(invalid, invalid_action_key(b, a));
  const float* o = batch.obs + static_cast<size_t>(b) * batch.obs_dim;
  float* fin = batch.final_obs + static_cast<size_t>(b) * batch.obs_dim;
  for (int i = 0; i < batch.obs_dim; ++i) fin[i] = o[i];
  batch.reward[b] = 0.0f;
  batch.terminated[b] = 0;
  batch.truncated[b] = 0;
  batch.episode_return[b] = 0.0f;
  batch.episode_length[b] = 0;
}

}  // namespace gpu_env

template <typename Env>
class GpuBatchedEnv final : public GpuVecEnv {
  static_assert(std::is_trivially_copyable_v<Env>,
                "env state is copied to the device and saved as raw bytes");

 public:
  // prev_action: as BatchedEnv's (EnvBatch appends the previous action).
  GpuBatchedEnv(const Env& prototype, int num_envs, bool prev_action = false)
      : spec_(prev_action ? with_prev_action(prototype.spec()) : prototype.spec()),
        prev_action_n_(prev_action ? spec_.action.n : 0),
        B_(num_envs),
        envs_(checked_size(num_envs)),
        rngs_(envs_.size()),
        obs_(envs_.size() * static_cast<size_t>(spec_.obs_dim)),
        final_obs_(obs_.size()),
        reward_(envs_.size()),
        terminated_(envs_.size()),
        truncated_(envs_.size()),
        episode_return_(envs_.size()),
        episode_length_(envs_.size()),
        running_return_(envs_.size()),
        running_length_(envs_.size()),
        invalid_(1) {
    MAMBARL_CHECK(spec_.action.discrete && spec_.action.n >= 1,
                  spec_.id << ": GpuBatchedEnv steps discrete action spaces only");
    MAMBARL_CHECK(spec_.obs_dim >= 1, spec_.id << ": obs_dim must be >= 1");
    // The state BatchedEnv starts with: the prototype in every slot,
    // default-constructed streams, zeros elsewhere (what save_state() gives before reset()).
    const std::vector<Env> envs(envs_.size(), prototype);
    const std::vector<Rng> rngs(envs_.size());
    copy_to_device(envs_.data(), envs.data(), envs.size());
    copy_to_device(rngs_.data(), rngs.data(), rngs.size());
    zero(obs_);
    zero(final_obs_);
    zero(reward_);
    zero(terminated_);
    zero(truncated_);
    zero(episode_return_);
    zero(episode_length_);
    zero(running_return_);
    zero(running_length_);
    MAMBARL_CUDA_CHECK(cudaMemset(invalid_.data(), 0xFF, invalid_.bytes()));  // kNoInvalidAction
    // cudaMemset may return before it is done, and the caller's stream may be
    // non-blocking (unordered with the legacy stream): finish here.
    MAMBARL_CUDA_CHECK(cudaDeviceSynchronize());
  }

  const EnvSpec& spec() const override { return spec_; }
  int num_envs() const override { return B_; }

  void reset(uint64_t seed, cudaStream_t s) override {
    gpu_env::reset_kernel<Env><<<blocks(), gpu_env::kThreads, 0, s>>>(view(), B_, seed);
    MAMBARL_CUDA_LAUNCH_CHECK(s);
  }

  void step(const float* actions, cudaStream_t s) override {
    MAMBARL_CHECK(actions != nullptr, spec_.id << ": step() needs a device action buffer");
    gpu_env::step_kernel<Env>
        <<<blocks(), gpu_env::kThreads, 0, s>>>(view(), B_, spec_.action.n, actions, invalid_.data());
    MAMBARL_CUDA_LAUNCH_CHECK(s);
  }

  void check_actions(cudaStream_t s) override {
    unsigned long long key = gpu_env::kNoInvalidAction;
    MAMBARL_CUDA_CHECK(cudaMemcpyAsync(&key, invalid_.data(), sizeof key, cudaMemcpyDeviceToHost, s));
    MAMBARL_CUDA_CHECK(cudaStreamSynchronize(s));
    if (key == gpu_env::kNoInvalidAction) return;
    MAMBARL_CUDA_CHECK(
        cudaMemsetAsync(invalid_.data(), 0xFF, invalid_.bytes(), s));  // cleared for the next check
    const int b = static_cast<int>(key >> 32);
    const uint32_t bits = static_cast<uint32_t>(key & 0xFFFFFFFFull);
    float a = 0.0f;
    std::memcpy(&a, &bits, sizeof a);
    MAMBARL_FAIL(spec_.id << ": env " << b << " got action " << a << ", expected an integer in [0, "
                          << spec_.action.n - 1 << "] (that env was not stepped)");
  }

  const float* obs() const override { return obs_.data(); }
  const float* final_obs() const override { return final_obs_.data(); }
  const float* reward() const override { return reward_.data(); }
  const uint8_t* terminated() const override { return terminated_.data(); }
  const uint8_t* truncated() const override { return truncated_.data(); }
  const float* episode_return() const override { return episode_return_.data(); }
  const int32_t* episode_length() const override { return episode_length_.data(); }

  // BatchedEnv::save_state's order: envs, rngs, obs, running return, running length.
  std::vector<uint8_t> save_state(cudaStream_t s) const override {
    std::vector<uint8_t> out(state_bytes());
    size_t at = 0;
    for (const StatePart& p : state_parts()) {
      MAMBARL_CUDA_CHECK(cudaMemcpyAsync(out.data() + at, p.ptr, p.bytes, cudaMemcpyDeviceToHost, s));
      at += p.bytes;
    }
    MAMBARL_CUDA_CHECK(cudaStreamSynchronize(s));
    return out;
  }

  void load_state(const std::vector<uint8_t>& bytes, cudaStream_t s) override {
    MAMBARL_CHECK(bytes.size() == state_bytes(), spec_.id << ": saved env state has " << bytes.size()
                                                          << " bytes, expected " << state_bytes() << " for "
                                                          << B_ << " envs of this type");
    size_t at = 0;
    for (const StatePart& p : state_parts()) {
      MAMBARL_CUDA_CHECK(cudaMemcpyAsync(p.ptr, bytes.data() + at, p.bytes, cudaMemcpyHostToDevice, s));
      at += p.bytes;
    }
    // `bytes` belongs to the caller: the copies must be done before we return.
    MAMBARL_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  struct StatePart {
    void* ptr;
    size_t bytes;
  };

  static size_t checked_size(int num_envs) {
    MAMBARL_CHECK(num_envs >= 1, "GpuBatchedEnv: num_envs must be >= 1, got " << num_envs);
    return static_cast<size_t>(num_envs);
  }
  template <typename T>
  static void zero(const DeviceBuffer<T>& buf) {
    MAMBARL_CUDA_CHECK(cudaMemset(buf.data(), 0, buf.bytes()));
  }

  unsigned blocks() const { return static_cast<unsigned>((B_ + gpu_env::kThreads - 1) / gpu_env::kThreads); }

  std::vector<StatePart> state_parts() const {
    return {{envs_.data(), envs_.bytes()},
            {rngs_.data(), rngs_.bytes()},
            {obs_.data(), obs_.bytes()},
            {running_return_.data(), running_return_.bytes()},
            {running_length_.data(), running_length_.bytes()}};
  }
  size_t state_bytes() const {
    return envs_.bytes() + rngs_.bytes() + obs_.bytes() + running_return_.bytes() + running_length_.bytes();
  }

  EnvBatch<Env> view() const {
    return {envs_.data(),           rngs_.data(),           obs_.data(),
            final_obs_.data(),      reward_.data(),         terminated_.data(),
            truncated_.data(),      episode_return_.data(), episode_length_.data(),
            running_return_.data(), running_length_.data(), spec_.obs_dim,
            spec_.max_episode_steps,  prev_action_n_};
  }

  EnvSpec spec_;
  int prev_action_n_;  // 0, or the action count when the previous action is observed
  int B_;
  DeviceBuffer<Env> envs_;                    // (B)
  DeviceBuffer<Rng> rngs_;                    // (B): env b's stream, Rng(seed, b)
  DeviceBuffer<float> obs_;                   // (B, obs_dim)
  DeviceBuffer<float> final_obs_;             // (B, obs_dim)
  DeviceBuffer<float> reward_;                // (B)
  DeviceBuffer<uint8_t> terminated_;          // (B)
  DeviceBuffer<uint8_t> truncated_;           // (B)
  DeviceBuffer<float> episode_return_;        // (B)
  DeviceBuffer<int32_t> episode_length_;      // (B)
  DeviceBuffer<double> running_return_;       // (B): of the episode in progress
  DeviceBuffer<int32_t> running_length_;      // (B)
  DeviceBuffer<unsigned long long> invalid_;  // (1): the invalid-action record (kNoInvalidAction: none)
};

}  // namespace mambarl

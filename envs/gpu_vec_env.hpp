// GPU-resident vectorised envs (CUDA builds only): the bundled env types
// stepped by a CUDA kernel, B envs per launch, with exactly the semantics of
// the CPU BatchedEnv (envs/batched_env.hpp): the same env structs and their
// code (MAMBARL_HD), the same Rng stream per env, the time limit, auto-reset
// inside step, final_obs and the per-episode return/length bookkeeping. From
// the same seed and actions, a GpuVecEnv and the CPU env of its type give the
// same observations, rewards and flags step by step.
//
// Every buffer is device memory owned by the env, fixed for its lifetime, so
// that a caller can capture step() into a CUDA graph (K rollout steps, one
// launch). step() only enqueues work on the given stream: no host sync, no
// allocation. An invalid action (not an integer in [0, n), or NaN) cannot be
// refused before the step as on the CPU, since nothing is read back: that env
// is not stepped and the first offence is recorded on the device;
// check_actions() reads the record back and raises an Error naming env and
// action (the runner calls it once per chunk).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "envs/vec_env.hpp"
#include "kernels/base/config_node.hpp"

namespace mambarl {

class GpuVecEnv {
 public:
  virtual ~GpuVecEnv() = default;
  virtual const EnvSpec& spec() const = 0;  // the same as the CPU env of this type and config
  virtual int num_envs() const = 0;

  // Env i draws all its randomness from Rng(seed, i), as on the CPU. Enqueued on s.
  virtual void reset(uint64_t seed, cudaStream_t s) = 0;
  // actions: device (B, action_width) f32. Enqueues the step on s (capturable).
  virtual void step(const float* actions, cudaStream_t s) = 0;
  // Synchronises s; Error naming the first env and action that was invalid
  // since the last call (and clears the record).
  virtual void check_actions(cudaStream_t s) = 0;

  // Device pointers, the same layout and meaning as VecEnv's host ones.
  virtual const float* obs() const = 0;             // (B, obs_dim)
  virtual const float* final_obs() const = 0;       // (B, obs_dim)
  virtual const float* reward() const = 0;          // (B)
  virtual const uint8_t* terminated() const = 0;    // (B)
  virtual const uint8_t* truncated() const = 0;     // (B)
  virtual const float* episode_return() const = 0;  // (B)
  virtual const int32_t* episode_length() const = 0;  // (B)

  // The complete state, byte for byte what the CPU env of the same type and
  // size saves (VecEnv::save_state), so a checkpoint moves between backends.
  // Both synchronise s; load_state validates the size like the CPU env.
  virtual std::vector<uint8_t> save_state(cudaStream_t s) const = 0;
  virtual void load_state(const std::vector<uint8_t>& bytes, cudaStream_t s) = 0;
};

// Whether `type` has a CUDA version (the bundled types do; plugin env types do not).
bool has_gpu_env(const std::string& type);

// Builds from the `env:` map of an experiment config, as make_vec_env does
// (same keys, same validation and errors); a type without a CUDA version is a
// ConfigError naming `env.type` and the types that have one.
std::unique_ptr<GpuVecEnv> make_gpu_vec_env(const ConfigNode& env_cfg);

}  // namespace mambarl

// The two roles of a policy (plugin/DESIGN.md "Architecture") as the Mamba
// plugin's ABI functions see them, whichever device runs them: a LearnerRole
// (parameters, optimizer, checkpoints) and ActorRoles (one recurrent state
// slot per env). policy_plugin.cpp talks only to these, so an engine on
// another device is one more implementation, not a rewrite of the ABI glue:
// the actor runs on the CPU (CpuActor) or the GPU (GpuActor), the learner
// on the CPU (CpuLearner) or the GPU (GpuLearner), both on engine.device.
//
// Weights cross between the roles as host float32 buffers in the model's
// flat layout (policy/param_layout.hpp), whatever the engines keep inside.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/base/rng.hpp"
#include "kernels/precision.hpp"
#include "policy/actor_critic.hpp"
#include "policy/allreduce.hpp"
#include "policy/cpu_learner.hpp"
#include "policy/io/safetensors.hpp"
#include "policy/policy_config.hpp"

namespace mambarl {

enum class Device { cpu, cuda };

// Where the engines run and in what precision (runtime.device / runtime.dtype /
// runtime.learner_dtype, resolved by the host).
struct EngineChoice {
  Device device = Device::cpu;
  bool bf16_weights = false;  // the GPU actor's matrices in bf16; f32 state and accumulation
  Precision learner = Precision::float32;  // the GPU learner's GEMM inputs (policy/gpu_learner.hpp)
};

// Thrown by a role for a call its engine can never serve (a CPU actor asked
// for a device-enqueued step); the ABI glue answers MAMBARL_UNSUPPORTED.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

class ActorRole {
 public:
  virtual ~ActorRole() = default;
  virtual void set_weights(const float* w, size_t n, long long version) = 0;  // (num_params) host
  virtual void reset(const uint8_t* mask) = 0;                                // (B)
  // obs (B, obs_dim), episode_start (B) -> actions (B, act_width), logp (B), values (B); host memory.
  virtual void act(const float* obs, const uint8_t* episode_start, float* actions, float* logp,
                   float* values) = 0;
  // act() in two halves: begin starts the step on host obs/episode_start and
  // may return before it is done (the inputs are read, or copied, by then);
  // end waits for it and writes the outputs. The glue guarantees the pairing:
  // exactly one end per begin, no other call in between.
  virtual void act_begin(const float* obs, const uint8_t* episode_start) = 0;
  virtual void act_end(float* actions, float* logp, float* values) = 0;
  // V(obs), state and Rngs unchanged; needed (B) or null (every env): the
  // envs whose value is wanted, the others' values are unspecified.
  virtual void peek_values(const float* obs, const uint8_t* needed, float* values) = 0;
  virtual void get_state(float* state) = 0;                       // (B, state_size) host
  virtual void set_state(const float* state) = 0;
  virtual void get_rngs(Rng* rngs) = 0;  // (B) host
  virtual void set_rngs(const Rng* rngs) = 0;
  // greedy: act() takes the distribution's mode instead of sampling (greedy
  // evaluation). Only the CPU engine has it; the others refuse to turn it on,
  // so no engine silently keeps sampling.
  virtual void set_greedy(bool greedy) {
    if (greedy)
      throw UnsupportedError("actor_set_greedy: greedy actions are implemented by the CPU actor only; "
                             "run with runtime.device=cpu");
  }

  // act / peek_values / get_state on DEVICE pointers of the same shapes,
  // enqueued on `stream` (a cudaStream_t) with no host sync and no
  // allocation, so a caller may capture them into a CUDA graph. An engine
  // not on a GPU throws UnsupportedError.
  virtual void enqueue_act(void* stream, const float* obs, const uint8_t* episode_start, float* actions,
                           float* logp, float* values) = 0;
  virtual void enqueue_peek_values(void* stream, const float* obs, const uint8_t* needed, float* values) = 0;
  virtual void enqueue_get_state(void* stream, float* state) = 0;  // (B, state_size)
};

class LearnerRole {
 public:
  virtual ~LearnerRole() = default;
  // The model's structure (layout, mixers, sizes): immutable, shared with the actors.
  virtual std::shared_ptr<const ActorCritic<float>> shared_model() const = 0;
  // chunk.on_device: its arrays are CUDA memory; a learner not on a GPU refuses it.
  virtual TrainResult train_step(const ChunkView& chunk, double lr) = 0;
  virtual size_t num_params() const = 0;
  virtual void get_weights(float* w) const = 0;  // (num_params) host
  virtual void set_weights(const float* w) = 0;
  virtual void save(const std::string& path, const std::map<std::string, std::string>& metadata,
                    const std::vector<TensorRecord>& extra) const = 0;
  // On failure the learner is unchanged; returns the file for its metadata and extras.
  virtual SafetensorsFile load(const std::string& path) = 0;
};

// across (may be null, not owned): the data-parallel replicas the learner
// sums with (policy/allreduce.hpp); only the CPU learner has them so far.
std::unique_ptr<LearnerRole> make_learner(const PolicyConfig& cfg, int obs_dim, const HeadSpec& head,
                                          const PpoLossConfig& loss, const AdamWConfig& adam, uint64_t seed,
                                          const EngineChoice& engine, Allreduce* across);

// An actor of `learner`'s model on engine.device, starting from the learner's
// current weights (version 0); its env b samples as env first_env + b of a
// whole-batch actor would (a data-parallel rank's share of the envs).
std::unique_ptr<ActorRole> make_actor(const LearnerRole& learner, const PolicyConfig& cfg,
                                      const EngineChoice& engine, int num_envs, uint64_t seed,
                                      int64_t first_env);

// ---- the CUDA side: plugin/cuda_engines.cpp in CUDA builds, plugin/no_cuda_engines.cpp otherwise.

// Why this build cannot run an engine on a GPU of this machine ("" when it
// can). Never throws or crashes, also with the toolkit but no driver.
std::string cuda_unavailable_reason();

std::unique_ptr<LearnerRole> make_gpu_learner(const PolicyConfig& cfg, int obs_dim, const HeadSpec& head,
                                              const PpoLossConfig& loss, const AdamWConfig& adam,
                                              uint64_t seed, Precision precision, Allreduce* across);

std::unique_ptr<ActorRole> make_gpu_actor(std::shared_ptr<const ActorCritic<float>> model,
                                          const PolicyConfig& cfg, int num_envs, uint64_t seed,
                                          bool bf16_weights);

}  // namespace mambarl

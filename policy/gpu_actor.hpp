// The actor role on the GPU (CpuActor's twin, policy/cpu_actor.hpp): one
// recurrent state slot per env on the device, and a T=1 step that is ONE
// CUDA graph replay: the H2D copy of obs + episode_start flags from pinned
// memory, the observation projection, every layer (in_proj GEMM, the mixer
// step that reads and writes the layer's state once: one fused kernel for
// Mamba-3, a per-env-tile pre kernel + a streaming state kernel for Mamba-1,
// out_proj GEMM with the residual add), the final norm, both heads, sampling with a
// per-env device Rng, and the D2H copy of actions/logp/values. Host work per
// step: two memcpys into/out of pinned staging and one stream sync.
//
// Parity with CpuActor: same parameter layout (the flat f32 buffer is
// uploaded as is and read in place), same state layout per env, same Rng per
// env (seeded (seed, 0xAC7000 + b)) and the same draws, so tests compare
// values/logp within f32 tolerance and actions exactly where the sampled
// uniform is not within rounding of a CDF boundary.
//
// Supports all four mixers: mamba1, mamba3, and the GRU and MLP baselines
// (an input GEMM, one cell kernel, and for the GRU the W_hh GEMM of the
// carried h; kernels/gru.cuh, kernels/mlp.cuh). The graph is captured for this actor's
// batch and buffers; it refuses to replay if one of them changed (see
// kernels/cuda_graph.cuh). A new batch size means a new GpuActor.
//
// Two streams. The actor's own stream runs act / act_begin / peek_values and
// every state, weight and Rng access; each of those synchronises it before
// returning (act_begin: act_end does), so work a caller enqueues afterwards
// on any stream sees their results. The enqueue_* calls put the same step
// on the CALLER's stream only, the step's kernels reading the caller's
// inputs and writing its outputs in place (no copies): no host sync, no
// allocation, no host read, so a caller may capture them into its own CUDA
// graph (which then bakes in the actor's buffers, fixed for its lifetime,
// and the caller's pointers). Their order with the actor's own-stream calls
// is the caller's job: synchronise (or wait on) the caller's stream before
// calling anything else on the actor, and never run both at once. A caller's
// graph holding enqueued steps must not outlive the actor.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/base/rng.hpp"
#include "policy/actor_critic.hpp"

namespace mambarl {

struct PolicyConfig;

class GpuActor {
 public:
  // graph: act() replays the captured graph; eager: it launches the same
  // kernels one by one (the graph's reference, and the bench's baseline);
  // graph_pdl: a graph whose kernels use programmatic dependent launch
  // (kernels/launch.cuh), captured at its first use, same results bit for bit.
  enum class Launch { graph, eager, graph_pdl };

  // bf16_weights: the f32 parameters are uploaded as they are (the master
  // copy) and set_weights derives bf16 shadows of the matrices in_proj (with
  // the pre-norm weight folded in; the GRU's W_ih, the MLP's fc1), out_proj
  // (the MLP's fc2) and, for mamba1, x_proj and dt_proj, for the GRU W_hh;
  // the step reads those and computes in f32 with f32 state. The small
  // observation projection, heads, biases and per-channel vectors stay f32.
  GpuActor(std::shared_ptr<const ActorCritic<float>> model, const PolicyConfig& cfg, int num_envs,
           uint64_t seed, bool bf16_weights = false);
  ~GpuActor();
  GpuActor(const GpuActor&) = delete;
  GpuActor& operator=(const GpuActor&) = delete;

  int num_envs() const;
  size_t state_size() const;  // floats per env, all layers
  bool bf16_weights() const;
  void set_weights(const float* w, size_t n, long long version);
  // The same from a device buffer (e.g. a learner's parameters): a
  // device-to-device copy, no host round trip. The writer must be idle.
  void set_weights_device(const float* w, size_t n, long long version);
  long long weights_version() const;

  void reset(const uint8_t* mask);  // (B) host
  // Host pointers: obs (B, obs_dim), episode_start (B) -> actions (B, act_width), logp (B),
  // values (B). Env b with episode_start[b] = 1 has its state zeroed before the step.
  void act(const float* obs, const uint8_t* episode_start, float* actions, float* logp,
           float* values);
  // act() in two halves: begin copies the host inputs into pinned staging
  // and launches the step on the actor's stream without waiting (the caller
  // may reuse obs/episode_start at once); end waits for it and copies the
  // outputs out. No other call on this actor in between.
  void act_begin(const float* obs, const uint8_t* episode_start);
  void act_end(float* actions, float* logp, float* values);
  // V(obs) from the current state without advancing it or the Rngs, for the
  // envs with needed[b] != 0 (null: every env); the others' values are left
  // unspecified (finite), and their state is not even read.
  void peek_values(const float* obs, const uint8_t* needed, float* values);

  // act / peek_values / state() on DEVICE pointers of the same shapes,
  // enqueued on the caller's stream `s` (see the stream notes above).
  void enqueue_act(cudaStream_t s, const float* obs, const uint8_t* episode_start, float* actions,
                   float* logp, float* values);
  void enqueue_peek_values(cudaStream_t s, const float* obs, const uint8_t* needed, float* values);
  void enqueue_state(cudaStream_t s, float* state);  // (B, state_size)

  // Checkpoint access (device <-> host copies).
  std::vector<float> state() const;  // (B, state_size)
  void copy_state_to(float* host) const;  // (B, state_size), straight into the caller's memory
  void set_state(const float* s, size_t n);
  std::vector<Rng> rngs() const;     // (B)
  void set_rngs(const Rng* r, size_t n);

  void set_launch(Launch mode);
  Launch launch() const;

  // Device time in µs per step: `groups` samples, each the mean over `group`
  // back-to-back steps (kernels/event_timing.cuh), replaying the episode
  // starts of the last act() and the last staged obs (that act()'s, or a later
  // peek's) in the current launch mode.
  std::vector<double> time_steps_us(int groups, int group);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mambarl

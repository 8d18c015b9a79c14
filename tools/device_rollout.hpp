// GPU-resident rollouts (env.backend: cuda): a DeviceRollout steps a
// GpuVecEnv with its actor entirely on the device. One CUDA graph per chunk
// holds all T steps (obs and starts into the chunk, actor step, env step with
// auto-reset, V(final obs), the per-step record), then V(obs after the
// chunk), reward scaling and GAE, so a chunk is one graph launch with no host
// round trip. After the replay the host reads back only what its statistics
// need (done flags, episode returns and lengths) and env.check_actions().
//
// The same steps as RolloutWorker::collect (tools/rollout.cpp), with one
// difference in work, not in results: V(final obs) is evaluated for every
// env at every step (a graph cannot branch on data), where the CPU path only
// peeks when some env was truncated; that is one extra value-only actor pass
// per step.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "envs/gpu_vec_env.hpp"
#include "kernels/cuda_graph.cuh"
#include "kernels/cuda_handles.cuh"
#include "kernels/device_buffer.cuh"
#include "plugin/plugin_host.hpp"
#include "tools/experiment.hpp"
#include "tools/rollout.hpp"

namespace mambarl {

// A (T, B) chunk in device memory: what tools/chunk.hpp's Chunk holds, plus
// the per-step episode records the host reads back. With learner context
// (algo.bptt_len > chunk_len) obs, starts and the start states are a window
// of K + 1 chunks, the previous K first (tools/rollout_context.hpp keeps the
// same K on the host): each collect shifts the window by one chunk inside
// its graph, then writes the new chunk into the last block.
struct DeviceChunk {
  int T = 0, B = 0, obs_dim = 0, act_width = 0;
  int context_T = 0;                                  // K x T steps of context
  size_t state_size = 0;
  DeviceBuffer<float> obs;                            // (context_T + T, B, obs_dim)
  DeviceBuffer<float> actions;                        // (T, B, act_width)
  DeviceBuffer<float> logp, values, rewards;          // (T, B)
  DeviceBuffer<uint8_t> starts;                       // (context_T + T, B)
  DeviceBuffer<uint8_t> terminated, truncated;        // (T, B)
  DeviceBuffer<float> final_values;                   // (T, B) V(final obs) where truncated, else 0
  DeviceBuffer<float> next_values;                    // (B)    V(obs after the chunk)
  DeviceBuffer<float> initial_state;                  // (K + 1, B, state_size) each block's start;
                                                      //   block 0 starts the learner's sequences
  DeviceBuffer<float> advantages, returns;            // (T, B)
  DeviceBuffer<float> episode_return;                 // (T, B) where done, else 0
  DeviceBuffer<int32_t> episode_length;               // (T, B) where done, else 0

  DeviceChunk(int T, int B, int obs_dim, int act_width, size_t state_size, int context_T);
  int context_chunks() const { return context_T / T; }  // K
  // Every buffer of `from`, a chunk of this shape, copied in on `s` (async
  // mode learns on such a copy while the next chunk is collected).
  void copy_from(const DeviceChunk& from, cudaStream_t s);
};

class DeviceRollout {
 public:
  // actor: on the GPU (its enqueue_* calls are what the graph records).
  // Resets the envs from env_seed; the first step of the run starts an episode.
  DeviceRollout(std::unique_ptr<GpuVecEnv> env, std::unique_ptr<ActorHandle> actor, uint64_t env_seed,
                int chunk_len, const AlgoConfig& algo, size_t state_size);
  // Waits for a chunk still in flight (a run that failed while learning), whose graph uses our buffers.
  ~DeviceRollout();
  DeviceRollout(const DeviceRollout&) = delete;
  DeviceRollout& operator=(const DeviceRollout&) = delete;

  GpuVecEnv& env() { return *env_; }
  ActorHandle& actor() { return *actor_; }
  cudaStream_t stream() const { return stream_.get(); }
  const DeviceChunk& chunk() const { return chunk_; }

  // Replays the chunk graph with the actor's current weights (captured on
  // the first call) and waits for it. `stats` gets T, B, worker 0, the
  // policy version and the episodes that ended, in (t, b) order as the CPU
  // worker records them; its (T, B) arrays are not used.
  void collect(Chunk& stats) {
    launch();
    finish(stats);
  }
  // collect() in two halves, for async mode: launch() enqueues the chunk on
  // stream() and returns at once; finish() waits for it and fills `stats`.
  // Between them the actor (its weights and state) and chunk() belong to the
  // graph: nothing may read or change them.
  void launch();
  void finish(Chunk& stats);

  // What a bit-exact resume needs besides env and actor state (synchronous).
  std::vector<float> obs() const;  // (B, obs_dim) the next observation
  std::vector<uint8_t> starts() const;  // (B) the next episode_start flags
  void set_starts(const std::vector<uint8_t>& starts);
  // RewardScaler::state()'s layout for one worker: mean, var, count, G (B).
  std::vector<double> reward_scaler_state() const;
  void set_reward_scaler_state(const std::vector<double>& s);
  // ReturnNormalizer::state()'s layout: mean, var, count. set: false if s
  // has another size.
  std::vector<double> return_normalizer_state() const;
  bool set_return_normalizer_state(const std::vector<double>& s);
  // The learner context the next chunk will see (RolloutContext's layout):
  // obs (context_T, B, obs_dim), starts (context_T, B), states (K, B, state_size).
  std::vector<float> context_obs() const;
  std::vector<uint8_t> context_starts() const;
  std::vector<float> context_states() const;
  void set_context(const std::vector<float>& obs, const std::vector<uint8_t>& starts,
                   const std::vector<float>& states);

 private:
  void record(cudaStream_t s);
  void shift_window(cudaStream_t s);

  std::unique_ptr<GpuVecEnv> env_;
  std::unique_ptr<ActorHandle> actor_;
  AlgoConfig algo_;
  int B_, O_;
  CudaStream stream_;
  CudaStream peek_stream_;  // captures the truncation peeks into their IF nodes
  DeviceChunk chunk_;
  DeviceBuffer<uint8_t> starts_;     // (B) episode_start of the next step
  DeviceBuffer<float> peek_;         // (B) V(final obs) of the current step
  DeviceBuffer<double> scaler_;      // (3 + B) mean, var, count, G
  DeviceBuffer<double> return_stats_;  // (3) mean, var, count of the value targets
  PinnedBuffer<uint8_t> terminated_h_, truncated_h_;  // (T, B)
  PinnedBuffer<float> episode_return_h_;               // (T, B)
  PinnedBuffer<int32_t> episode_length_h_;             // (T, B)
  CudaGraph graph_{"device rollout chunk"};
  long long launched_version_ = 0;  // the actor's weights version the last launch() collects with
  bool in_flight_ = false;          // launched, not yet finished
};

}  // namespace mambarl

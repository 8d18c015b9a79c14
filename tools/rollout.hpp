// Rollout side of the actor-learner loop: a RolloutWorker fills chunks (tools/chunk.hpp) by
// stepping its vectorised envs with the actor role (T=1 steps, per-env reset
// on episode_start), recording the recurrent state each sequence started with.
//
// A worker's B envs are one or more lanes: a lane is a VecEnv of its own with
// its own actor, filling a contiguous block of the chunk's env columns. One
// lane steps act() -> env step, strictly in turn. With several lanes (double
// buffering: runtime.overlap_envs) the actor steps are split in
// act_begin/act_end, so while one lane's actor step runs (on a GPU), the CPU
// steps another lane's envs:
//   begin(0) begin(1) | end(0) step env 0 begin(0) | end(1) step env 1 begin(1) | ...
// Each lane is exactly an independent worker of its own envs and seeds; the
// pipeline drains at the end of every chunk, so between collect() calls
// every actor is idle (weights, state and checkpoints as with one lane).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "envs/vec_env.hpp"
#include "plugin/plugin_host.hpp"
#include "tools/chunk.hpp"
#include "tools/rollout_context.hpp"

namespace mambarl {

// One lane's envs and the actor that steps them; the envs are reset with
// env_seed (and first_env: VecEnv::reset) when the worker is built.
struct RolloutLane {
  std::unique_ptr<VecEnv> env;
  std::unique_ptr<ActorHandle> actor;
  uint64_t env_seed = 0;
  uint64_t first_env = 0;
};

class RolloutWorker {
 public:
  // Lane l fills the env columns after those of lanes 0..l-1. Several lanes
  // must have equally many envs (the worker's state is their concatenation).
  // context_T > 0 (a multiple of chunk_len): chunks carry that many steps of
  // the previous chunks as learner context (tools/rollout_context.hpp).
  explicit RolloutWorker(std::vector<RolloutLane> lanes, int chunk_len = 1, int context_T = 0);

  int num_envs() const { return B_; }
  int num_lanes() const { return static_cast<int>(lanes_.size()); }
  // Steps T times into `chunk` (allocated by the caller for this worker's B).
  void collect(Chunk& chunk);
  void set_weights(const std::vector<float>& weights, long long version);

  // What a bit-exact resume needs: one set per worker whatever its lanes,
  // each the lanes' parts in column order.
  std::vector<float>& obs() { return obs_; }          // (B, obs_dim) next observation
  std::vector<uint8_t>& starts() { return starts_; }  // (B) next episode_start flags
  std::vector<uint8_t> save_env_state() const;
  void load_env_state(const std::vector<uint8_t>& bytes);
  void get_actor_state(std::vector<float>& state);  // resized to (B, state_size)
  void set_actor_state(const std::vector<float>& state);
  void get_actor_rng(std::vector<uint8_t>& bytes);
  void set_actor_rng(const std::vector<uint8_t>& bytes);
  RolloutContext& context() { return context_; }  // saved in checkpoints

  // Env steps (vector steps x B) this worker has taken; readable from any thread
  // (the stalled-actor report says where an actor got stuck).
  long long env_steps() const { return env_steps_.load(std::memory_order_relaxed); }

 private:
  struct Lane : RolloutLane {
    int col0 = 0, B = 0;  // its env columns: [col0, col0 + B)
    int begun_t = -1;     // the step its actor is working on between act_begin and act_end; -1: idle
  };
  void load_inputs(const Lane& l, Chunk& c, int t);  // obs, starts of step t into the chunk
  void begin_step(Lane& l, Chunk& c, int t);         // load_inputs + act_begin
  void end_step(Lane& l, Chunk& c, int t);           // act_end into the chunk's row t
  void record_step(Lane& l, Chunk& c, int t);        // env step + bookkeeping, both modes
  void end_begun_steps(Chunk& c) noexcept;           // after a failure: no actor left mid-step

  std::vector<Lane> lanes_;
  int B_ = 0;
  std::vector<float> obs_, peek_;    // (B, obs_dim), (B); lane l's part at its col0
  std::vector<uint8_t> starts_;      // (B)
  RolloutContext context_;
  std::vector<float> chunk_start_;   // (B, state_size) the actor state at a chunk's start, with context
  std::atomic<long long> env_steps_{0};
};

}  // namespace mambarl

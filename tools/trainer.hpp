// The actor-learner loop behind `mambarl train`.
//
// Sync mode (runtime.sync: true): one thread alternates collect -> update, so
// the policy lag is 0 and a seed fixes the run bit for bit (also across a
// checkpoint + --resume). Async mode: runtime.num_actors threads each step
// their share of the envs and push chunks into a bounded queue; the learner
// consumes them, publishes versioned weights that the actors pick up before
// their next chunk, and drops chunks older than runtime.max_policy_lag. An
// actor busy on one chunk for longer than runtime.actor_stall_s (an env or
// policy call that hangs) stops the run with an error naming the actor, since
// when it was busy and at which of its env steps it got stuck. In either mode
// runtime.overlap_envs may split each actor's envs in two halves whose env
// steps overlap the other half's actor step (tools/rollout.hpp). With GPU
// envs (env.backend: cuda) one rollout graph steps every env; async mode
// there collects the next chunk on the GPU while the learner trains on the
// last one (policy lag 1, reproducible from the seed).
//
// Every mode checks between updates whether to stop: budget spent,
// TrainOptions::stop_after_s, runtime.stop_after_updates, or a SIGINT/SIGTERM
// (tools/stop_signals.hpp, when the caller installed the handlers); each ends
// with the checkpoint, metrics and curve written. A run refuses to start in an
// out_dir holding an earlier run's checkpoint or metrics unless resumed or
// forced, and refuses a config whose estimated memory does not fit
// (tools/memory_estimate.hpp).
//
// Under `mpirun -np N` (sync mode, CPU learner) each rank steps num_envs / N
// envs, seeded and sampled as those envs are in the one-process run, and its
// learner replica trains on its columns of each minibatch, summing the loss
// statistics and the gradient with the other ranks (policy/allreduce.hpp):
// N ranks train as one process on all the envs does. Reward-scaling
// statistics, episode returns and the stop decision are global too; rank 0
// writes the metrics, curve, config and the checkpoint, which holds every
// rank's env and actor state; --resume needs the same N.
#pragma once

#include <iosfwd>
#include <string>

#include "tools/experiment.hpp"
#include "tools/ranks.hpp"

namespace mambarl {

struct TrainOptions {
  bool resume = false;
  std::string resume_from;  // empty: <out_dir>/checkpoint.safetensors
  bool force = false;       // replace an earlier run in out_dir (its checkpoint, metrics, curve, config)
  double stop_after_s = 0;  // > 0: stop (with the final checkpoint) after this much wall time
  // The data-parallel ranks this process is one of (tools/ranks.hpp); null: it trains alone.
  Ranks* ranks = nullptr;
};

struct TrainSummary {
  double mean_return = 0;   // over the last runtime.return_window episodes
  long long env_steps = 0;
  long long episodes = 0;
  long long num_params = 0;  // the policy's parameter count
  double wall_s = 0;
  std::string checkpoint, metrics, curve;
  size_t queue_high_water = 0;  // async mode: most chunks ever queued for the learner
  size_t queue_capacity = 0;    // its bound (runtime.queue_size); 0 in sync mode
  bool overlap_envs = false;    // each actor's envs stepped in two overlapped halves (runtime.overlap_envs)
  long long update = 0;         // updates done, this run and any it resumed
  int stopped_by_signal = 0;    // SIGINT/SIGTERM that stopped the run before its budget; 0 if none
};

// How `mambarl train` begins the line it prints after "final mean_return=..."
// when a signal stopped the run (what `mambarl sweep --resume` looks for).
inline constexpr const char* kInterruptedLine = "interrupted by ";

// Where a run keeps its checkpoint: <run_dir>/checkpoint.safetensors.
std::string checkpoint_file_in(const std::string& run_dir);

TrainSummary run_training(const Experiment& exp, const TrainOptions& opts, std::ostream& log);

}  // namespace mambarl

// The runner's half of a PPO update: GAE over the chunk, then epochs ×
// minibatches over its sequences, each minibatch one train_step() of the
// plugin's learner. Sequences (env columns) are kept whole so BPTT sees the
// chunk's resets and its stored initial states.
#pragma once

#include <functional>
#include <vector>

#include "kernels/base/rng.hpp"
#include "plugin/plugin_host.hpp"
#include "tools/experiment.hpp"
#include "tools/return_normalizer.hpp"
#include "tools/reward_scaler.hpp"
#include "tools/rollout.hpp"

namespace mambarl {

struct UpdateStats {
  TrainMetrics mean{};   // averaged over the minibatch steps that were applied
  int steps = 0, skipped = 0;
  std::string skip_reason;
};

// The minibatch shuffle's RNG of a learner seeded with `seed`; the host and
// device learners draw the same column orders from it.
inline Rng make_shuffle_rng(uint64_t seed) { return Rng(seed, 0x1EA2); }

// Epochs × minibatches over the B sequences of a chunk, shared by the host
// (LearnerLoop) and device (DeviceLearner) learners: each epoch shuffles the
// columns with Fisher-Yates on `rng` (the same order on every platform), then
// calls train(cols, Bm) for each run of Bm = B / minibatches shuffled
// columns; the metrics are averaged over the steps that were applied.
// `order` is scratch (B), kept by the caller so nothing is allocated per update.
using MinibatchStep = std::function<TrainMetrics(const int* cols, int Bm)>;
UpdateStats run_minibatches(const AlgoConfig& algo, int B, Rng& rng, std::vector<int>& order,
                            const MinibatchStep& train);

// Under data-parallel ranks (tools/ranks.hpp) a chunk holds this rank's B
// envs, the global columns [rank * B, (rank + 1) * B) of the N * B: every
// rank draws the same shuffle of all N * B columns and trains on its own
// columns of each minibatch (possibly none), in the shuffled order; the
// policy's learner sums across the ranks.
// even_shares (GPU learners under several ranks): each rank instead takes
// its own columns in the epoch's shuffled order and trains on B / minibatches
// of them per minibatch. Every minibatch then has one shape on every rank,
// so each GPU learner captures its update graph (with the NCCL sums in it)
// once, and all ranks capture and replay together, as NCCL requires; the
// minibatches are stratified over the ranks (the same in distribution as
// the global shuffle's, not the same columns). One rank: no difference.
// even_shares' columns of minibatch mb for the rank owning the global
// columns [first, first + B): the mb-th run of B / minibatches of them, in
// the order they have in `order` (the epoch's shuffle of all columns), as
// local indices into out (cleared first).
void even_share_columns(const std::vector<int>& order, int first, int B, int minibatches, int mb,
                        std::vector<int>& out);

class LearnerLoop {
 public:
  LearnerLoop(PolicyHandle& policy, const AlgoConfig& algo, uint64_t seed, int num_workers,
              int envs_per_worker, Ranks& ranks, bool even_shares = false);
  // Scales the chunk's rewards (if algo.normalize_rewards), computes GAE, and
  // runs epochs × minibatches of train_step. With algo.normalize_returns the
  // chunk's values are rewritten in reward units and its returns standardised.
  UpdateStats learn(Chunk& chunk, double lr);
  Rng& rng() { return rng_; }                        // minibatch shuffling; saved in checkpoints
  RewardScaler& reward_scaler() { return scaler_; }  // saved in checkpoints
  ReturnNormalizer& return_normalizer() { return return_norm_; }  // saved in checkpoints

 private:
  PolicyHandle& policy_;
  AlgoConfig algo_;
  Ranks& ranks_;
  bool even_shares_;
  Rng rng_;
  RewardScaler scaler_;
  ReturnNormalizer return_norm_;
  std::vector<int> order_;  // (N * B) shuffled global columns
  std::vector<int> mine_;   // this rank's columns of one minibatch, local indices
  // One minibatch, gathered (T, Bm, ...) time-major.
  std::vector<float> obs_, actions_, logp_, adv_, ret_, init_state_;
  std::vector<uint8_t> starts_;
};

}  // namespace mambarl

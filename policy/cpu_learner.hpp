// The learner role on the CPU: one PPO update on a [T, B] chunk
// (zero grads -> forward from the stored initial states with resets -> loss
// -> backward through time -> global-norm clip -> AdamW), plus checkpoints.
// Master weights and moments are float32 (policy/MATH.md "Precision").
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "policy/adamw.hpp"
#include "policy/io/safetensors.hpp"
#include "policy/policy_config.hpp"
#include "policy/ppo_loss.hpp"

namespace mambarl {

// Borrowed views of one chunk; every array is time-major (t, b, ...).
// L = T - context_T: the loss covers the last L steps; the context_T steps
// before them carry state and gradient only (mambarl_chunk, ABI 7).
struct ChunkView {
  int T = 0, B = 0;
  const float* obs = nullptr;            // (T, B, obs_dim)
  const float* actions = nullptr;        // (L, B, act_width)
  const float* old_logp = nullptr;       // (L, B)
  const float* advantages = nullptr;     // (L, B)
  const float* returns = nullptr;        // (L, B)
  const uint8_t* episode_start = nullptr;// (T, B)
  const float* initial_state = nullptr;  // (B, state_size)
  // Every array is CUDA device memory (a GPU learner's input only). Last, so
  // that positional initialisers of the arrays keep working.
  bool on_device = false;
  int context_T = 0;  // leading steps without loss, 0 <= context_T < T
};

struct TrainResult {
  PpoLossMetrics loss;
  double grad_norm = 0;
  bool skipped = false;   // non-finite loss or gradient: weights untouched
  std::string reason;     // which quantity / tensor was not finite
  double loss_scale = 1;  // the float16 GPU learner's loss scale for the next update (1 otherwise)
};

class CpuLearner {
 public:
  // across (may be null, not owned): the data-parallel replicas this learner
  // sums with (policy/allreduce.hpp); every replica starts from `seed`'s weights.
  CpuLearner(const PolicyConfig& policy, int obs_dim, const HeadSpec& head, const PpoLossConfig& loss,
             const AdamWConfig& adam, uint64_t seed, Allreduce* across = nullptr);

  // With replicas, `chunk` is this replica's share of the minibatch (B may be
  // 0); the loss statistics and the gradient are summed before the clip, so
  // every replica applies the same step.
  TrainResult train_step(const ChunkView& chunk, double lr);

  const ActorCritic<float>& model() const { return *model_; }
  std::shared_ptr<const ActorCritic<float>> shared_model() const { return model_; }
  const PolicyConfig& policy_config() const { return policy_; }
  AlignedVec<float>& params() { return params_; }
  const AlignedVec<float>& params() const { return params_; }
  const AdamW<float>& optimizer() const { return adam_; }
  // The gradient of the last train_step, after clipping (for tests).
  const AlignedVec<float>& grads() const { return grads_; }

  // Checkpoint (policy/checkpoint.hpp): parameters, AdamW moments, step,
  // resolved config, plus caller metadata and extra tensors. Written atomically.
  void save(const std::string& path, const std::map<std::string, std::string>& metadata,
            const std::vector<TensorRecord>& extra) const;
  // Validates names, shapes, dtypes and the policy config against this learner;
  // returns the file so the caller can read its metadata and extra tensors.
  SafetensorsFile load(const std::string& path);

 private:
  PolicyConfig policy_;
  PpoLossConfig loss_cfg_;
  Allreduce* across_;
  std::shared_ptr<ActorCritic<float>> model_;
  AlignedVec<float> params_, grads_;  // flat, model_->layout()
  AdamW<float> adam_;
  ActorCritic<float>::Cache cache_;
  // Per-update scratch, reused (sizes fixed by the chunk shape).
  Mat<float> obs_, head_, dhead_;
  Vec<float> values_, dvalues_;
  Mat<float> head_loss_, dhead_loss_;  // the loss rows of head_ / dhead_ (no context)
  Vec<float> values_loss_, dvalues_loss_;
  AlignedVec<float> state_;  // (B, state_size)
};

}  // namespace mambarl

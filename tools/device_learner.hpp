// The learner half of a PPO update on a DeviceChunk (env.backend: cuda):
// epochs × minibatches with the shared schedule of tools/learner_loop.hpp
// (same shuffle RNG and order as the host LearnerLoop), each minibatch
// gathered on the device (kernels/gather_columns.cuh) and handed to the
// plugin's train_step as CUDA views (ABI 4), so the chunk never leaves the
// GPU. Rewards are already scaled and GAE already computed by the rollout graph.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "kernels/base/rng.hpp"
#include "kernels/cuda_handles.cuh"
#include "kernels/device_buffer.cuh"
#include "plugin/plugin_host.hpp"
#include "tools/device_rollout.hpp"
#include "tools/experiment.hpp"
#include "tools/learner_loop.hpp"

namespace mambarl {

class DeviceLearner {
 public:
  // Buffers sized for chunks shaped like `shape` (B divisible by algo.minibatches); seeded like LearnerLoop.
  DeviceLearner(PolicyHandle& policy, const AlgoConfig& algo, uint64_t seed, const DeviceChunk& shape);
  // The chunk must be complete (its writer's stream synchronised). The
  // gathers run on the learner's own stream, so an async run's next chunk,
  // collected on the rollout's, is not held up by them; every train_step
  // waits for its minibatch's gather.
  UpdateStats learn(const DeviceChunk& c, double lr);
  Rng& rng() { return rng_; }  // minibatch shuffling; saved in checkpoints

 private:
  PolicyHandle& policy_;
  AlgoConfig algo_;
  Rng rng_;
  std::vector<int> order_;      // (B) shuffled columns
  int Bm_;
  CudaStream stream_;
  PinnedBuffer<int> cols_h_;    // (Bm) this minibatch's columns, staged for the upload
  DeviceBuffer<int> cols_;      // (Bm)
  // One minibatch, gathered (T, Bm, ...) time-major.
  DeviceBuffer<float> obs_, actions_, logp_, adv_, ret_;
  DeviceBuffer<uint8_t> starts_;
  DeviceBuffer<float> init_state_;  // (Bm, S)
};

}  // namespace mambarl

// The learner role on the GPU (CpuLearner's twin, policy/cpu_learner.hpp):
// one PPO update on a [T, B] chunk as ONE CUDA graph replay per update,
// after the chunk and the learning rate are staged into device memory
// outside the graph (one H2D copy from pinned staging; for a chunk already
// on the device, device-to-device copies and the lr alone from the host):
//   zero grads -> observation projection -> per layer: RMSNorm, the
//   layer's GpuMixer (policy/gpu_mixer.hpp), residual add -> final RMSNorm
//   -> heads (two GEMMs) -> PPO loss with advantage normalisation on device
//   -> backward through all of it -> global grad norm + non-finite check
//   -> clip + AdamW (step count and lr in device memory) -> D2H copy of the
//   metrics, read once per update.
//
// Parity with CpuLearner: the same model (built and initialised on the host
// from the same seed, then uploaded), the same parameter layout, formulas
// and update order, so tests compare loss terms, gradients and post-AdamW
// weights within f32 tolerance. Every reduction runs in a fixed order (no
// atomics): graph replay == eager launches bit for bit, and two learners
// with the same seed and chunks give the same bits.
//
// Shapes: the first train_step (or prepare()) fixes the chunk shape (T, B, context steps)
// and allocates every buffer for it, once; the graph is captured on the
// first graph-mode update of that shape. A chunk of another shape is
// refused (call prepare(T, B, context_T) to switch, which re-allocates and drops the
// graph), and a replay is refused if any buffer it baked in moved
// (kernels/cuda_graph.cuh), the mixers' buffers included. No device
// allocation happens after capture.
//
// Data-parallel replicas (an Allreduce that sums device memory, e.g. the
// runner's NCCL transport through the plugin ABI): the update enqueues three
// sums INSIDE the graph, on the learner's stream: the advantage totals
// (Σ Â, Σ Â², tokens) before the normalisation, the loss-term totals before
// the metrics, and the flat gradient before the norm, clip and AdamW. So
// every replica normalises over, reports and clips the whole minibatch of
// every replica, and takes the same step; the non-finite checks read global
// values, so replicas skip together. The order of every sum is fixed (NCCL
// sums a fixed communicator in a fixed order), so graph == eager still
// holds; one replica sums as the identity and gives the same bits as no
// Allreduce at all. Every replica needs at least one sequence (B >= 1).
//
// Precision (kernels/precision.hpp): float32 runs every GEMM in f32 (the
// CPU-parity path). bfloat16 / float16 keep the f32 master weights, moments,
// scans, norms and loss, and run the GEMMs on 16-bit inputs with f32
// accumulation into f32 outputs: the weights' 16-bit shadow (one (P) buffer)
// is refreshed inside the update right after AdamW and on every weights-in
// (set_params, load); activations are cast into one preallocated scratch as
// each GEMM consumes them. float16 also scales the loss (kernels/loss_scale.cuh):
// an overflowing update is skipped (reason "f16 loss-scale overflow (scale S)")
// and S halves; TrainResult::loss_scale reports S.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/loss_scale.cuh"
#include "kernels/precision.hpp"
#include "policy/allreduce.hpp"
#include "policy/cpu_learner.hpp"
#include "policy/gpu_mixer.hpp"

namespace mambarl {

class GpuLearner {
 public:
  // graph: train_step replays the captured graph; eager: it launches the
  // same work one call at a time (the graph's reference, the bench's baseline).
  enum class Launch { graph, eager };

  GpuLearner(const PolicyConfig& policy, int obs_dim, const HeadSpec& head, const PpoLossConfig& loss,
             const AdamWConfig& adam, uint64_t seed, Precision precision = Precision::float32,
             Allreduce* across = nullptr);
  ~GpuLearner();
  GpuLearner(const GpuLearner&) = delete;
  GpuLearner& operator=(const GpuLearner&) = delete;

  // Allocates every buffer for chunks of T x B (and drops a graph captured
  // for another shape). train_step calls it for the first chunk.
  void prepare(int T, int B, int context_T = 0);

  // Chunk in, metrics out (one sync per update; a device chunk with a
  // discrete head one more, to check its actions on the host). A chunk with
  // on_device set is read on the learner's own stream: whatever wrote it
  // must have finished (the caller synchronises its stream first). Host or
  // device, the same chunk gives the same update bit for bit. A skipped
  // update (non-finite loss or gradient) leaves weights, moments and step
  // untouched.
  TrainResult train_step(const ChunkView& chunk, double lr);

  void set_launch(Launch mode);
  Launch launch() const;
  Precision precision() const;

  // float16 only: the loss scale S of the next update, and setting it (a
  // power of two >= 1; tests force an overflow with a huge one) with the
  // number of good updates in a row that double it (restarting the count).
  double loss_scale() const;
  void set_loss_scale(double scale, int growth_interval = cuda::kGrowthInterval);

  const ActorCritic<float>& model() const;
  std::shared_ptr<const ActorCritic<float>> shared_model() const;
  const PolicyConfig& policy_config() const;

  // Device <-> host copies of the flat f32 buffers (model().layout()).
  std::vector<float> params() const;  // weights out
  void set_params(const float* w, size_t n);  // weights in
  std::vector<float> grads() const;  // the last update's gradient, summed over replicas, BEFORE clipping (f16: unscaled)
  std::vector<float> exp_avg() const;
  std::vector<float> exp_avg_sq() const;
  long long step_count() const;

  // The same checkpoint as CpuLearner (policy/checkpoint.hpp): either
  // learner loads what the other wrote.
  void save(const std::string& path, const std::map<std::string, std::string>& metadata,
            const std::vector<TensorRecord>& extra) const;
  SafetensorsFile load(const std::string& path);

  // Layer l's mixer engine (tests: re-preparing it moves its buffers, which
  // the captured graph must then refuse).
  GpuMixer& mixer(int l);

  // Device time in ms of each of `reps` updates (CUDA events between them,
  // all enqueued before one sync; an update spans hundreds of the events'
  // clock ticks, so one update per sample is enough: kernels/event_timing.cuh),
  // replaying the last train_step's staged chunk and lr in the current launch
  // mode, with its copy in from the host (none for a device chunk's arrays,
  // which stay staged). Weights and moments advance.
  std::vector<double> time_updates_ms(int reps);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mambarl

// The CUDA engines behind the plugin's roles (CUDA builds only): the GPU
// actor, the GPU learner, and the check that a GPU is usable at all.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "plugin/engine_roles.hpp"
#include "policy/gpu_actor.hpp"
#include "policy/gpu_learner.hpp"

namespace mambarl {

namespace {

class GpuActorRole final : public ActorRole {
 public:
  GpuActorRole(std::shared_ptr<const ActorCritic<float>> model, const PolicyConfig& cfg, int num_envs,
               uint64_t seed, bool bf16_weights)
      : a_(std::move(model), cfg, num_envs, seed, bf16_weights) {}

  void set_weights(const float* w, size_t n, long long version) override { a_.set_weights(w, n, version); }
  void reset(const uint8_t* mask) override { a_.reset(mask); }
  void act(const float* obs, const uint8_t* starts, float* actions, float* logp, float* values) override {
    a_.act(obs, starts, actions, logp, values);
  }
  void act_begin(const float* obs, const uint8_t* starts) override { a_.act_begin(obs, starts); }
  void act_end(float* actions, float* logp, float* values) override { a_.act_end(actions, logp, values); }
  void peek_values(const float* obs, const uint8_t* needed, float* values) override {
    a_.peek_values(obs, needed, values);
  }
  // Straight into the caller's buffer: at 16k envs the state is hundreds of
  // MB, fetched once per chunk with CPU envs.
  void get_state(float* state) override { a_.copy_state_to(state); }
  void set_state(const float* state) override {
    a_.set_state(state, static_cast<size_t>(a_.num_envs()) * a_.state_size());
  }
  void get_rngs(Rng* rngs) override {
    const std::vector<Rng> r = a_.rngs();  // (B)
    std::copy(r.begin(), r.end(), rngs);
  }
  void set_rngs(const Rng* rngs) override { a_.set_rngs(rngs, static_cast<size_t>(a_.num_envs())); }
  void enqueue_act(void* stream, const float* obs, const uint8_t* starts, float* actions, float* logp,
                   float* values) override {
    a_.enqueue_act(static_cast<cudaStream_t>(stream), obs, starts, actions, logp, values);
  }
  void enqueue_peek_values(void* stream, const float* obs, const uint8_t* needed, float* values) override {
    a_.enqueue_peek_values(static_cast<cudaStream_t>(stream), obs, needed, values);
  }
  void enqueue_get_state(void* stream, float* state) override {
    a_.enqueue_state(static_cast<cudaStream_t>(stream), state);
  }

 private:
  GpuActor a_;
};

// The PPO update as replays of GpuLearner's captured graph: every minibatch
// of every epoch is one replay, since the runner's minibatch shape (T, B /
// minibatches) is fixed for a run. A chunk of another shape re-prepares
// (re-allocates and re-captures) rather than being refused, so a caller
// that varies the shape still trains, only slower.
class GpuLearnerRole final : public LearnerRole {
 public:
  GpuLearnerRole(const PolicyConfig& cfg, int obs_dim, const HeadSpec& head, const PpoLossConfig& loss,
                 const AdamWConfig& adam, uint64_t seed, Precision precision, Allreduce* across)
      : l_(cfg, obs_dim, head, loss, adam, seed, precision, across) {}

  std::shared_ptr<const ActorCritic<float>> shared_model() const override { return l_.shared_model(); }
  TrainResult train_step(const ChunkView& chunk, double lr) override {
    if (chunk.T != T_ || chunk.B != B_ || chunk.context_T != Tc_) {
      l_.prepare(chunk.T, chunk.B, chunk.context_T);
      T_ = chunk.T;
      B_ = chunk.B;
      Tc_ = chunk.context_T;
    }
    return l_.train_step(chunk, lr);
  }
  size_t num_params() const override { return l_.model().layout().size(); }
  // Weights go through the host (the actor role's interface is host memory),
  // once per update (GpuActor::set_weights_device could take a device copy).
  void get_weights(float* w) const override {
    const std::vector<float> p = l_.params();  // (num_params)
    std::copy(p.begin(), p.end(), w);
  }
  void set_weights(const float* w) override { l_.set_params(w, num_params()); }
  void save(const std::string& path, const std::map<std::string, std::string>& metadata,
            const std::vector<TensorRecord>& extra) const override {
    l_.save(path, metadata, extra);
  }
  SafetensorsFile load(const std::string& path) override { return l_.load(path); }

 private:
  GpuLearner l_;
  int T_ = 0, B_ = 0, Tc_ = 0;  // the chunk shape l_ is prepared for (T_ 0: none yet)
};

}  // namespace

std::string cuda_unavailable_reason() {
  int n = 0;
  // Without a driver (CI: toolkit, no GPU) this returns an error code; it
  // never aborts. The error also becomes the thread's last error: clear it,
  // so that a later launch check does not report it as its own.
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " +
           cudaGetErrorString(e) + ")";
  }
  if (n < 1) return "no usable CUDA device (cudaGetDeviceCount found none)";
  // The engines run on the current device; one older than every architecture
  // the kernels were built for has no kernel image to run.
  constexpr int kMinArch = MAMBARL_MIN_CUDA_ARCH;
  int dev = 0;
  cudaDeviceProp prop{};
  cudaError_t p = cudaGetDevice(&dev);
  if (p == cudaSuccess) p = cudaGetDeviceProperties(&prop, dev);
  if (p != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no usable CUDA device (cudaGetDeviceProperties: ") + cudaGetErrorName(p) + ")";
  }
  const int arch = prop.major * 10 + prop.minor;
  if (kMinArch > 0 && arch < kMinArch)
    return "CUDA device " + std::to_string(dev) + " (" + prop.name + ") is sm_" + std::to_string(arch) +
           ", older than every architecture this build's kernels are compiled for (sm_" +
           std::to_string(kMinArch) + " and newer; see CMAKE_CUDA_ARCHITECTURES)";
  return "";
}

std::unique_ptr<LearnerRole> make_gpu_learner(const PolicyConfig& cfg, int obs_dim, const HeadSpec& head,
                                              const PpoLossConfig& loss, const AdamWConfig& adam,
                                              uint64_t seed, Precision precision, Allreduce* across) {
  return std::make_unique<GpuLearnerRole>(cfg, obs_dim, head, loss, adam, seed, precision, across);
}

std::unique_ptr<ActorRole> make_gpu_actor(std::shared_ptr<const ActorCritic<float>> model,
                                          const PolicyConfig& cfg, int num_envs, uint64_t seed,
                                          bool bf16_weights) {
  return std::make_unique<GpuActorRole>(std::move(model), cfg, num_envs, seed, bf16_weights);
}

}  // namespace mambarl

// The CPU engines behind the plugin's roles (CpuActor, CpuLearner), and the
// choice of engine per device.
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/base/config_node.hpp"
#include "plugin/engine_roles.hpp"
#include "policy/cpu_actor.hpp"

namespace mambarl {

namespace {

class CpuActorRole final : public ActorRole {
 public:
  CpuActorRole(std::shared_ptr<const ActorCritic<float>> model, int num_envs, uint64_t seed,
               int64_t first_env)
      : actions_(static_cast<size_t>(num_envs) * static_cast<size_t>(model->spec().head.act_width())),
        logp_(static_cast<size_t>(num_envs)),
        values_(static_cast<size_t>(num_envs)),
        a_(std::move(model), num_envs, seed, static_cast<uint64_t>(first_env)) {}

  void set_weights(const float* w, size_t n, long long version) override { a_.set_weights(w, n, version); }
  void reset(const uint8_t* mask) override { a_.reset(mask); }
  void act(const float* obs, const uint8_t* starts, float* actions, float* logp, float* values) override {
    a_.act(obs, starts, actions, logp, values);
  }
  // The whole step happens in begin (there is nothing to overlap it with on
  // this thread); end hands out its results.
  void act_begin(const float* obs, const uint8_t* starts) override {
    a_.act(obs, starts, actions_.data(), logp_.data(), values_.data());
  }
  void act_end(float* actions, float* logp, float* values) override {
    std::copy(actions_.begin(), actions_.end(), actions);
    std::copy(logp_.begin(), logp_.end(), logp);
    std::copy(values_.begin(), values_.end(), values);
  }
  // Every env: the CPU runner peeks only on steps with a truncation, where
  // one batched forward costs about what a gather of the few needed envs would.
  void peek_values(const float* obs, const uint8_t*, float* values) override { a_.peek_values(obs, values); }
  // A memory-less policy (mlp) has no state: memcpy must not see its null pointers.
  void get_state(float* state) override {
    if (!a_.state().empty()) std::memcpy(state, a_.state().data(), a_.state().size() * sizeof(float));
  }
  void set_state(const float* state) override {
    if (!a_.state().empty()) std::memcpy(a_.state().data(), state, a_.state().size() * sizeof(float));
  }
  void get_rngs(Rng* rngs) override { std::memcpy(rngs, a_.rngs().data(), a_.rngs().size() * sizeof(Rng)); }
  void set_rngs(const Rng* rngs) override {
    std::memcpy(a_.rngs().data(), rngs, a_.rngs().size() * sizeof(Rng));
  }
  void set_greedy(bool greedy) override { a_.set_greedy(greedy); }
  void enqueue_act(void*, const float*, const uint8_t*, float*, float*, float*) override {
    throw UnsupportedError(no_device("actor_enqueue_act"));
  }
  void enqueue_peek_values(void*, const float*, const uint8_t*, float*) override {
    throw UnsupportedError(no_device("actor_enqueue_peek_values"));
  }
  void enqueue_get_state(void*, float*) override {
    throw UnsupportedError(no_device("actor_enqueue_get_state"));
  }

 private:
  static std::string no_device(const char* fn) {
    return std::string(fn) +
           ": this actor runs on the cpu; device-enqueued steps need an actor on a CUDA device "
           "(runtime.device: cuda)";
  }
  // Declared before a_: they are sized from the model that a_ takes over.
  std::vector<float> actions_, logp_, values_;  // (B, act_width), (B), (B): act_begin's results
  CpuActor a_;
};
static_assert(std::is_trivially_copyable_v<Rng>, "actor Rngs are copied with memcpy");

class CpuLearnerRole final : public LearnerRole {
 public:
  CpuLearnerRole(const PolicyConfig& cfg, int obs_dim, const HeadSpec& head, const PpoLossConfig& loss,
                 const AdamWConfig& adam, uint64_t seed, Allreduce* across)
      : l_(cfg, obs_dim, head, loss, adam, seed, across) {}

  std::shared_ptr<const ActorCritic<float>> shared_model() const override { return l_.shared_model(); }
  TrainResult train_step(const ChunkView& chunk, double lr) override { return l_.train_step(chunk, lr); }
  size_t num_params() const override { return l_.params().size(); }
  void get_weights(float* w) const override {
    std::memcpy(w, l_.params().data(), num_params() * sizeof(float));
  }
  void set_weights(const float* w) override {
    std::memcpy(l_.params().data(), w, num_params() * sizeof(float));
  }
  void save(const std::string& path, const std::map<std::string, std::string>& metadata,
            const std::vector<TensorRecord>& extra) const override {
    l_.save(path, metadata, extra);
  }
  SafetensorsFile load(const std::string& path) override { return l_.load(path); }

 private:
  CpuLearner l_;
};

}  // namespace

std::unique_ptr<LearnerRole> make_learner(const PolicyConfig& cfg, int obs_dim, const HeadSpec& head,
                                          const PpoLossConfig& loss, const AdamWConfig& adam, uint64_t seed,
                                          const EngineChoice& engine, Allreduce* across) {
  // Both roles run on engine.device. The learner keeps float32 master weights
  // on either device: runtime.dtype is the GPU actor's format only, and
  // runtime.learner_dtype the GPU learner's GEMM inputs (the CPU computes in f32).
  if (engine.device == Device::cuda) {
    if (across && !across->sums_device_memory())
      throw ConfigError(
          "runtime.device: cuda: the runner's collective sums host memory only, and the GPU learner "
          "sums on the device: install NCCL (the CUDA toolkit's, or libnccl-dev) and build mambarl with "
          "-DMAMBARL_NCCL=ON, or run several ranks with runtime.device: cpu");
    return make_gpu_learner(cfg, obs_dim, head, loss, adam, seed, engine.learner, across);
  }
  if (engine.learner != Precision::float32)
    throw ConfigError(std::string("runtime.learner_dtype: ") + precision_name(engine.learner) +
                      " GEMMs need runtime.device: cuda (the CPU learner computes in float32)");
  return std::make_unique<CpuLearnerRole>(cfg, obs_dim, head, loss, adam, seed, across);
}

std::unique_ptr<ActorRole> make_actor(const LearnerRole& learner, const PolicyConfig& cfg,
                                      const EngineChoice& engine, int num_envs, uint64_t seed,
                                      int64_t first_env) {
  if (engine.device == Device::cuda && first_env != 0)
    throw UnsupportedError(
        "actor_create: the GPU actor has no first_env (data-parallel ranks run "
        "runtime.device: cpu)");
  std::unique_ptr<ActorRole> a =
      engine.device == Device::cuda
          ? make_gpu_actor(learner.shared_model(), cfg, num_envs, seed, engine.bf16_weights)
          : std::make_unique<CpuActorRole>(learner.shared_model(), num_envs, seed, first_env);
  std::vector<float> w(learner.num_params());
  learner.get_weights(w.data());
  a->set_weights(w.data(), w.size(), 0);
  return a;
}

}  // namespace mambarl

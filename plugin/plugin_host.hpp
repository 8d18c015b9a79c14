// The host side of the policy-plugin ABI: loading plugin files into a
// registry of named factories, and RAII handles over the plugin's learner and
// actor objects that turn every failed status into a mambarl::Error carrying
// the plugin's last_error(). The runner uses only this header and the C ABI
// (plugin/mambarl_plugin.h); it never sees a plugin's internals.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/base/check.hpp"
#include "plugin/mambarl_plugin.h"

namespace mambarl {

class PluginRegistry {
 public:
  // Loads one plugin file and registers its factories, all or none. Each
  // failure is an Error naming the file: dlopen fails (dlerror text), no
  // entry symbol, the plugin refuses our ABI version, a factory with another
  // abi_version or null fields, a duplicate policy name (names both files).
  // Never dlclose()s: the factories stay valid for the whole process.
  void load(const std::string& path);
  // What load() does once it has the entry point: calls it with a registry
  // whose callbacks validate every factory, then commits all or none. Public
  // so that the registration checks can be exercised without a shared library
  // (test/fuzz/fuzz_plugin_registry.cpp); `path` names the plugin in errors.
  void register_plugin(const std::string& path, mambarl_plugin_register_fn entry);

  std::vector<std::string> policy_names() const;  // sorted
  // Unknown names: an Error listing the registered ones.
  const mambarl_policy_factory& factory(const std::string& name) const;
  std::string source_of(const std::string& name) const;  // the file that registered it

  // Env types the loaded plugins added (name -> factory, file), sorted by name.
  struct EnvEntry {
    mambarl_env_factory factory;  // copied; its strings and tables live in the loaded file
    std::string file;
  };
  const std::map<std::string, EnvEntry>& envs() const { return envs_; }

 private:
  struct Entry {
    mambarl_policy_factory factory;  // copied; its strings and tables live in the loaded file
    std::string file;
  };
  const Entry& entry(const std::string& name) const;
  std::map<std::string, Entry> entries_;
  std::map<std::string, EnvEntry> envs_;
};

// libmambarl_policies.so in ../lib relative to the running executable
// (/proc/self/exe), else the same name next to it.
std::string default_plugin_path();

struct TrainMetrics {
  double loss = 0, pg_loss = 0, v_loss = 0, entropy = 0, approx_kl = 0, clip_frac = 0, grad_norm = 0;
  bool skipped = false;  // the plugin refused the update (non-finite); weights untouched
};

// A named f32 or u8 tensor stored in a checkpoint beside the policy (runner
// state). Typed storage, not raw bytes, so f32 data is never read through a
// reinterpret_cast of a byte buffer: `floats` holds f32 data, `bytes` u8 data.
struct ExtraTensor {
  std::string name;
  int32_t dtype = MAMBARL_DTYPE_U8;
  std::vector<int64_t> shape;
  std::vector<float> floats;  // f32 only
  std::vector<uint8_t> bytes;  // u8 only

  // An empty shape means one dimension of the data's length.
  static ExtraTensor f32(std::string name, std::vector<float> data, std::vector<int64_t> shape = {});
  static ExtraTensor u8(std::string name, std::vector<uint8_t> data, std::vector<int64_t> shape = {});
  // The bytes of a trivially copyable value (an Rng, a small struct).
  template <typename T, typename = std::enable_if_t<std::is_trivially_copyable_v<T>>>
  static ExtraTensor u8(std::string name, const T& pod) {
    std::vector<uint8_t> b(sizeof(T));
    std::memcpy(b.data(), &pod, sizeof(T));
    return u8(std::move(name), std::move(b));
  }

  int64_t numel() const;
  const std::vector<float>& f32() const;  // Error unless dtype is f32
  // Copies into `out`, whose size must already be numel() (the caller's
  // buffer was sized by this run's config; a mismatch means another config).
  void copy_f32(std::vector<float>& out) const;
  void copy_u8(std::vector<uint8_t>& out) const;
  template <typename T, typename = std::enable_if_t<std::is_trivially_copyable_v<T>>>
  void to_pod(T& out) const {
    check_u8_size(sizeof(T));
    std::memcpy(&out, bytes.data(), sizeof(T));
  }

 private:
  void check_u8_size(size_t n) const;
};

struct LoadedCheckpoint {
  std::map<std::string, std::string> metadata;  // all of it, the policy's keys included
  std::vector<ExtraTensor> extra;               // the runner.* tensors, in file order
  const ExtraTensor& tensor(const std::string& name) const;  // Error naming it when absent
  const ExtraTensor* find(const std::string& name) const;    // null when absent
};

// One recurrent actor (B envs) of a policy. Sizes are fixed at creation and
// every pointer argument must hold exactly that many elements.
class ActorHandle {
 public:
  ActorHandle(const mambarl_policy_vtable* vt, mambarl_actor* a, int num_envs,
              const mambarl_policy_info& info, int obs_dim, long long weights_version);
  ~ActorHandle();
  ActorHandle(const ActorHandle&) = delete;
  ActorHandle& operator=(const ActorHandle&) = delete;

  int num_envs() const { return B_; }
  size_t state_size() const { return static_cast<size_t>(info_.state_size); }  // floats per env
  // obs (B, obs_dim), starts (B) -> actions (B, act_width), logp (B), values (B)
  void act(const float* obs, const uint8_t* starts, float* actions, float* logp, float* values);
  // (B, obs_dim) -> (B); state unchanged. needed (B) or null (every env): the
  // envs whose value is wanted; the others' values are unspecified.
  void peek_values(const float* obs, const uint8_t* needed, float* values);
  void reset(const uint8_t* mask);                    // (B)
  void get_state(std::vector<float>& state);          // resized to (B, state_size)
  void get_state(float* state);                       // (B, state_size) floats at `state`
  void set_state(const std::vector<float>& state);
  void set_weights(const std::vector<float>& weights, long long version);
  long long weights_version() const { return version_; }
  void get_rng(std::vector<uint8_t>& bytes);          // resized to actor_rng_size()
  void set_rng(const std::vector<uint8_t>& bytes);
  // true: act() takes the mode of the action distribution instead of sampling
  // (ABI 6; an engine without it refuses with an Error saying why).
  void set_greedy(bool greedy);

  // act() in two halves (ABI 4), so the caller can step envs while the actor
  // works: host buffers as in act(); obs/starts untouched until act_end().
  void act_begin(const float* obs, const uint8_t* starts);
  void act_end(float* actions, float* logp, float* values);

  // Device-resident rollouts (ABI 4): act / peek_values / get_state on device
  // buffers of the same shapes, enqueued on `stream` (a cudaStream_t) without
  // synchronising, so the caller may capture them into a CUDA graph. Errors
  // for an actor not on a GPU. The other methods run on the actor's own
  // stream and synchronise it before returning; before calling one of them
  // after enqueue_*, synchronise `stream` (they do not wait for it).
  void enqueue_act(void* stream, const float* obs, const uint8_t* starts, float* actions, float* logp,
                   float* values);
  void enqueue_peek_values(void* stream, const float* obs, const uint8_t* needed, float* values);
  void enqueue_get_state(void* stream, float* state);  // (B, state_size)

 private:
  void check(mambarl_status s, const char* what) const;
  const mambarl_policy_vtable* vt_;
  mambarl_actor* a_;
  int B_, obs_dim_;
  mambarl_policy_info info_;
  long long version_;
};

// A policy's learner: parameters, optimizer, checkpoints; the actors' factory.
class PolicyHandle {
 public:
  // probe()s the device, then create()s; refusals and failures are Errors
  // with the plugin's reason.
  static std::unique_ptr<PolicyHandle> create(const mambarl_policy_factory& factory,
                                              const mambarl_policy_create_args& args);
  ~PolicyHandle();
  PolicyHandle(const PolicyHandle&) = delete;
  PolicyHandle& operator=(const PolicyHandle&) = delete;

  const mambarl_policy_info& info() const { return info_; }
  const mambarl_env_info& env() const { return env_; }
  std::string resolved_config() const;  // YAML of the policy section, defaults filled

  // The chunk's views may all be device memory (MAMBARL_DEVICE_CUDA) for a
  // policy whose learner runs on the GPU; whatever wrote them must have
  // finished (synchronise its stream first). Mixed devices are refused.
  TrainMetrics train_step(const mambarl_chunk& chunk, double lr);
  // Why the last train_step() that reported skipped was refused.
  const std::string& last_skip_reason() const { return skip_reason_; }

  void get_weights(std::vector<float>& weights);  // resized to (num_params)
  void set_weights(const std::vector<float>& weights);

  void save(const std::string& path, const std::map<std::string, std::string>& metadata,
            const std::vector<ExtraTensor>& extra);
  // On failure the policy is unchanged.
  LoadedCheckpoint load(const std::string& path);
  // The parameters alone, from a checkpoint or an exported weights file (ABI 6);
  // its policy config must be this policy's. On failure the policy is unchanged.
  void load_weights(const std::string& path);

  // first_env: the actor's env b samples as env first_env + b of a whole-batch
  // actor (a data-parallel rank's share of the envs).
  std::unique_ptr<ActorHandle> create_actor(int num_envs, uint64_t seed, int64_t first_env = 0);

 private:
  PolicyHandle(const mambarl_policy_vtable* vt, mambarl_policy* p, const mambarl_env_info& env);
  void check(mambarl_status s, const char* what) const;
  const mambarl_policy_vtable* vt_;
  mambarl_policy* p_;
  mambarl_env_info env_;
  mambarl_policy_info info_{};
  std::string skip_reason_;
};

}  // namespace mambarl

// The vectorised environment the runner steps: B copies of one env type with
// Gymnasium semantics (auto-reset inside step; `terminated` = the MDP ended,
// `truncated` = the time limit hit; both may be set on the same step, as with
// Gymnasium's TimeLimit), and the registry that builds one from the `env:`
// map of an experiment config.
//
// All outputs are row-major (B, ·) buffers owned by the VecEnv; their pointers
// stay valid and fixed for its lifetime (reset/step overwrite them in place).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/base/config_node.hpp"

namespace mambarl {

struct ActionSpace {
  bool discrete = true;
  int n = 0;                     // discrete: number of actions; continuous: dim
  std::vector<float> low, high;  // continuous only: (n) bounds
};

struct EnvSpec {
  std::string id;  // the registered type: "cartpole", ...
  int obs_dim = 0;
  std::vector<float> obs_low, obs_high;  // (obs_dim): every observation lies inside
  ActionSpace action;
  int max_episode_steps = 0;  // truncation limit (0 = none: the env always terminates by itself)
  // POPGym's baselines show the previous action in the observation; for envs
  // that are meaningless without it (Concentration, MineSweeper, ...), and for
  // NoisyStatelessCartPole, whose velocity filter needs the push, the bundled
  // types turn `env.prev_action` on by default.
  bool prev_action_by_default = false;
};

// The spec of an env whose observation is made of one-hot codes (every entry
// in [0, 1]) and whose action is one of `actions`. max_episode_steps 0: the
// env always terminates by itself.
inline EnvSpec one_hot_env_spec(std::string id, int obs_dim, int actions, int max_episode_steps,
                                bool prev_action_by_default = false) {
  EnvSpec s;
  s.id = std::move(id);
  s.obs_dim = obs_dim;
  s.obs_low.assign(static_cast<size_t>(obs_dim), 0.0f);
  s.obs_high.assign(static_cast<size_t>(obs_dim), 1.0f);
  s.action.n = actions;
  s.max_episode_steps = max_episode_steps;
  s.prev_action_by_default = prev_action_by_default;
  return s;
}

// Width of one env's row in the action buffer passed to VecEnv::step.
inline int action_width(const ActionSpace& a) { return a.discrete ? 1 : a.n; }

class VecEnv {
 public:
  virtual ~VecEnv() = default;
  virtual const EnvSpec& spec() const = 0;
  virtual int num_envs() const = 0;
  // Env i draws all its randomness from Rng(seed, first_env + i); resets every
  // env; obs() is then valid. first_env: where these envs start in a larger
  // batch split over data-parallel ranks, so each is seeded as in one process.
  virtual void reset(uint64_t seed, uint64_t first_env = 0) = 0;
  // actions: (B, action_width) floats; a discrete action is an integral value in [0, n).
  // Steps every env and auto-resets the finished ones inside the step.
  virtual void step(const float* actions) = 0;
  virtual const float* obs() const = 0;        // (B, obs_dim): after an auto-reset, the NEW episode's first obs
  virtual const float* final_obs() const = 0;  // (B, obs_dim): the obs this step led to in the stepped episode
                                               // (where done: the finished episode's last; elsewhere == obs())
  virtual const float* reward() const = 0;          // (B)
  virtual const uint8_t* terminated() const = 0;    // (B)
  virtual const uint8_t* truncated() const = 0;     // (B)
  virtual const float* episode_return() const = 0;    // (B): return of the episode that just ended, where done; else 0
  virtual const int32_t* episode_length() const = 0;  // (B): its length in steps, where done; else 0
  virtual void render(int env, std::ostream& os) const = 0;  // text picture of env `env`'s current state
  // The complete state of every env (episode state, RNG, running return and
  // length, current obs) as opaque bytes, so a checkpointed run resumes
  // bit-exactly. load_state() validates the size and refuses another layout.
  virtual std::vector<uint8_t> save_state() const = 0;
  virtual void load_state(const std::vector<uint8_t>& bytes) = 0;
};

// Builds from the `env:` map of an experiment config. `type` (required) and
// `num_envs` (default 16, >= 1) are read here; every other key belongs to the
// env type, which rejects unknown ones (ConfigError naming file:line:col).
std::unique_ptr<VecEnv> make_vec_env(const ConfigNode& env_cfg);

// Registry, so that a plugin can add env types. The bundled types are
// registered on first use of any of these functions.
using EnvFactory = std::function<std::unique_ptr<VecEnv>(const ConfigNode& env_cfg, int num_envs)>;
void register_env(const std::string& type, EnvFactory factory);  // duplicate type -> Error
std::vector<std::string> registered_envs();                      // sorted

// `backend` (default cpu): where the envs step, `cpu` (a VecEnv) or `cuda`
// (GPU-resident, envs/gpu_vec_env.hpp; the runner checks that it can). Any
// other value is a ConfigError naming env.backend; read with the other shared
// keys (envs/env_registry.cpp), so a missing `type` is one too.
std::string env_backend(const ConfigNode& env_cfg);

// The `env:` map as a run writes it back (config.yaml, checkpoints): the
// shared keys and, for a bundled type, that type's own keys, each with its
// value, defaults filled in; a plugin's type keeps its own keys as given.
// Unknown keys and bad values are ConfigErrors, as in make_vec_env.
YAML::Node resolved_env_config(const ConfigNode& env_cfg);

// For factories: fails (ConfigError) on any key of env_cfg other than `type`,
// `num_envs`, `backend` and the env type's own keys.
void check_env_keys(const ConfigNode& env_cfg, const std::vector<std::string>& own_keys);

}  // namespace mambarl

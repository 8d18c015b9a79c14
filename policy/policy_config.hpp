// The `policy:` section of an experiment: which mixer, its sizes and options.
// One table of keys shared by every type and one per type
// (policy/policy_config.cpp) drive the parsing (unknown keys are errors naming
// file:line:col), the GPU kernels' limits, the resolved config written back
// into logs and checkpoints, and the reference (`mambarl config --keys policy`).
#pragma once

#include <memory>
#include <string>

#include <yaml-cpp/yaml.h>

#include "kernels/base/config_node.hpp"
#include "kernels/base/config_schema.hpp"
#include "policy/actor_critic.hpp"
#include "policy/gru.hpp"
#include "policy/mamba1.hpp"
#include "policy/mamba3.hpp"
#include "policy/mlp_mixer.hpp"

namespace mambarl {

struct PolicyConfig {
  std::string type = "mamba1";  // mamba1 | mamba3 | gru | mlp: the one place this default is written
  int d_model = 64;
  int n_layers = 2;
  double log_std_init = 0.0;    // Gaussian heads only
  bool start_embedding = false; // ActorCriticSpec::start_embedding
  Mamba1Config mamba1;
  Mamba3Config mamba3;
  MlpConfig mlp;

  // The `policy:` map. on_cuda (runtime.device resolved to cuda): also
  // refuses what the GPU kernels cannot hold (kernels/kernel_limits.hpp),
  // naming the key, the value and the limit.
  static PolicyConfig from_yaml(const ConfigNode& node, bool on_cuda = false);
  YAML::Node to_yaml() const;
};

// The policy type `policy` names (the default when it names none), without
// checking it: a plugin may add types.
std::string policy_type(const ConfigNode& policy);

// The built-in policy types, in the schema's order: mamba1, mamba3, gru, mlp.
std::vector<std::string> policy_type_names();

// The keys of `policy:` (shared and per type), for `mambarl config --keys`.
ConfigSection policy_config_section();

// Builds the model for an env with `obs_dim` observations and action head `head`.
template <typename S>
std::unique_ptr<ActorCritic<S>> make_actor_critic(const PolicyConfig& cfg, int obs_dim,
                                                  const HeadSpec& head);

}  // namespace mambarl

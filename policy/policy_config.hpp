// The `policy:` section of an experiment: which mixer, its sizes and options.
// Parsed strictly (unknown keys are errors naming file:line:col), written back
// resolved (every default filled in) into logs and checkpoints.
#pragma once

#include <memory>
#include <string>

#include <yaml-cpp/yaml.h>

#include "kernels/config_node.hpp"
#include "policy/actor_critic.hpp"
#include "policy/gru.hpp"
#include "policy/mamba1.hpp"
#include "policy/mamba3.hpp"
#include "policy/mlp_mixer.hpp"

namespace mambarl {

struct PolicyConfig {
  std::string type = "mamba1";  // mamba1 | mamba3 | gru | mlp
  int d_model = 64;
  int n_layers = 2;
  double log_std_init = 0.0;    // Gaussian heads only
  Mamba1Config mamba1;
  Mamba3Config mamba3;
  MlpConfig mlp;

  static PolicyConfig from_yaml(const ConfigNode& node);  // the `policy:` map
  YAML::Node to_yaml() const;
};

// Builds the model for an env with `obs_dim` observations and action head `head`.
template <typename S>
std::unique_ptr<ActorCritic<S>> make_actor_critic(const PolicyConfig& cfg, int obs_dim,
                                                  const HeadSpec& head);

}  // namespace mambarl

// The env types bundled with mambarl. One function maps an `env:` config to
// the prototype env struct it describes (reading and validating the type's
// own keys); the CPU factories (BatchedEnv) and the CUDA ones
// (make_gpu_vec_env) both build from it, so the two backends accept exactly
// the same configs. The registry inserts the CPU factories when it is first
// used: an explicit call, not static initialisers, which a static library
// would drop at link time.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "envs/autoencode.hpp"
#include "envs/battleship.hpp"
#include "envs/cartpole.hpp"
#include "envs/concentration.hpp"
#include "envs/count_recall.hpp"
#include "envs/higher_lower.hpp"
#include "envs/minesweeper.hpp"
#include "envs/multiarmed_bandit.hpp"
#include "envs/repeat_first.hpp"
#include "envs/repeat_previous.hpp"
#include "envs/tmaze.hpp"
#include "envs/vec_env.hpp"

namespace mambarl {

// kernels/base/config_schema.hpp; declared here only, which keeps that header out
// of gpu_vec_env.cu (nvcc's host pass warns on its pointers to members).
struct KeyDoc;
struct ConfigSection;

// One alternative per env struct (cartpole, stateless_cartpole and
// noisy_stateless_cartpole are all CartPole).
using EnvPrototype = std::variant<CartPole, RepeatPrevious, CountRecall, TMaze, RepeatFirst, Autoencode, HigherLower,
                                  Concentration, Minesweeper, Battleship, MultiarmedBandit>;

// The bundled types, sorted.
const std::vector<std::string>& builtin_env_types();

// What env_cfg describes for bundled type `type` (one of builtin_env_types()):
// the prototype env struct and whether the previous action is observed
// (`prev_action`, default: the type's spec().prev_action_by_default). Unknown
// keys and bad values are ConfigErrors.
struct BuiltinEnv {
  EnvPrototype prototype;
  bool prev_action = false;
};
BuiltinEnv builtin_env(const std::string& type, const ConfigNode& env_cfg);
// The same type's own keys, each with its value (prev_action resolved), added
// to `out`: its part of the resolved `env:` a run writes back.
void write_builtin_env_keys(const std::string& type, const ConfigNode& env_cfg, YAML::Node& out);

// The keys every env type shares (bundled or a plugin's), read and checked
// as make_vec_env does; their table is in envs/env_registry.cpp.
struct EnvHead {
  std::string type;
  int num_envs = 16;
  std::string backend = "cpu";  // cpu | cuda: where the envs step (the runner checks that they can)
};
EnvHead read_env_head(const ConfigNode& env_cfg);
std::vector<KeyDoc> env_head_keys();  // for the reference

// The keys of `env:` (shared, and per bundled type), for `mambarl config --keys`.
ConfigSection env_config_section();

std::vector<std::pair<std::string, EnvFactory>> builtin_env_factories();

}  // namespace mambarl

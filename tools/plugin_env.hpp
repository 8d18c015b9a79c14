// Env types added by plugins, made available to `env.type` like the bundled
// ones: a VecEnv adapter over the plugin's C env table, registered into the
// env registry once per process per factory.
#pragma once

#include "plugin/plugin_host.hpp"

namespace mambarl {

// Registers every env type of `registry` that is not registered yet. Loading
// the same plugin again (train, then eval, in one process) is a no-op; a
// bundled type or another plugin's type of the same name is an Error naming
// the file.
void register_plugin_envs(const PluginRegistry& registry);

}  // namespace mambarl

// Loads the plugin named by an experiment and creates its policy for an env:
// the one place that turns an Experiment into plugin create-arguments, shared
// by train, eval and the end-to-end bench.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "envs/vec_env.hpp"
#include "plugin/plugin_host.hpp"
#include "tools/experiment.hpp"

namespace mambarl {

struct PolicySession {
  PluginRegistry registry;
  std::string plugin_path;
  std::unique_ptr<PolicyHandle> policy;
  mambarl_policy_info info{};
  std::string device;  // runtime.device resolved: "cpu" or "cuda"
  std::string device_note;  // one line when the resolved device is not the one asked for ("" otherwise)
};

// Loads runtime.plugin (default: the bundled libmambarl_policies.so) and
// runtime.extra_plugins, and makes their env types available to env.type.
std::unique_ptr<PolicySession> load_plugins(const Experiment& exp);

// Creates the experiment's policy for `env` from the loaded plugins; the
// plugin parses `policy:` from the experiment text plus its overrides.
// Resolves runtime.device with the policy's probe() first: cuda that this
// machine or build cannot run (probe: MAMBARL_ERROR) falls back to cpu and
// sets device_note; cuda that the policy type never runs (MAMBARL_UNSUPPORTED)
// is a config error, as is runtime.dtype bfloat16 on the CPU.
// collective (may be null): the data-parallel ranks the learner sums with
// (tools/ranks.hpp); it must outlive the policy.
void create_policy(PolicySession& session, const Experiment& exp, const EnvSpec& env,
                   const mambarl_collective* collective = nullptr);

// Builds the env and the policy of an experiment and throws on the first
// problem (what `mambarl train --check` and the config tests run).
void validate_experiment(const Experiment& exp);

}  // namespace mambarl

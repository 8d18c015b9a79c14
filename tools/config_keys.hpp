// The reference of the config keys, written from the sections' schemas
// (kernels/base/config_schema.hpp; the tables are in envs/env_registry.cpp,
// envs/builtin_envs.cpp, policy/policy_config.cpp and tools/experiment.cpp):
// `mambarl config --keys` prints it as text, and
// `--markdown` as the page kept in the repository (tools/CONFIG_KEYS.md),
// which test_config_keys checks is current.
#pragma once

#include <string>
#include <vector>

#include "kernels/base/config_schema.hpp"

namespace mambarl {

// The command that writes tools/CONFIG_KEYS.md; named in the page and in the test's failure.
inline constexpr const char* kConfigKeysRefresh = "mambarl config --keys --markdown > tools/CONFIG_KEYS.md";

// Every section, in a config file's order: env, policy, algo, runtime.
std::vector<ConfigSection> config_sections();

// One block per section: each key with its type, default, range or choices, and doc.
std::string config_keys_text(const std::vector<ConfigSection>& sections);
// The same as a Markdown page: a header saying how it is made, then one table per section.
std::string config_keys_markdown(const std::vector<ConfigSection>& sections);

}  // namespace mambarl

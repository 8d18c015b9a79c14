// The env-type registry and make_vec_env. The registry is a function-local
// static (thread-safe initialisation, built on first use) that starts out
// holding the bundled types; plugins add theirs with register_env.
#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>

#include "envs/builtin_envs.hpp"
#include "envs/vec_env.hpp"
#include "kernels/base/check.hpp"
#include "kernels/base/config_schema.hpp"

namespace mambarl {
namespace {

// Enough for any host; a typo like 1e9 fails here instead of in an allocation.
constexpr int kMaxNumEnvs = 1 << 20;

struct Registry {
  std::mutex m;
  std::map<std::string, EnvFactory> factories;  // sorted, so listings are stable
  Registry() {
    for (auto& [type, factory] : builtin_env_factories()) factories.emplace(type, std::move(factory));
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

// The keys of every env type; a row's default is its member's initialiser in
// envs/builtin_envs.hpp (EnvHead).
// clang-format off
const Schema<EnvHead>& env_head_schema() {
  static const Schema<EnvHead> s({
    required("type", &EnvHead::type, "the env type: a bundled one (below) or one a plugin registers"),
    number("num_envs", &EnvHead::num_envs, 1, kMaxNumEnvs, "envs stepped together"),
    choice("backend", &EnvHead::backend, {"cpu", "cuda"}, "where the envs step: cpu, or cuda (GPU-resident, bundled types; needs a GPU actor)"),
  });
  return s;
}
// clang-format on

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

void register_env(const std::string& type, EnvFactory factory) {
  MAMBARL_CHECK(!type.empty() && factory, "register_env: needs a type name and a factory");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.m);
  MAMBARL_CHECK(r.factories.emplace(type, std::move(factory)).second,
                "register_env: env type '" << type << "' is already registered");
}

std::vector<std::string> registered_envs() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.m);
  std::vector<std::string> names;
  for (const auto& kv : r.factories) names.push_back(kv.first);
  return names;
}

void check_env_keys(const ConfigNode& env_cfg, const std::vector<std::string>& own_keys) {
  std::vector<std::string> known = env_head_schema().keys();
  known.insert(known.end(), own_keys.begin(), own_keys.end());
  env_cfg.check_known(known);
}

std::string env_backend(const ConfigNode& env_cfg) { return read_env_head(env_cfg).backend; }

EnvHead read_env_head(const ConfigNode& env_cfg) {
  if (!env_cfg.defined() || !env_cfg.yaml().IsMap()) env_cfg.fail("", "expected a map with at least a `type`");
  EnvHead head;
  env_head_schema().fill(env_cfg, head);  // the env type checks the unknown keys, knowing its own
  return head;
}

std::vector<KeyDoc> env_head_keys() { return env_head_schema().docs(); }

YAML::Node resolved_env_config(const ConfigNode& env_cfg) {
  const EnvHead head = read_env_head(env_cfg);
  YAML::Node out = env_head_schema().write(head);
  const std::vector<std::string>& bundled = builtin_env_types();
  if (std::binary_search(bundled.begin(), bundled.end(), head.type)) {
    write_builtin_env_keys(head.type, env_cfg, out);
    return out;
  }
  // A plugin's type: the ABI carries no table of its keys, so they stay as given.
  const std::vector<std::string>& shared = env_head_schema().keys();
  for (const auto& kv : env_cfg.yaml()) {
    const std::string key = kv.first.Scalar();
    if (std::find(shared.begin(), shared.end(), key) == shared.end()) out[key] = YAML::Clone(kv.second);
  }
  return out;
}

std::unique_ptr<VecEnv> make_vec_env(const ConfigNode& env_cfg) {
  const EnvHead head = read_env_head(env_cfg);
  const std::string& type = head.type;
  const int num_envs = head.num_envs;
  EnvFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.m);
    const auto it = r.factories.find(type);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) env_cfg.fail("type", "unknown env type '" + type + "' (registered: " + join(registered_envs()) + ")");
  std::unique_ptr<VecEnv> env = factory(env_cfg, num_envs);
  MAMBARL_CHECK(env && env->num_envs() == num_envs,
                "env type '" << type << "': its factory did not build " << num_envs << " envs");
  return env;
}

}  // namespace mambarl

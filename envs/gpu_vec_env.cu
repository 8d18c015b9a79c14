// make_gpu_vec_env / has_gpu_env: the CUDA backend of every bundled env type.
// The config goes through the same parsing as make_vec_env (read_env_head and
// builtin_env, envs/builtin_envs.hpp), so both backends accept and
// refuse the same configs; the prototype is then wrapped in GpuBatchedEnv.
#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>

#include "envs/builtin_envs.hpp"
#include "envs/gpu_batched_env.cuh"
#include "envs/gpu_vec_env.hpp"

namespace mambarl {

bool has_gpu_env(const std::string& type) {
  const std::vector<std::string>& types = builtin_env_types();
  return std::find(types.begin(), types.end(), type) != types.end();
}

std::unique_ptr<GpuVecEnv> make_gpu_vec_env(const ConfigNode& env_cfg) {
  const EnvHead head = read_env_head(env_cfg);
  if (!has_gpu_env(head.type)) {
    std::string types;
    for (const std::string& t : builtin_env_types()) types += (types.empty() ? "" : ", ") + t;
    env_cfg.fail("type", "env type '" + head.type + "' has no CUDA version (types with one: " + types + ")");
  }
  const BuiltinEnv env = builtin_env(head.type, env_cfg);
  return std::visit(
      [&](const auto& prototype) -> std::unique_ptr<GpuVecEnv> {
        using Env = std::decay_t<decltype(prototype)>;
        return std::make_unique<GpuBatchedEnv<Env>>(prototype, head.num_envs, env.prev_action);
      },
      env.prototype);
}

}  // namespace mambarl

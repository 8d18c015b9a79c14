#include "tools/policy_session.hpp"

#include <algorithm>

#include "policy/policy_config.hpp"  // policy_type
#include "tools/plugin_env.hpp"

namespace mambarl {

std::unique_ptr<PolicySession> load_plugins(const Experiment& exp) {
  auto s = std::make_unique<PolicySession>();
  s->plugin_path = exp.runtime.plugin.empty() ? default_plugin_path() : exp.runtime.plugin;
  s->registry.load(s->plugin_path);
  for (const auto& p : exp.runtime.extra_plugins) s->registry.load(p);
  register_plugin_envs(s->registry);
  return s;
}

namespace {

// Sets s.device and s.device_note from runtime.device and the factory's probe.
void resolve_device(PolicySession& s, const Experiment& exp, const mambarl_policy_factory& f) {
  const RuntimeConfig& rt = exp.runtime;
  const ConfigNode node = exp.section("runtime");
  s.device = "cpu";
  s.device_note.clear();
  std::string why_cpu = "runtime.device: cpu";
  if (rt.device != "cpu") {
    char why[1024] = {0};
    const mambarl_status st = f.probe("cuda", why, sizeof why);
    why[sizeof why - 1] = '\0';  // whatever the plugin wrote, the string ends in our buffer
    why_cpu = why[0] ? why : "the plugin gave no reason";
    if (st == MAMBARL_OK) {
      s.device = "cuda";
    } else if (st == MAMBARL_UNSUPPORTED && rt.device == "cuda") {
      node.fail("device", "cuda: " + why_cpu);
    } else {
      s.device_note = rt.device == "cuda" ? "runtime.device: cuda, but " + why_cpu + ": falling back to the CPU"
                                          : "runtime.device: auto chose the CPU: " + why_cpu;
    }
  }
  if (rt.dtype == "bfloat16" && s.device != "cuda")
    node.fail("dtype", "bfloat16 weights need the GPU actor, but this run is on the CPU (" + why_cpu +
                           "); the CPU engines compute in float32");
  if (rt.learner_dtype != "float32" && s.device != "cuda")
    node.fail("learner_dtype", rt.learner_dtype +
                                   " GEMMs need the GPU learner, but this run is on the CPU (" + why_cpu +
                                   "); the CPU learner computes in float32");
}

}  // namespace

void create_policy(PolicySession& session, const Experiment& exp, const EnvSpec& env,
                   const mambarl_collective* collective) {
  PolicySession* s = &session;
  const ConfigNode policy = exp.section("policy");
  const std::string type = policy_type(policy);
  const auto names = s->registry.policy_names();
  if (std::find(names.begin(), names.end(), type) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    policy.fail("type", "'" + type + "' is not a policy of " + s->plugin_path + " (registered: " + known + ")");
  }
  const mambarl_policy_factory& f = s->registry.factory(type);
  resolve_device(*s, exp, f);

  std::vector<const char*> overrides;
  for (const auto& o : exp.overrides) overrides.push_back(o.c_str());
  mambarl_policy_create_args args{};
  args.config_text = exp.text.c_str();
  args.config_file = exp.file.c_str();
  args.overrides = overrides.data();
  args.num_overrides = static_cast<int32_t>(overrides.size());
  args.env.obs_dim = env.obs_dim;
  args.env.discrete = env.action.discrete ? 1 : 0;
  args.env.action_dim = env.action.n;
  const AlgoConfig& a = exp.algo;
  args.learner = mambarl_learner_config{a.clip_eps,   a.vf_coef,    a.ent_coef,
                                        a.normalize_advantages ? 1 : 0,
                                        a.adam_beta1, a.adam_beta2, a.adam_eps,
                                        a.weight_decay, a.max_grad_norm, a.vf_trunk_coef};
  args.seed = exp.runtime.seed;
  args.device = s->device.c_str();
  args.dtype = exp.runtime.dtype.c_str();
  args.collective = collective;
  s->policy = PolicyHandle::create(f, args);
  s->info = s->policy->info();
}

void validate_experiment(const Experiment& exp) {
  const auto session = load_plugins(exp);
  const auto env = make_vec_env(exp.section("env"));
  create_policy(*session, exp, env->spec());
}

}  // namespace mambarl

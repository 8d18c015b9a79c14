#include "tools/evaluate.hpp"

#include <numeric>
#include <ostream>

#include <yaml-cpp/yaml.h>

#include "policy/io/safetensors.hpp"
#include "tools/export.hpp"
#include "tools/policy_session.hpp"

namespace mambarl {

namespace {

// Appended after the user's overrides. One env, so --render shows whole
// episodes in order; the CPU engines (see run_evaluation's comment), which
// compute in float32.
const std::vector<std::string> kEvalOverrides = {"env.num_envs=1", "runtime.device=cpu",
                                                 "runtime.dtype=float32", "runtime.learner_dtype=float32"};

const std::string& metadata(const SafetensorsFile& f, const std::string& key) {
  const auto it = f.metadata.find(key);
  MAMBARL_CHECK(
      it != f.metadata.end(),
      f.source << ": no '" << key << "' metadata: not a file written by `mambarl train` or `mambarl export`");
  return it->second;
}

std::vector<std::string> eval_overrides(const EvalOptions& opts, const std::vector<std::string>& more = {}) {
  std::vector<std::string> o = opts.overrides;
  o.insert(o.end(), more.begin(), more.end());
  o.insert(o.end(), kEvalOverrides.begin(), kEvalOverrides.end());
  return o;
}

// The experiment to run an exported file with: opts.config, where every
// policy key the config leaves out takes the weights' value. (The keys it
// sets are checked against the weights once the policy has resolved them.)
Experiment experiment_for_export(const EvalOptions& opts, const YAML::Node& trained) {
  const Experiment asked = load_experiment(opts.config, eval_overrides(opts));
  const ConfigNode policy = asked.section("policy");
  const std::string type = trained["type"].as<std::string>();
  // Before the weights' other keys join the config: those of another type
  // would be refused as unknown keys, hiding the real difference.
  if (policy.has("type") && policy.get<std::string>("type", "") != type)
    policy.fail("type", "'" + policy.get<std::string>("type", "") + "', but the weights in " + opts.weights +
                            " are of a " + type + " policy");
  std::vector<std::string> from_weights;
  for (const auto& kv : trained) {
    const std::string key = kv.first.as<std::string>();
    if (!policy.has(key)) from_weights.push_back("policy." + key + "=" + kv.second.as<std::string>());
  }
  return load_experiment(opts.config, eval_overrides(opts, from_weights));
}

// Each key of the weights' policy must resolve to the same value in the
// config's policy (both are the plugin's resolved YAML, so equal values are
// equal text); names the first key that differs.
void check_policy_matches(const Experiment& exp, const YAML::Node& trained, const std::string& resolved,
                          const std::string& weights) {
  const YAML::Node ours = YAML::Load(resolved);
  for (const auto& kv : trained) {
    const std::string key = kv.first.as<std::string>(), theirs = kv.second.as<std::string>();
    const std::string mine = ours[key] ? ours[key].as<std::string>() : "(not a key of this policy)";
    if (mine != theirs)
      exp.section("policy").fail(key,
                                 mine + ", but the weights in " + weights + " were trained with " + theirs);
  }
}

void print_action(std::ostream& out, const float* a, int width, bool discrete) {
  out << "action ";
  if (discrete) {
    out << static_cast<int>(a[0]);
    return;
  }
  out << "[";
  for (int j = 0; j < width; ++j) out << (j ? ", " : "") << a[j];
  out << "]";
}

}  // namespace

EvalResult run_evaluation(const EvalOptions& opts, std::ostream& out) {
  MAMBARL_CHECK(opts.episodes >= 1, "eval: --episodes must be >= 1, got " << opts.episodes);
  const SafetensorsFile file = read_safetensors(opts.weights);
  const bool exported = is_exported_weights(file);
  MAMBARL_CHECK(!exported || !opts.config.empty(),
                opts.weights << " holds exported weights (from `mambarl export`): pass the experiment to run "
                                "them in with --config <experiment.yaml>");
  MAMBARL_CHECK(exported || opts.config.empty(),
                "--config " << opts.config << ": " << opts.weights
                            << " is a training checkpoint, which carries its own experiment; "
                               "drop --config (override its keys with key=value)");
  const YAML::Node trained = YAML::Load(metadata(file, "policy_config"));
  const Experiment exp = exported
                             ? experiment_for_export(opts, trained)
                             : parse_experiment(metadata(file, "experiment"),
                                                opts.weights + " (stored experiment)", eval_overrides(opts));

  auto session = load_plugins(exp);
  auto env = make_vec_env(exp.section("env"));
  create_policy(*session, exp, env->spec());
  if (exported) {
    check_policy_matches(exp, trained, session->policy->resolved_config(), opts.weights);
    session->policy->load_weights(opts.weights);
  } else {
    session->policy->load(opts.weights);
  }
  // Created after loading: an actor starts from the policy's weights.
  auto actor = session->policy->create_actor(1, opts.seed);
  actor->set_greedy(opts.deterministic);

  const int O = env->spec().obs_dim, W = static_cast<int>(session->info.act_width);
  std::vector<float> obs(static_cast<size_t>(O)), act(static_cast<size_t>(W)), logp(1), value(1);  // B = 1
  std::vector<uint8_t> start{1};
  env->reset(opts.seed);
  EvalResult r;
  int t = 0;
  double return_so_far = 0;
  while (static_cast<int>(r.returns.size()) < opts.episodes) {
    std::copy(env->obs(), env->obs() + O, obs.begin());
    if (opts.render) {
      out << "--- episode " << r.returns.size() + 1 << " step " << t << "\n";
      env->render(0, out);
    }
    actor->act(obs.data(), start.data(), act.data(), logp.data(), value.data());
    env->step(act.data());
    ++t;
    return_so_far += env->reward()[0];
    if (opts.render) {
      print_action(out, act.data(), W, env->spec().action.discrete);
      out << " reward " << env->reward()[0] << " return " << return_so_far << "\n";
    }
    start[0] = env->terminated()[0] || env->truncated()[0];
    if (start[0]) {
      r.returns.push_back(env->episode_return()[0]);
      out << "episode " << r.returns.size() << ": return " << env->episode_return()[0] << " length "
          << env->episode_length()[0] << (env->terminated()[0] ? " (terminated)" : " (truncated)") << "\n";
      t = 0;
      return_so_far = 0;
    }
  }
  r.mean_return = std::accumulate(r.returns.begin(), r.returns.end(), 0.0) / r.returns.size();
  out << "eval mean_return=" << r.mean_return << " episodes=" << r.returns.size() << std::endl;
  return r;
}

}  // namespace mambarl

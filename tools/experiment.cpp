#include "tools/experiment.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace mambarl {

namespace {

using A = AlgoConfig;
using R = RuntimeConfig;

// The runner's sections, one row per key (kernels/base/config_schema.hpp). A row's
// default is its member's initialiser in tools/experiment.hpp; the rows'
// order is the order of the keys in a run's config.yaml.
// clang-format off
const Schema<AlgoConfig>& algo_schema() {
  static const Schema<AlgoConfig> s({
    number("total_env_steps", &A::total_env_steps, 1LL, 1LL << 50, "env steps (all envs) to train for"),
    number("chunk_len", &A::chunk_len, 1, 4096, "T: steps per env per chunk; the loss covers a chunk's steps"),
    number("bptt_len", &A::bptt_len, 1, 1 << 16, "truncated-BPTT sequence length: the chunk plus bptt_len - chunk_len steps of context (state and gradient, no loss); a multiple of chunk_len", same_as(&A::chunk_len, "chunk_len")),
    number("gamma", &A::gamma, 0.0, 1.0, "discount"),
    number("gae_lambda", &A::gae_lambda, 0.0, 1.0, "GAE lambda"),
    value("normalize_rewards", &A::normalize_rewards, "divide rewards by the running std of the discounted return"),
    value("normalize_returns", &A::normalize_returns, "train the value head on value targets standardised by their running mean and std; GAE reads its outputs back in reward units"),
    number("epochs", &A::epochs, 1, 1000, "PPO epochs over each chunk"),
    number("minibatches", &A::minibatches, 1, 1 << 20, "minibatches per epoch, over sequences (num_envs / minibatches each)"),
    number("lr", &A::lr, 0.0, 1.0, "Adam learning rate"),
    choice("lr_schedule", &A::lr_schedule, {"constant", "linear"}, "linear: decays to 0 at total_env_steps"),
    number("clip_eps", &A::clip_eps, 0.0, 1.0, "PPO ratio clip"),
    number("vf_coef", &A::vf_coef, 0.0, 1e3, "value loss weight"),
    number("vf_trunk_coef", &A::vf_trunk_coef, 0.0, 1.0, "share of the value loss's gradient that reaches the layers shared with the policy head (the value head itself always gets all of it); 1: a plain shared actor-critic, 0: those layers learn from the policy loss alone (policy/MATH.md)"),
    number("ent_coef", &A::ent_coef, 0.0, 1e3, "entropy bonus weight"),
    value("normalize_advantages", &A::normalize_advantages, "normalise advantages per minibatch"),
    number("max_grad_norm", &A::max_grad_norm, 0.0, 1e9, "global gradient-norm clip"),
    number("adam_beta1", &A::adam_beta1, 0.0, 0.999999, "Adam beta1"),
    number("adam_beta2", &A::adam_beta2, 0.0, 0.999999999, "Adam beta2"),
    number("adam_eps", &A::adam_eps, 1e-30, 1.0, "Adam epsilon"),
    number("weight_decay", &A::weight_decay, 0.0, 10.0, "AdamW decoupled weight decay"),
    choice("on_nonfinite", &A::on_nonfinite, {"stop", "skip"}, "what a non-finite loss or gradient does: stop the run, or skip the update"),
  });
  return s;
}

const Schema<RuntimeConfig>& runtime_schema() {
  static const Schema<RuntimeConfig> s({
    value("seed", &R::seed, "seeds the envs, the policy's initialisation and sampling"),
    choice("device", &R::device, {"cpu", "cuda", "auto"}, "where actors and learner run; cuda falls back to cpu (saying why) without a usable GPU; auto: cuda where the plugin accepts it"),
    choice("dtype", &R::dtype, {"float32", "bfloat16"}, "the GPU actor's weights (f32 state and sums)"),
    choice("learner_dtype", &R::learner_dtype, {"float32", "bfloat16", "float16"}, "the GPU learner's GEMM inputs (f32 master weights and sums)", same_as(&R::dtype, "dtype")),
    value("out_dir", &R::out_dir, "the run's folder (metrics, curve, config.yaml, checkpoint); not empty"),
    value("sync", &R::sync, "lag-0, bit-reproducible loop; false: async actors"),
    number("num_actors", &R::num_actors, 1, 256, "actor threads in async mode"),
    number("queue_size", &R::queue_size, 1, 1024, "chunks buffered between actors and learner"),
    number("max_policy_lag", &R::max_policy_lag, 0, 1 << 20, "chunks older than this (in learner versions) are dropped"),
    number("log_every", &R::log_every, 1, 1 << 30, "updates between progress lines"),
    number("checkpoint_every", &R::checkpoint_every, 0, 1 << 30, "updates between checkpoints (0: only the final one)"),
    choice("metrics_format", &R::metrics_format, {"csv", "jsonl"}, "format of the run's metrics file"),
    value("plugin", &R::plugin, "the policy plugin; empty: the bundled libmambarl_policies.so"),
    list("extra_plugins", &R::extra_plugins, "more plugins (e.g. ones adding env types)"),
    number("return_window", &R::return_window, 1, 1 << 20, "episodes averaged in mean_return"),
    number("actor_stall_s", &R::actor_stall_s, 0.01, 1e6, "async mode: an actor busy on one chunk this long stops the run, named"),
    number("stop_after_updates", &R::stop_after_updates, 0LL, 1LL << 50, "> 0: checkpoint and exit after this many updates (continue with --resume); 0: no limit"),
    number("collective_timeout_s", &R::collective_timeout_s, 0.1, 1e6, "several ranks (mpirun): a rank that waits longer than this for the others (in an MPI collective, or an update's NCCL sums) ends the job, naming itself"),
    choice("overlap_envs", &R::overlap_envs, {"auto", "on", "off"}, "step half of an actor's envs on the CPU while the other half's actor step runs; auto: on with cuda actors and an even env count"),
  });
  return s;
}
// clang-format on

AlgoConfig parse_algo(const ConfigNode& n) {
  AlgoConfig a = algo_schema().read(n);
  // Across keys: the context before a chunk is whole earlier chunks of the same envs.
  if (a.bptt_len % a.chunk_len != 0)
    n.fail("bptt_len", "must be a multiple of algo.chunk_len (" + std::to_string(a.chunk_len) + "), got " +
                           std::to_string(a.bptt_len));
  return a;
}

RuntimeConfig parse_runtime(const ConfigNode& n) {
  RuntimeConfig r = runtime_schema().read(n);
  // A run writes all its files there; "" would write them into the working directory.
  if (r.out_dir.empty()) n.fail("out_dir", "must not be empty");
  return r;
}

}  // namespace

Experiment load_experiment(const std::string& path, const std::vector<std::string>& overrides) {
  // An ifstream opens a directory and reads nothing from it.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path + " is a directory (expected an experiment config file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open experiment config");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_experiment(ss.str(), path, overrides);
}

Experiment parse_experiment(const std::string& text, const std::string& path,
                            const std::vector<std::string>& overrides) {
  Experiment e;
  e.file = path;
  e.overrides = overrides;
  e.text = text;
  try {
    e.root = YAML::Load(e.text);
  } catch (const YAML::ParserException& ex) {
    throw ConfigError(path + ":" + std::to_string(ex.mark.line + 1) + ":" +
                      std::to_string(ex.mark.column + 1) + ": malformed YAML: " + ex.msg);
  }
  check_yaml_bounds(e.root, path);
  if (!e.root.IsDefined() || e.root.IsNull())
    throw ConfigError(path + " is empty (expected an experiment config with env: and policy: sections)");
  if (!e.root.IsMap()) throw ConfigError(path + ": the experiment config must be a YAML map");
  auto log = std::make_shared<OverrideLog>();
  apply_overrides(e.root, overrides, "command line", log.get());
  e.override_log = log;
  const ConfigNode root(e.root, path, "", e.override_log);
  root.check_known({"env", "policy", "algo", "runtime"});
  if (!root.has("env")) root.fail("env", "required section is missing");
  if (!root.has("policy")) root.fail("policy", "required section is missing");
  e.algo = parse_algo(root.child("algo"));
  e.runtime = parse_runtime(root.child("runtime"));
  return e;
}

std::string Experiment::resolved_yaml(const YAML::Node& env_resolved, const std::string& policy_resolved,
                                      const std::string& device) const {
  YAML::Node out = YAML::Clone(root);
  out["env"] = env_resolved;
  out["policy"] = YAML::Load(policy_resolved);
  out["algo"] = algo_schema().write(algo);
  out["runtime"] = runtime_schema().write(runtime);
  // As resolved against the plugin (cpu or cuda), not as asked (auto).
  out["runtime"]["device"] = device;
  YAML::Emitter em;
  em << out;
  return em.c_str();
}

std::vector<ConfigSection> runner_config_sections() {
  return {{"algo", algo_schema().docs(), {}}, {"runtime", runtime_schema().docs(), {}}};
}

}  // namespace mambarl

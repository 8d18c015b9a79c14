#include "tools/experiment.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace mambarl {

namespace {

AlgoConfig parse_algo(const ConfigNode& n) {
  n.check_known({"total_env_steps", "chunk_len", "bptt_len", "gamma", "gae_lambda", "normalize_rewards", "epochs", "minibatches", "lr",
                 "lr_schedule", "clip_eps", "vf_coef", "ent_coef", "normalize_advantages",
                 "max_grad_norm", "adam_beta1", "adam_beta2", "adam_eps", "weight_decay",
                 "on_nonfinite"});
  AlgoConfig a;
  a.total_env_steps = n.get_in<long long>("total_env_steps", a.total_env_steps, 1, 1LL << 50);
  a.chunk_len = n.get_in("chunk_len", a.chunk_len, 1, 4096);
  a.bptt_len = n.get_in("bptt_len", a.chunk_len, 1, 1 << 16);
  if (a.bptt_len % a.chunk_len != 0)
    n.fail("bptt_len", "must be a multiple of algo.chunk_len (" + std::to_string(a.chunk_len) + "), got " +
                           std::to_string(a.bptt_len));
  a.gamma = n.get_in("gamma", a.gamma, 0.0, 1.0);
  a.gae_lambda = n.get_in("gae_lambda", a.gae_lambda, 0.0, 1.0);
  a.normalize_rewards = n.get("normalize_rewards", a.normalize_rewards);
  a.epochs = n.get_in("epochs", a.epochs, 1, 1000);
  a.minibatches = n.get_in("minibatches", a.minibatches, 1, 1 << 20);
  a.lr = n.get_in("lr", a.lr, 0.0, 1.0);
  a.lr_schedule = n.get_choice("lr_schedule", a.lr_schedule, {"constant", "linear"});
  a.clip_eps = n.get_in("clip_eps", a.clip_eps, 0.0, 1.0);
  a.vf_coef = n.get_in("vf_coef", a.vf_coef, 0.0, 1e3);
  a.ent_coef = n.get_in("ent_coef", a.ent_coef, 0.0, 1e3);
  a.normalize_advantages = n.get("normalize_advantages", a.normalize_advantages);
  a.max_grad_norm = n.get_in("max_grad_norm", a.max_grad_norm, 0.0, 1e9);
  a.adam_beta1 = n.get_in("adam_beta1", a.adam_beta1, 0.0, 0.999999);
  a.adam_beta2 = n.get_in("adam_beta2", a.adam_beta2, 0.0, 0.999999999);
  a.adam_eps = n.get_in("adam_eps", a.adam_eps, 1e-30, 1.0);
  a.weight_decay = n.get_in("weight_decay", a.weight_decay, 0.0, 10.0);
  a.on_nonfinite = n.get_choice("on_nonfinite", a.on_nonfinite, {"stop", "skip"});
  return a;
}

RuntimeConfig parse_runtime(const ConfigNode& n) {
  n.check_known({"seed", "device", "dtype", "learner_dtype", "out_dir", "sync", "num_actors", "queue_size",
                 "max_policy_lag", "log_every", "checkpoint_every", "metrics_format", "plugin",
                 "return_window", "stop_after_updates", "extra_plugins", "actor_stall_s", "overlap_envs"});
  RuntimeConfig r;
  r.seed = n.get<uint64_t>("seed", r.seed);
  r.device = n.get_choice("device", r.device, {"cpu", "cuda", "auto"});
  r.dtype = n.get_choice("dtype", r.dtype, {"float32", "bfloat16"});
  r.learner_dtype = n.get_choice("learner_dtype", r.dtype, {"float32", "bfloat16", "float16"});
  r.out_dir = n.get<std::string>("out_dir", r.out_dir);
  if (r.out_dir.empty()) n.fail("out_dir", "must not be empty");
  r.sync = n.get("sync", r.sync);
  r.num_actors = n.get_in("num_actors", r.num_actors, 1, 256);
  r.queue_size = n.get_in("queue_size", r.queue_size, 1, 1024);
  r.max_policy_lag = n.get_in("max_policy_lag", r.max_policy_lag, 0, 1 << 20);
  r.log_every = n.get_in("log_every", r.log_every, 1, 1 << 30);
  r.checkpoint_every = n.get_in("checkpoint_every", r.checkpoint_every, 0, 1 << 30);
  r.metrics_format = n.get_choice("metrics_format", r.metrics_format, {"csv", "jsonl"});
  r.plugin = n.get<std::string>("plugin", r.plugin);
  if (n.has("extra_plugins")) {
    const YAML::Node list = n.yaml()["extra_plugins"];
    if (!list.IsSequence()) n.fail("extra_plugins", "expected a list of plugin paths");
    for (const auto& item : list) {
      if (!item.IsScalar() || item.Scalar().empty()) n.fail("extra_plugins", "expected a list of plugin paths");
      r.extra_plugins.push_back(item.Scalar());
    }
  }
  r.return_window = n.get_in("return_window", r.return_window, 1, 1 << 20);
  r.actor_stall_s = n.get_in("actor_stall_s", r.actor_stall_s, 0.01, 1e6);
  r.stop_after_updates = n.get_in<long long>("stop_after_updates", r.stop_after_updates, 0, 1LL << 50);
  r.overlap_envs = n.get_choice("overlap_envs", r.overlap_envs, {"auto", "on", "off"});
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

std::string Experiment::resolved_yaml(const std::string& policy_resolved, const std::string& device) const {
  YAML::Node out = YAML::Clone(root);
  out["policy"] = YAML::Load(policy_resolved);
  const AlgoConfig& a = algo;
  YAML::Node al;
  al["total_env_steps"] = a.total_env_steps;
  al["chunk_len"] = a.chunk_len;
  al["bptt_len"] = a.bptt_len;
  al["gamma"] = a.gamma;
  al["gae_lambda"] = a.gae_lambda;
  al["normalize_rewards"] = a.normalize_rewards;
  al["epochs"] = a.epochs;
  al["minibatches"] = a.minibatches;
  al["lr"] = a.lr;
  al["lr_schedule"] = a.lr_schedule;
  al["clip_eps"] = a.clip_eps;
  al["vf_coef"] = a.vf_coef;
  al["ent_coef"] = a.ent_coef;
  al["normalize_advantages"] = a.normalize_advantages;
  al["max_grad_norm"] = a.max_grad_norm;
  al["adam_beta1"] = a.adam_beta1;
  al["adam_beta2"] = a.adam_beta2;
  al["adam_eps"] = a.adam_eps;
  al["weight_decay"] = a.weight_decay;
  al["on_nonfinite"] = a.on_nonfinite;
  out["algo"] = al;
  const RuntimeConfig& r = runtime;
  YAML::Node rt;
  rt["seed"] = r.seed;
  rt["device"] = device;
  rt["dtype"] = r.dtype;
  rt["learner_dtype"] = r.learner_dtype;
  rt["out_dir"] = r.out_dir;
  rt["sync"] = r.sync;
  rt["num_actors"] = r.num_actors;
  rt["queue_size"] = r.queue_size;
  rt["max_policy_lag"] = r.max_policy_lag;
  rt["log_every"] = r.log_every;
  rt["checkpoint_every"] = r.checkpoint_every;
  rt["metrics_format"] = r.metrics_format;
  rt["plugin"] = r.plugin;
  for (const auto& p : r.extra_plugins) rt["extra_plugins"].push_back(p);
  rt["return_window"] = r.return_window;
  rt["actor_stall_s"] = r.actor_stall_s;
  rt["stop_after_updates"] = r.stop_after_updates;
  rt["overlap_envs"] = r.overlap_envs;
  out["runtime"] = rt;
  YAML::Emitter em;
  em << out;
  return em.c_str();
}

}  // namespace mambarl

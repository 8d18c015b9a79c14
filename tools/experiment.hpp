// An experiment config: the YAML file after command-line overrides, with the
// runner's own sections (`algo:`, `runtime:`) parsed strictly. `env:` belongs
// to the env factory and `policy:` to the plugin; both get the same
// overridden document, so every section reports file:line:col for its keys.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "kernels/base/config_node.hpp"
#include "kernels/base/config_schema.hpp"

namespace mambarl {

struct AlgoConfig {
  long long total_env_steps = 100000;
  int chunk_len = 32;            // T: steps per chunk; the loss covers a chunk's steps
  // The learner's sequence length (truncated BPTT): each sequence is the
  // chunk's T steps after bptt_len - T steps of the same envs' previous chunks
  // (the context), which carry recurrent state and gradient but no loss. A
  // multiple of chunk_len; absent from the config, it is chunk_len (no context).
  // Code that builds an AlgoConfig itself gets no context until it sets one.
  int bptt_len = 0;
  int context_len() const { return bptt_len > chunk_len ? bptt_len - chunk_len : 0; }  // steps before the chunk's own
  double gamma = 0.99;
  double gae_lambda = 0.95;
  bool normalize_rewards = true;  // divide rewards by the running std of the discounted return
  bool normalize_returns = false;  // the value head learns standardised targets (tools/return_normalizer.hpp)
  int epochs = 4;
  int minibatches = 4;           // over sequences: each holds num_envs / minibatches of them
  double lr = 3e-4;
  std::string lr_schedule = "linear";  // constant | linear (to 0 at total_env_steps)
  double clip_eps = 0.2;
  double vf_coef = 0.5;
  double vf_trunk_coef = 1.0;  // share of the value loss's gradient into the shared layers
  double ent_coef = 0.01;
  bool normalize_advantages = true;
  double max_grad_norm = 0.5;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_eps = 1e-8, weight_decay = 0.0;
  std::string on_nonfinite = "stop";   // stop | skip: what a non-finite loss/gradient does
};

struct RuntimeConfig {
  uint64_t seed = 1;
  // cpu | cuda | auto. cuda: the actors and the learner run on the GPU (every
  // policy type), and a machine without a usable GPU falls back to the CPU
  // with one line saying why; auto: cuda where the plugin's probe accepts
  // it, else cpu.
  std::string device = "cpu";
  std::string dtype = "float32";  // float32 | bfloat16: the GPU actor's weights (f32 state and sums)
  // float32 | bfloat16 | float16: the GPU learner's GEMM inputs (f32 master
  // weights and accumulation); absent from the config, it is `dtype`.
  std::string learner_dtype = "float32";
  std::string out_dir = "runs/default";
  bool sync = true;              // lag-0, bit-reproducible loop
  int num_actors = 1;            // actor threads in async mode
  int queue_size = 2;            // chunks buffered between actors and learner
  int max_policy_lag = 2;        // chunks older than this (in learner versions) are dropped
  int log_every = 10;            // updates between progress lines
  int checkpoint_every = 50;     // updates between checkpoints (0: only the final one)
  std::string metrics_format = "csv";  // csv | jsonl
  std::string plugin;            // empty: the bundled libmambarl_policies.so
  std::vector<std::string> extra_plugins;  // more plugins (e.g. ones adding env types)
  int return_window = 100;       // episodes averaged in mean_return
  double actor_stall_s = 300;     // async mode: an actor busy on one chunk this long is reported
                                  // as stalled and the run stops with an error naming it
  long long stop_after_updates = 0;  // > 0: checkpoint and exit once this many updates are done
                                     // (time-sliced jobs; continue with --resume). 0: no limit
  // auto | on | off: split each actor's envs in two halves, each with its own
  // actor, and step one half's envs on the CPU while the other half's actor
  // step runs (tools/rollout.hpp). auto: on when the actors run on cuda and
  // the envs per actor are even; on needs them even; off: one actor per worker.
  std::string overlap_envs = "auto";
  // Several ranks with a GPU learner (NCCL): a learner update still running
  // after this long waits for a rank that died or hangs; the job ends with
  // an error naming the rank that waited (tools/nccl_collective.hpp).
  double collective_timeout_s = 300;
};

struct Experiment {
  std::string file;                    // path of the YAML file
  std::string text;                    // its text, as read
  std::vector<std::string> overrides;  // "a.b=c" or "~a.b" from the command line
  YAML::Node root;                     // after overrides
  std::shared_ptr<const OverrideLog> override_log;  // which keys the overrides decided
  AlgoConfig algo;
  RuntimeConfig runtime;

  ConfigNode section(const std::string& key) const {
    return ConfigNode(root, file, "", override_log).child(key);
  }
  // The resolved document (overrides applied, runner defaults filled in,
  // runtime.device as resolved against the plugin: cpu or cuda), with the
  // env's and the policy's own resolved sections (resolved_env_config, the
  // plugin's resolved config).
  std::string resolved_yaml(const YAML::Node& env_resolved, const std::string& policy_resolved,
                            const std::string& device) const;
};

// The keys of `algo:` and `runtime:`, from their schemas (tools/experiment.cpp),
// for `mambarl config --keys` and tools/CONFIG_KEYS.md.
std::vector<ConfigSection> runner_config_sections();

// Reads and validates `path`; a missing, empty or duplicated key, bad YAML or a
// bad key is a ConfigError naming file:line:col (or the override) and the key;
// so is a `path` that is a directory or an empty file.
Experiment load_experiment(const std::string& path, const std::vector<std::string>& overrides);
// The same from text already in memory (e.g. the experiment stored in a
// checkpoint); `name` stands in for the file in messages.
Experiment parse_experiment(const std::string& text, const std::string& name,
                            const std::vector<std::string>& overrides);

}  // namespace mambarl

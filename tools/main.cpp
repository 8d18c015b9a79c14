// mambarl: the command-line runner (train, eval, bench, export, sweep, plot, config).
//
// The one place the command line is defined: CLI11 reads every subcommand's
// arguments into the option structs the commands take (TrainOptions,
// EvalOptions, BenchOptions, SoakOptions, SweepOptions, PlotOptions), checking each value's
// type and range, and writes --help from the same definitions. Usage errors
// exit 2, a command that fails exits 1.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "kernels/base/check.hpp"
#include "kernels/base/config_node.hpp"
#include "policy/policy_config.hpp"
#include "tools/bench/bench.hpp"
#include "tools/bench/bench_soak.hpp"
#include "tools/cli_args.hpp"
#include "tools/config_keys.hpp"
#include "tools/evaluate.hpp"
#include "tools/experiment.hpp"
#include "tools/export.hpp"
#include "tools/plot_runs.hpp"
#include "tools/ranks.hpp"
#include "tools/stop_signals.hpp"
#include "tools/sweep.hpp"
#include "tools/sweep_main.hpp"
#include "tools/trainer.hpp"

namespace {

// For ->check() on the override positionals.
const CLI::Validator kOverride(
    [](std::string& word) -> std::string {
      return mambarl::is_override(word)
                 ? ""
                 : "expected an override: key=value (algo.lr=1e-3) or ~key (~policy.d_state), got '" + word + "'";
    },
    "");

const char* const kOverridesHelp =
    "dotted overrides of the experiment's keys: key=value (algo.lr=1e-3, runtime.out_dir=runs/x) sets one, "
    "~key (~policy.d_state, e.g. after policy.type=gru on a mamba1 config) deletes one";

CLI::Option* add_overrides(CLI::App& cmd, std::vector<std::string>& overrides) {
  return cmd.add_option("overrides", overrides, kOverridesHelp)->type_name("key=value|~key")->check(kOverride);
}

struct TrainCommand {
  std::string config;
  std::vector<std::string> overrides;
  mambarl::TrainOptions opts;
  CLI::Option* overrides_opt = nullptr;
  CLI::Option* resume_opt = nullptr;
};

CLI::App* add_train(CLI::App& app, TrainCommand& c) {
  CLI::App* cmd = app.add_subcommand("train", "train the experiment of a config file");
  cmd->add_option("config", c.config, "the experiment (YAML)")->required()->type_name("config.yaml");
  c.overrides_opt = add_overrides(*cmd, c.overrides);
  c.resume_opt = cmd->add_option("--resume", c.opts.resume_from,
                                 "continue the run in out_dir from its checkpoint, or from the checkpoint "
                                 "given (bit-exact in sync mode)")
                     ->expected(0, 1)
                     ->type_name("[checkpoint]");
  cmd->add_flag("--force", c.opts.force, "replace an earlier run in out_dir, removing its files first")
      ->excludes(c.resume_opt);
  cmd->footer(
      "Writes <out_dir>/metrics.csv, curve.svg, config.yaml and checkpoint.safetensors. An out_dir that\n"
      "holds an earlier run's checkpoint or metrics is refused unless --resume continues it or --force\n"
      "replaces it. Ctrl-C (SIGINT) or SIGTERM stops after the update in flight, writing the checkpoint,\n"
      "metrics and curve, and exits 130 / 143; a second Ctrl-C exits at once.\n"
      "Under mpirun -np N (a build with MPI, sync mode, CPU): N data-parallel ranks of env.num_envs / N\n"
      "envs each, training as one process on all the envs would; rank 0 writes the run's files\n"
      "(README.md, \"Training on several processes\").\n"
      "Ends with: final mean_return=<x> env_steps=<n> wall_s=<s>");
  return cmd;
}

// --resume takes an optional checkpoint, and CLI11 gives it the next word
// whatever that is: an override there (`--resume algo.lr=1e-3`) goes back
// among the others, at its place on the command line (later overrides win).
void reclaim_override_from_resume(const CLI::App& cmd, TrainCommand& c) {
  if (!mambarl::is_override(c.opts.resume_from)) return;
  size_t before = 0;  // overrides given before --resume
  for (const CLI::Option* o : cmd.parse_order()) {
    if (o == c.resume_opt) break;
    if (o == c.overrides_opt) ++before;
  }
  c.overrides.insert(c.overrides.begin() + static_cast<std::ptrdiff_t>(before), c.opts.resume_from);
  c.opts.resume_from.clear();
}

int run_train(int argc, char** argv, const TrainCommand& c) {
  // Under mpirun -np N: rank 0 speaks (log and summary), the others are silent
  // unless they fail; an error on any rank ends every rank, naming it.
  const std::unique_ptr<mambarl::Ranks> ranks = mambarl::make_ranks();
  mambarl::TrainOptions opts = c.opts;
  opts.ranks = ranks.get();
  std::ostream silent(nullptr);
  std::ostream& out = ranks->is_root() ? std::cout : silent;
  const auto exp =
      mambarl::on_every_rank(*ranks, "train", [&] { return mambarl::load_experiment(c.config, c.overrides); });
  const mambarl::StopOnSignals stop_on_signals;
  const auto s = mambarl::on_every_rank(*ranks, "train", [&] { return mambarl::run_training(exp, opts, out); });
  if (!ranks->is_root()) return s.stopped_by_signal == 0 ? 0 : 128 + s.stopped_by_signal;
  std::cout << "learning curve: " << s.curve << "\ncheckpoint: " << s.checkpoint << "\nmetrics: " << s.metrics
            << "\n";
  std::cout << "final mean_return=" << s.mean_return << " env_steps=" << s.env_steps << " wall_s=" << s.wall_s
            << std::endl;
  if (s.stopped_by_signal == 0) return 0;
  // The same command with --resume (and without --force) continues the run.
  // (--resume <checkpoint> is dropped too: the run's own checkpoint is newer.)
  std::vector<std::string> again{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--resume" && !c.opts.resume_from.empty() && i + 1 < argc && c.opts.resume_from == argv[i + 1]) ++i;
    else if (a != "--force" && a != "--resume" && a.rfind("--resume=", 0) != 0) again.push_back(a);
  }
  again.push_back("--resume");
  std::cout << mambarl::kInterruptedLine << mambarl::signal_name(s.stopped_by_signal) << " at update " << s.update
            << " (env_steps " << s.env_steps << " of algo.total_env_steps " << exp.algo.total_env_steps
            << "); continue with: " << mambarl::shell_command(again) << std::endl;
  return 128 + s.stopped_by_signal;
}

CLI::App* add_eval(CLI::App& app, mambarl::EvalOptions& o) {
  CLI::App* cmd = app.add_subcommand("eval", "run a trained checkpoint, or exported weights, on a fresh env");
  cmd->add_option("weights", o.weights,
                  "a checkpoint of `mambarl train`, which carries its experiment, or weights written by "
                  "`mambarl export`, which need --config")
      ->required()
      ->type_name("checkpoint|weights.safetensors");
  add_overrides(*cmd, o.overrides);
  cmd->add_option("--episodes", o.episodes, "episodes to run, >= 1")->transform(mambarl::whole_number(1))
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "env reset and sampling seed, >= 0")
      ->transform(mambarl::whole_number<uint64_t>(0))
      ->capture_default_str();
  cmd->add_flag("--deterministic", o.deterministic, "greedy actions: argmax of the logits / the Gaussian's mean");
  cmd->add_flag("--render", o.render,
                "per step: the env's text frame, the action, the reward and the episode's return so far");
  cmd->add_option("--config", o.config,
                  "the experiment for exported weights: its env is used, and its policy section must agree "
                  "with the weights (keys it leaves out come from the weights)")
      ->type_name("config.yaml");
  cmd->footer(
      "Runs on the CPU, one env, and prints each episode's return and length, then:\n"
      "eval mean_return=<x> episodes=<n>");
  return cmd;
}

struct ExportCommand {
  std::string checkpoint, out;
};

CLI::App* add_export(CLI::App& app, ExportCommand& c) {
  CLI::App* cmd = app.add_subcommand("export", "write a checkpoint's policy weights alone (for PyTorch / HF tools)");
  cmd->add_option("checkpoint", c.checkpoint, "a checkpoint of `mambarl train`")->required();
  cmd->add_option("out", c.out, "the weights file to write; not the checkpoint itself (same path, a link to it)")
      ->required()
      ->type_name("out.safetensors");
  cmd->footer(
      "Writes the weights under their model names (layers.0.mixer.in_proj.weight, ...), with the policy\n"
      "config as metadata, and no optimizer or runner state; run them with\n"
      "mambarl eval <out.safetensors> --config <config.yaml>.");
  return cmd;
}

// `bench rollout|train|e2e|soak`: one subcommand each, sharing `o` but soak.
CLI::App* add_bench(CLI::App& app, mambarl::BenchOptions& o, mambarl::SoakOptions& soak) {
  CLI::App* bench = app.add_subcommand("bench", "time the engines or the runner; print one JSON object");
  bench->require_subcommand(1);
  const auto add = [&](const char* what, const char* help) {
    CLI::App* cmd = bench->add_subcommand(what, help);
    cmd->add_option("--device", o.device, "where actor and learner run")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    cmd->add_option("--reps", o.reps, "repetitions, >= 1 (e2e: updates per run); default: the bench's own")
        ->transform(mambarl::whole_number(1));
    return cmd;
  };
  add("rollout",
      "the T=1 actor step: us/step and heap allocations per step (--device cuda: the GPU actor's graph)");
  CLI::App* train =
      add("train",
          "chunk forward, forward+backward and the whole PPO update (ms; --device cuda: the GPU learner's "
          "captured update, graph and eager, for every policy with a GPU engine)");
  train
      ->add_option("--shape", o.shape,
                   "--device cuda: one chunk of T steps x B envs, d_model D, L layers instead of the default "
                   "three shapes")
      ->type_name("TxBxDxL");
  train->add_option("--policy", o.policy, "one policy type only (default: all of them)")
      ->check(CLI::IsMember(mambarl::policy_type_names()));
  train->add_option("--dtype", o.dtype,
                    "--device cuda: one learner precision only (runtime.learner_dtype; default: all three)")
      ->check(CLI::IsMember({"float32", "bfloat16", "float16"}));
  CLI::App* e2e = add("e2e",
                      "the training runner end to end (sync mode unless --async): env-steps/s over the whole run and in the "
                      "steady state (as PufferLib: the least-squares slope of env steps over time after the "
                      "first 10% of the updates), for cartpole and stateless_cartpole x mamba1 and mamba3 "
                      "(d_model 64, 2 layers)");
  e2e->add_option("--env-backend", o.env_backend,
                  "--device cuda: CPU envs at 1024/4096/16384, GPU-resident envs at 1024/4096/16384/65536, "
                  "or both (the default), beside the all-CPU runner at 1024")
      ->check(CLI::IsMember({"cpu", "cuda", "both"}));
  e2e->add_flag("--async", o.async,
                "runtime.sync: false: GPU envs collect the next chunk while the learner trains on the last "
                "(policy lag 1); CPU envs step on one actor thread beside the learner");
  e2e->add_option("--plot", o.plot, "an SVG of env-steps/s against num_envs, one line per series")
      ->type_name("FILE.svg");
  e2e->footer("overlap_envs in the JSON: whether CPU envs stepped in two halves beside the actor step, as "
              "runtime.overlap_envs: auto does for GPU actors.");

  CLI::App* cmd = bench->add_subcommand(
      "soak", "the async actor-learner loop for minutes: memory over time, a pass/fail verdict, an SVG plot");
  // The config is optional before the overrides: a word goes to it only if it is no override.
  cmd->validate_positionals();
  cmd->add_option("config", soak.config,
                  "the experiment (default: CartPole, mamba1 d_model 64 x 2 layers, 64 envs, 2 actor threads)")
      ->type_name("config.yaml")
      ->check(CLI::Validator(
          [](std::string& word) -> std::string {
            return mambarl::is_override(word) ? "an override, not a config file" : "";
          },
          ""));
  add_overrides(*cmd, soak.overrides);
  cmd->add_option("--minutes", soak.minutes, "how long to run, > 0")->check(mambarl::positive_number())
      ->capture_default_str();
  cmd->add_option("--sample-s", soak.sample_s, "seconds between memory samples, > 0")
      ->check(mambarl::positive_number())
      ->capture_default_str();
  cmd->add_option("--out", soak.plot, "the SVG plot of memory over time")->capture_default_str();
  cmd->footer(
      "Samples resident memory (/proc/self/statm) and, in a CUDA build with a device, device memory in\n"
      "use (cudaMemGetInfo; else null). The first half is warm-up; over the second half it reports the\n"
      "slope (MB/min) and max - min of each, and the most chunks ever queued for the learner against\n"
      "runtime.queue_size. Exit status 1 when the verdict is fail. runtime.sync is forced to false.");
  return bench;
}

CLI::App* add_sweep(CLI::App& app, mambarl::SweepOptions& o) {
  CLI::App* cmd = app.add_subcommand("sweep", "train a grid of configs x seeds; write runs.csv, results.md, plots");
  cmd->add_option("file", o.file, "the sweep file")->required()->type_name("sweep.yaml");
  add_overrides(*cmd, o.overrides)->description("overrides for every run, after the file's");
  cmd->add_option("--jobs", o.jobs, "runs at a time, 1 to 4096 (wins over the file's jobs:)")
      ->transform(mambarl::whole_number(1, 4096));
  cmd->add_option("--out", o.out_dir, "the sweep's folder (wins over the file's out_dir:)")->type_name("DIR");
  cmd->add_flag("--dry-run", o.dry_run, "print the runs' commands, one per line");
  cmd->add_flag("--resume", o.resume,
                "keep the runs of an earlier, stopped sweep into the same folder whose train.log ends with "
                "its final line, continue those a signal stopped from their checkpoints, and run the rest");
  cmd->add_option("--only", o.only,
                  "run only the runs whose KEY is one of the values (repeatable; every filter must hold). "
                  "KEY: config (its label), policy (policy.type), seed, or a grid key, e.g. "
                  "--only policy=mamba3,gru --only env.difficulty=hard")
      ->type_name("KEY=V1,V2")
      ->allow_extra_args(false);  // one KEY=V1,V2 per --only: the words after it are overrides
  cmd->footer(
      "Each run is a child `mambarl train <config> runtime.seed=S runtime.out_dir=<out>/<run> <overrides>`\n"
      "whose output goes to <out>/<run>/train.log. Then writes <out>/runs.csv (one row per run),\n"
      "<out>/results.md (per env and policy: mean [min, max] of the final return over seeds) and\n"
      "<out>/<env>.svg (learning curves: mean over seeds, min-max band). A failed run fails the sweep\n"
      "(exit 1): runs in flight finish, no new ones start. SIGINT or SIGTERM stops the runs in flight as\n"
      "`mambarl train` stops (checkpoint, then exit 130 / 143); the sweep then exits the same way, saying\n"
      "how to continue (--resume).\n"
      "Sweep file (YAML):\n"
      "  configs: [configs/cartpole_mlp.yaml, \"configs/popgym/*.yaml\"]   # paths or glob patterns\n"
      "  seeds: [1, 2, 3]\n"
      "  grid: {env.difficulty: [easy, medium, hard]}   # optional: every combination\n"
      "  overrides: [algo.total_env_steps=200000]       # optional: for every run\n"
      "  jobs: 4                  # optional (default: the number of cores)\n"
      "  random_floor: true       # optional (default false): a uniformly random policy per env\n"
      "  out_dir: runs/sweep      # optional (default runs/sweep)");
  return cmd;
}

CLI::App* add_plot(CLI::App& app, mambarl::PlotOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "plot", "overlay several runs' curves in one SVG: each run's metric against env steps, one labelled "
              "line per run folder (a train run's runtime.out_dir, holding metrics.csv or metrics.jsonl)");
  cmd->add_option("run_dirs", o.run_dirs, "the run folders, in legend order")->required()->type_name("RUN_DIR");
  cmd->add_option("--out", o.out, "the SVG to write")->required()->type_name("FILE.svg");
  cmd->add_option("--metric", o.metric,
                  "a column of the metrics files (default mean_return; others: max_return, loss, entropy, "
                  "approx_kl, steps_per_s, ...)")
      ->type_name("COLUMN");
  return cmd;
}

struct ConfigCommand {
  std::string section;  // "": every section
  bool markdown = false;
};

// `config --keys [section]`: the reference of the config keys, from the sections' schemas.
CLI::App* add_config(CLI::App& app, ConfigCommand& c) {
  CLI::App* cmd = app.add_subcommand("config", "describe the experiment config's keys");
  cmd->add_flag("--keys", "list each key with its type, default, range or choices, and what it does")->required();
  std::string known;
  for (const mambarl::ConfigSection& s : mambarl::config_sections())
    known += (known.empty() ? "" : ", ") + s.name;
  cmd->add_option("section", c.section, "only this section (" + known + ")")
      ->type_name("SECTION")
      ->check(CLI::Validator(
          [known](std::string& name) -> std::string {
            for (const mambarl::ConfigSection& s : mambarl::config_sections())
              if (s.name == name) return "";
            return "unknown section '" + name + "' (known: " + known + ")";
          },
          ""));
  cmd->add_flag("--markdown", c.markdown, std::string("the Markdown page instead: ") + mambarl::kConfigKeysRefresh);
  return cmd;
}

int run_config(const ConfigCommand& c, std::ostream& out) {
  std::vector<mambarl::ConfigSection> sections = mambarl::config_sections();
  if (!c.section.empty())
    sections.erase(std::remove_if(sections.begin(), sections.end(),
                                  [&](const mambarl::ConfigSection& s) { return s.name != c.section; }),
                   sections.end());
  out << (c.markdown ? mambarl::config_keys_markdown(sections) : mambarl::config_keys_text(sections));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("mambarl: Mamba SSM policies for reinforcement learning", "mambarl");
  app.require_subcommand(1);
  app.footer("Each command answers --help.");
  TrainCommand train;
  mambarl::EvalOptions eval;
  ExportCommand exp;
  mambarl::BenchOptions bench;
  mambarl::SoakOptions soak;
  mambarl::SweepOptions sweep;
  mambarl::PlotOptions plot;
  ConfigCommand config;
  CLI::App* train_cmd = add_train(app, train);
  CLI::App* eval_cmd = add_eval(app, eval);
  CLI::App* export_cmd = add_export(app, exp);
  CLI::App* bench_cmd = add_bench(app, bench, soak);
  CLI::App* sweep_cmd = add_sweep(app, sweep);
  CLI::App* plot_cmd = add_plot(app, plot);
  CLI::App* config_cmd = add_config(app, config);
  if (const auto status = mambarl::parse_command_line(app, argc, argv)) return *status;

  CLI::App* const cmd = app.get_subcommands().front();
  try {
    if (cmd == train_cmd) {
      reclaim_override_from_resume(*cmd, train);
      train.opts.resume = train.resume_opt->count() > 0;
      return run_train(argc, argv, train);
    }
    if (cmd == eval_cmd) {
      mambarl::run_evaluation(eval, std::cout);
      return 0;
    }
    if (cmd == export_cmd) {
      mambarl::export_weights(exp.checkpoint, exp.out);
      std::cout << "wrote " << exp.out << "\n";
      return 0;
    }
    if (cmd == bench_cmd) {
      bench.what = cmd->get_subcommands().front()->get_name();
      return bench.what == "soak" ? mambarl::run_soak(soak, std::cout) : mambarl::run_bench(bench, std::cout);
    }
    if (cmd == sweep_cmd) return mambarl::run_sweep(sweep, std::vector<std::string>(argv, argv + argc), std::cout);
    if (cmd == plot_cmd) {
      mambarl::plot_runs(plot);
      std::cout << "wrote " << plot.out << "\n";
      return 0;
    }
    if (cmd == config_cmd) return run_config(config, std::cout);
    MAMBARL_FAIL("no command for '" << cmd->get_name() << "'");
  } catch (const std::exception& e) {
    std::cerr << "mambarl " << cmd->get_name() << ": error: " << e.what() << std::endl;
    return 1;
  }
}

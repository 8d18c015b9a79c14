// mambarl: the command-line runner (train, eval, bench, export, sweep).
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "kernels/check.hpp"
#include "kernels/config_node.hpp"
#include "tools/bench.hpp"
#include "tools/cli_args.hpp"
#include "tools/evaluate.hpp"
#include "tools/export.hpp"
#include "tools/ranks.hpp"
#include "tools/stop_signals.hpp"
#include "tools/sweep.hpp"
#include "tools/sweep_main.hpp"
#include "tools/trainer.hpp"

namespace {

const char* kUsage =
    "usage: mambarl <command> [args]\n"
    "commands:\n"
    "  train <config.yaml> [key=value | ~key ...] [--resume [checkpoint] | --force]\n"
    "        train the experiment; dotted overrides like policy.d_model=128 runtime.out_dir=runs/x,\n"
    "        deletions like ~policy.d_state\n"
    "  eval <checkpoint> [--episodes N] [--deterministic] [--render] [--seed S] [key=value ...]\n"
    "  eval <weights.safetensors> --config <config.yaml> [...]\n"
    "        run a trained checkpoint, or exported weights in an experiment's env, on fresh envs\n"
    "  bench rollout|train|e2e [--device cpu|cuda] [...]   print one JSON object of timings\n"
    "  bench soak [config.yaml] [--minutes M] [...]   memory over a long async run: JSON + SVG plot\n"
    "  export <checkpoint> <out.safetensors>\n"
    "        write the weights alone (no optimizer or runner state) for PyTorch / HF tooling\n"
    "        and `mambarl eval --config`; the output may not be the checkpoint itself\n"
    "  sweep <sweep.yaml> [--jobs N] [--out DIR] [--dry-run] [key=value ...]\n"
    "        train a grid of configs x seeds; write runs.csv, results.md and learning-curve plots\n"
    "each command answers --help\n";

bool wants_help(int argc, char** argv) {
  for (int i = 2; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) return true;
  return false;
}

int cmd_train(int argc, char** argv) {
  if (wants_help(argc, argv) || argc < 3) {
    std::cout << "usage: mambarl train <config.yaml> [key=value ...] [--resume [checkpoint] | --force]\n"
                 "  Trains the experiment. Overrides use dotted keys (env.num_envs=32, algo.lr=1e-3,\n"
                 "  runtime.out_dir=runs/x); ~key deletes a key (~policy.d_state, e.g. after\n"
                 "  policy.type=gru on a mamba1 config). Writes <out_dir>/metrics.csv, curve.svg,\n"
                 "  config.yaml and checkpoint.safetensors; --resume continues from the checkpoint\n"
                 "  (bit-exact in sync mode). An out_dir that holds an earlier run's checkpoint or\n"
                 "  metrics is refused unless --resume continues it or --force replaces it (removing\n"
                 "  its files first). Ctrl-C (SIGINT) or SIGTERM stops after the update in flight,\n"
                 "  writing the checkpoint, metrics and curve, and exits 130 / 143; a second Ctrl-C\n"
                 "  exits at once.\n"
                 "  Under mpirun -np N (a build with MPI, sync mode, CPU): N data-parallel ranks of\n"
                 "  env.num_envs / N envs each, training as one process on all the envs would; rank 0\n"
                 "  writes the run's files (README.md, \"Training on several processes\").\n"
                 "  Ends with: final mean_return=<x> env_steps=<n> wall_s=<s>\n";
    return argc < 3 ? 2 : 0;
  }
  std::vector<std::string> overrides;
  mambarl::TrainOptions opts;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--resume") {
      opts.resume = true;
      if (i + 1 < argc && !mambarl::is_override(argv[i + 1]) && std::strncmp(argv[i + 1], "--", 2) != 0)
        opts.resume_from = argv[++i];
    } else if (a == "--force") {
      opts.force = true;
    } else if (mambarl::is_override(a)) {
      overrides.push_back(a);
    } else {
      std::cerr << "mambarl train: unexpected argument '" << a
                << "' (overrides look like key=value, deletions like ~key)\n";
      return 2;
    }
  }
  if (opts.resume && opts.force) {
    std::cerr << "mambarl train: --resume continues the run in out_dir and --force replaces it: give one\n";
    return 2;
  }
  // Under mpirun -np N: rank 0 speaks (log and summary), the others are silent
  // unless they fail; an error on any rank ends every rank, naming it.
  const std::unique_ptr<mambarl::Ranks> ranks = mambarl::make_ranks();
  opts.ranks = ranks.get();
  std::ostream silent(nullptr);
  std::ostream& out = ranks->is_root() ? std::cout : silent;
  const auto exp =
      mambarl::on_every_rank(*ranks, "train", [&] { return mambarl::load_experiment(argv[2], overrides); });
  const mambarl::StopOnSignals stop_on_signals;
  const auto s =
      mambarl::on_every_rank(*ranks, "train", [&] { return mambarl::run_training(exp, opts, out); });
  if (!ranks->is_root()) return s.stopped_by_signal == 0 ? 0 : 128 + s.stopped_by_signal;
  std::cout << "learning curve: " << s.curve << "\ncheckpoint: " << s.checkpoint
            << "\nmetrics: " << s.metrics << "\n";
  std::cout << "final mean_return=" << s.mean_return << " env_steps=" << s.env_steps
            << " wall_s=" << s.wall_s << std::endl;
  if (s.stopped_by_signal == 0) return 0;
  // The same command with --resume (and without --force) continues the run.
  // (--resume <checkpoint> is dropped too: the run's own checkpoint is newer.)
  std::vector<std::string> again{argv[0], "train"};
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--resume" && !opts.resume_from.empty() && i + 1 < argc && opts.resume_from == argv[i + 1]) ++i;
    else if (a != "--force" && a != "--resume") again.push_back(a);
  }
  again.push_back("--resume");
  std::cout << mambarl::kInterruptedLine << mambarl::signal_name(s.stopped_by_signal) << " at update " << s.update
            << " (env_steps " << s.env_steps << " of algo.total_env_steps " << exp.algo.total_env_steps
            << "); continue with: " << mambarl::shell_command(again) << std::endl;
  return 128 + s.stopped_by_signal;
}

int cmd_eval(int argc, char** argv) {
  if (wants_help(argc, argv) || argc < 3) {
    std::cout << "usage: mambarl eval <checkpoint> [options] [key=value ...]\n"
                 "       mambarl eval <weights.safetensors> --config <config.yaml> [options] [key=value ...]\n"
                 "  Runs a trained policy on one fresh env, on the CPU, and prints each episode's return\n"
                 "  and length, then: eval mean_return=<x> episodes=<n>.\n"
                 "  A checkpoint of `mambarl train` carries its experiment; weights written by\n"
                 "  `mambarl export` need --config, whose env is used and whose policy section must\n"
                 "  agree with the weights (keys it leaves out come from the weights).\n"
                 "  --episodes N      episodes to run, a whole number >= 1 (default 10)\n"
                 "  --seed S          env reset and sampling seed, a whole number >= 0 (default 12345)\n"
                 "  --deterministic   greedy actions: argmax of the logits / the Gaussian's mean\n"
                 "  --render          per step: the env's text frame, the action, the reward and\n"
                 "                    the episode's return so far\n"
                 "  --config FILE     the experiment for exported weights\n";
    return argc < 3 ? 2 : 0;
  }
  mambarl::EvalOptions o;
  o.weights = argv[2];
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw mambarl::UsageError(a + ": expected a value after it");
      return argv[++i];
    };
    if (a == "--episodes") o.episodes = mambarl::parse_whole_number(a, value(), 1);
    else if (a == "--seed") o.seed = mambarl::parse_whole_number<uint64_t>(a, value(), 0);
    else if (a == "--config") o.config = value();
    else if (a == "--render") o.render = true;
    else if (a == "--deterministic") o.deterministic = true;
    else if (mambarl::is_override(a)) o.overrides.push_back(a);
    else throw mambarl::UsageError("unexpected argument '" + a + "' (see mambarl eval --help)");
  }
  mambarl::run_evaluation(o, std::cout);
  return 0;
}

int cmd_export(int argc, char** argv) {
  if (wants_help(argc, argv) || argc != 4) {
    std::cout << "usage: mambarl export <checkpoint> <out.safetensors>\n"
                 "  Writes the policy weights alone, under their model names\n"
                 "  (layers.0.mixer.in_proj.weight, ...), with the policy config as metadata;\n"
                 "  run them with mambarl eval <out.safetensors> --config <config.yaml>.\n"
                 "  An output that is the checkpoint itself (same path, a link to it) is refused.\n";
    return argc != 4 ? 2 : 0;
  }
  mambarl::export_weights(argv[2], argv[3]);
  std::cout << "wrote " << argv[3] << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "train") return cmd_train(argc, argv);
    if (cmd == "eval") return cmd_eval(argc, argv);
    if (cmd == "bench") return mambarl::run_bench(argc - 2, argv + 2, std::cout);
    if (cmd == "export") return cmd_export(argc, argv);
    if (cmd == "sweep") return mambarl::run_sweep(argc, argv, std::cout);
    std::cerr << "mambarl: unknown command '" << cmd << "'\n" << kUsage;
    return 2;
  } catch (const mambarl::UsageError& e) {
    std::cerr << "mambarl " << cmd << ": " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "mambarl " << cmd << ": error: " << e.what() << std::endl;
    return 1;
  }
}

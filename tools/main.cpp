// mambarl: the command-line runner (train, eval, bench, export, sweep).
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/check.hpp"
#include "kernels/config_node.hpp"
#include "tools/bench.hpp"
#include "tools/evaluate.hpp"
#include "tools/export.hpp"
#include "tools/sweep_main.hpp"
#include "tools/trainer.hpp"

namespace {

const char* kUsage =
    "usage: mambarl <command> [args]\n"
    "commands:\n"
    "  train <config.yaml> [key=value ...] [--resume [checkpoint]]\n"
    "        train the experiment; dotted overrides like policy.d_model=128 runtime.out_dir=runs/x,\n"
    "        deletions like ~policy.d_state\n"
    "  eval <checkpoint> [--episodes N] [--render] [--seed S] [key=value ...]\n"
    "        run a trained checkpoint on fresh envs\n"
    "  bench rollout|train|e2e [--device cpu|cuda] [...]   print one JSON object of timings\n"
    "  bench soak [config.yaml] [--minutes M] [...]   memory over a long async run: JSON + SVG plot\n"
    "  export <checkpoint> <out.safetensors>\n"
    "        write the weights alone (no optimizer or runner state) for PyTorch / HF tooling\n"
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
    std::cout << "usage: mambarl train <config.yaml> [key=value ...] [--resume [checkpoint]]\n"
                 "  Trains the experiment. Overrides use dotted keys (env.num_envs=32, algo.lr=1e-3,\n"
                 "  runtime.out_dir=runs/x); ~key deletes a key (~policy.d_state, e.g. after\n"
                 "  policy.type=gru on a mamba1 config). Writes <out_dir>/metrics.csv, curve.svg,\n"
                 "  config.yaml and checkpoint.safetensors; --resume continues from the checkpoint\n"
                 "  (bit-exact in sync mode).\n"
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
    } else if (mambarl::is_override(a)) {
      overrides.push_back(a);
    } else {
      std::cerr << "mambarl train: unexpected argument '" << a
                << "' (overrides look like key=value, deletions like ~key)\n";
      return 2;
    }
  }
  const auto exp = mambarl::load_experiment(argv[2], overrides);
  const auto s = mambarl::run_training(exp, opts, std::cout);
  std::cout << "learning curve: " << s.curve << "\ncheckpoint: " << s.checkpoint
            << "\nmetrics: " << s.metrics << "\n";
  std::cout << "final mean_return=" << s.mean_return << " env_steps=" << s.env_steps
            << " wall_s=" << s.wall_s << std::endl;
  return 0;
}

int cmd_eval(int argc, char** argv) {
  if (wants_help(argc, argv) || argc < 3) {
    std::cout << "usage: mambarl eval <checkpoint> [--episodes N] [--render] [--seed S] [key=value ...]\n"
                 "  Runs the policy of a checkpoint written by `mambarl train` on one fresh env\n"
                 "  (the experiment config is read from the checkpoint) and prints each episode's\n"
                 "  return; --render prints a text frame per step.\n";
    return argc < 3 ? 2 : 0;
  }
  mambarl::EvalOptions o;
  o.checkpoint = argv[2];
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      MAMBARL_CHECK(i + 1 < argc, "mambarl eval: " << a << " needs a value");
      return argv[++i];
    };
    if (a == "--episodes") o.episodes = std::stoi(next());
    else if (a == "--render") o.render = true;
    else if (a == "--seed") o.seed = std::stoull(next());
    else if (mambarl::is_override(a)) o.overrides.push_back(a);
    else {
      std::cerr << "mambarl eval: unexpected argument '" << a << "'\n";
      return 2;
    }
  }
  mambarl::run_evaluation(o, std::cout);
  return 0;
}

int cmd_export(int argc, char** argv) {
  if (wants_help(argc, argv) || argc != 4) {
    std::cout << "usage: mambarl export <checkpoint> <out.safetensors>\n"
                 "  Writes the policy weights alone, under their model names\n"
                 "  (layers.0.mixer.in_proj.weight, ...), with the policy config as metadata.\n";
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
  } catch (const std::exception& e) {
    std::cerr << "mambarl " << cmd << ": error: " << e.what() << std::endl;
    return 1;
  }
}

// `mambarl sweep`: a grid of training runs (configs x grid points x seeds)
// from one YAML sweep file. This part reads the sweep file and expands it
// into runs, each one `mambarl train` command line; tools/sweep_main.cpp runs
// them as child processes and tools/sweep_report.hpp turns their results
// into runs.csv, results.md and one SVG per env.
//
// A sweep file:
//   configs: [configs/cartpole_mlp.yaml, "configs/popgym/*.yaml"]  # paths or glob patterns
//   seeds: [1, 2, 3]
//   grid:                      # optional: every combination of these overrides
//     env.difficulty: [easy, medium, hard]
//   overrides: [algo.total_env_steps=15000000]   # optional: applied to every run
//   jobs: 4                    # optional: runs at a time (default: the number of cores)
//   random_floor: true         # optional (default false): a uniformly random policy per env
//   out_dir: runs/sweep        # optional (default runs/sweep)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mambarl {

struct SweepSpec {
  std::string file;                  // the sweep file, for messages
  std::vector<std::string> configs;  // globs expanded (sorted per pattern), in file order, no duplicates
  std::vector<uint64_t> seeds;
  // Dotted key -> its values as override text, in file order.
  std::vector<std::pair<std::string, std::vector<std::string>>> grid;
  std::vector<std::string> overrides;  // "key=value", for every run
  int jobs = 0;                        // 0: not given (the caller picks)
  bool random_floor = false;
  std::string out_dir = "runs/sweep";
};

// Reads and checks a sweep file; config paths and patterns are relative to the
// working directory, like those given to `mambarl train`. Errors are
// ConfigErrors naming file:line:col and the key.
SweepSpec load_sweep(const std::string& path);
SweepSpec parse_sweep(const std::string& text, const std::string& file);

// One training run of a sweep, with what the results table needs to know
// about it, read from its config after the overrides.
struct SweepRun {
  std::string name;          // unique in the sweep: <config label>[_<grid key>-<value>...]_s<seed>
  std::string config;        // path of the experiment config
  std::string config_label;  // the config's path relative to the configs' common folder, without .yaml
  uint64_t seed = 0;
  std::vector<std::string> grid_values;  // (grid keys): this run's value of each
  std::vector<std::string> overrides;    // the sweep file's, then the grid point's, then the command line's
  std::string run_dir;                   // runtime.out_dir: <out_dir>/<name> (empty for a random-floor row)
  std::string env_type, difficulty, policy;  // env.type, env.difficulty ("" when unset), policy.type
  // Every setting of env: as dotted key -> value text, without num_envs and
  // backend (how many envs and where they step do not change the task): two
  // runs with equal settings share a row of the results table.
  std::map<std::string, std::string> env_settings;
};

// Every run, configs outermost, then grid points (the first key varying
// slowest), then seeds. `cli_overrides` come after the sweep's own. Reads each
// config (a bad override or YAML error is a ConfigError naming it); the runs'
// seed and out_dir belong to the sweep, so overriding runtime.seed or
// runtime.out_dir is an error.
std::vector<SweepRun> expand_sweep(const SweepSpec& spec, const std::vector<std::string>& cli_overrides,
                                   const std::string& out_dir);

// The runs that pass every `--only KEY=V1[,V2...]` filter, in their order:
// a run passes one when its KEY is one of the values. KEY is `config` (the
// run's config label), `policy` (policy.type), `seed`, or a grid key of the
// sweep file. A malformed filter, a key the sweep does not have, or a value no
// run of the sweep has (a typo would otherwise select nothing) is a
// ConfigError naming the filter and listing what the sweep has; so is a set
// of filters that together keep no run.
std::vector<SweepRun> select_runs(const std::vector<SweepRun>& runs, const SweepSpec& spec,
                                  const std::vector<std::string>& only);

// How a sweep starts a run: afresh (--force: the run folder is the sweep's),
// or continuing one an earlier sweep's signal stopped (--resume: from the
// checkpoint it wrote when it stopped).
enum class RunStart { fresh, continued };

// The child's command line: <exe> train <config> runtime.seed=S runtime.out_dir=<run_dir> <overrides>
// --force (or --resume).
std::vector<std::string> train_argv(const SweepRun& run, const std::string& exe,
                                    RunStart start = RunStart::fresh);

// `s` with every character other than letters, digits, '.' and '-' as '_':
// a piece of a run's folder name or a plot's file name.
std::string name_part(const std::string& s);

// argv as one line a POSIX shell reads back as the same words.
std::string shell_command(const std::vector<std::string>& argv);

}  // namespace mambarl

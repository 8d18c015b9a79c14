// `mambarl sweep`: the sweep file's expansion into runs, the results table
// and plots on known inputs, and real sweeps run as a child process: each
// run's row carries that seed's own `mambarl train` result, and a run that
// fails fails the sweep naming it.
#define BOOST_TEST_MODULE sweep
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <signal.h>
#include <sstream>

#include "envs/vec_env.hpp"
#include "kernels/base/config_node.hpp"
#include "test/train_process.hpp"
#include "tools/random_floor.hpp"
#include "tools/svg_plot.hpp"
#include "tools/sweep.hpp"
#include "tools/sweep_report.hpp"

namespace fs = std::filesystem;
using namespace mambarl;
using namespace mambarl::test;

namespace {

std::string source_dir() {
  const char* src = std::getenv("MAMBARL_SOURCE_DIR");
  BOOST_REQUIRE_MESSAGE(src, "MAMBARL_SOURCE_DIR is not set (run through ctest)");
  return src;
}

std::string config(const std::string& name) { return source_dir() + "/configs/" + name + ".yaml"; }

// A fresh folder under the temp dir, removed at the end of the test case.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("mambarl_test_sweep_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& file, const std::string& text) const {
    std::ofstream(path / file) << text;
    return (path / file).string();
  }
};

std::string error_of(const std::string& sweep_text) {
  try {
    parse_sweep(sweep_text, "sweep.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, sep);) out.push_back(item);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_grid_expands_to_configs_x_grid_points_x_seeds_with_unique_names) {
  const SweepSpec spec = parse_sweep("configs: [" + config("cartpole_mlp") + ", \"" + source_dir() +
                                         "/configs/tmaze_m*.yaml\"]\n"
                                         "seeds: [1, 2]\n"
                                         "grid:\n  algo.lr: [0.001, 0.003]\n  env.num_envs: [8, 16]\n"
                                         "overrides: [algo.total_env_steps=4096]\n",
                                     "sweep.yaml");
  // The pattern's matches, sorted: tmaze_mamba1, tmaze_mamba3, tmaze_mlp.
  BOOST_TEST(spec.configs.size() == 4u);
  BOOST_TEST(spec.configs[3] == config("tmaze_mlp"));
  const std::vector<SweepRun> runs = expand_sweep(spec, {"runtime.log_every=5"}, "out");
  BOOST_TEST(runs.size() == 4u * 2 * 2 * 2);
  std::set<std::string> names;
  for (const SweepRun& r : runs) names.insert(r.name);
  BOOST_TEST(names.size() == runs.size());
  // Configs outermost, then grid points (first key slowest), then seeds.
  const SweepRun& first = runs[0];
  BOOST_TEST(first.name == "cartpole_mlp_lr-0.001_num_envs-8_s1");
  BOOST_TEST(runs[1].name == "cartpole_mlp_lr-0.001_num_envs-8_s2");
  BOOST_TEST(runs[2].name == "cartpole_mlp_lr-0.001_num_envs-16_s1");
  BOOST_TEST(runs[4].name == "cartpole_mlp_lr-0.003_num_envs-8_s1");
  BOOST_TEST(runs[8].name == "tmaze_mamba1_lr-0.001_num_envs-8_s1");
  BOOST_TEST(first.run_dir == "out/cartpole_mlp_lr-0.001_num_envs-8_s1");
  BOOST_TEST(first.env_type == "cartpole");
  BOOST_TEST(first.policy == "mlp");
  BOOST_TEST(runs[8].policy == "mamba1");
  BOOST_TEST(runs[8].env_settings.at("length") == "10");
  BOOST_TEST(runs[8].env_settings.count("num_envs") == 0u);  // how many envs does not change the task
  // The file's overrides, the grid point's, then the command line's, after the sweep's seed and out_dir.
  const std::vector<std::string> argv = train_argv(first, "/bin/mambarl");
  const std::vector<std::string> expected{"/bin/mambarl",
                                          "train",
                                          config("cartpole_mlp"),
                                          "runtime.seed=1",
                                          "runtime.out_dir=out/cartpole_mlp_lr-0.001_num_envs-8_s1",
                                          "algo.total_env_steps=4096",
                                          "algo.lr=0.001",
                                          "env.num_envs=8",
                                          "runtime.log_every=5",
                                          "--force"};
  BOOST_TEST(argv == expected, boost::test_tools::per_element());
  BOOST_TEST(shell_command({"a b", "it's", "x=1"}) == "'a b' 'it'\\''s' x=1");
}

// `--only` keeps the runs whose key is one of the values, every filter at once, in the sweep's order;
// a filter that cannot select what it names is an error saying what the sweep has.
BOOST_AUTO_TEST_CASE(only_filters_keep_the_matching_runs_and_refuse_what_the_sweep_lacks) {
  const SweepSpec spec = parse_sweep("configs: [" + config("cartpole_mlp") + ", " + config("tmaze_mamba1") +
                                         ", " + config("tmaze_gru") +
                                         "]\n"
                                         "seeds: [1, 2, 3]\n"
                                         "grid:\n  algo.lr: [0.001, 0.003]\n",
                                     "sweep.yaml");
  const std::vector<SweepRun> all = expand_sweep(spec, {}, "out");
  BOOST_TEST(all.size() == 3u * 2 * 3);
  BOOST_TEST(select_runs(all, spec, {}).size() == all.size());
  const std::vector<SweepRun> some =
      select_runs(all, spec, {"policy=gru,mamba1", "algo.lr=0.003", "seed=1,3"});
  std::vector<std::string> names;
  for (const SweepRun& r : some) names.push_back(r.name);
  const std::vector<std::string> expected{"tmaze_mamba1_lr-0.003_s1", "tmaze_mamba1_lr-0.003_s3",
                                          "tmaze_gru_lr-0.003_s1", "tmaze_gru_lr-0.003_s3"};
  BOOST_TEST(names == expected, boost::test_tools::per_element());
  BOOST_TEST(select_runs(all, spec, {"config=cartpole_mlp"}).size() == 6u);
  const auto error_for = [&](const std::vector<std::string>& only) -> std::string {
    try {
      select_runs(all, spec, only);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  };
  BOOST_TEST(error_for({"policy=mamba3"}) ==
             "--only policy=mamba3: no run of sweep.yaml has policy 'mamba3' (it has: mlp, mamba1, gru)");
  BOOST_TEST(error_for({"seed=4"}) == "--only seed=4: no run of sweep.yaml has seed '4' (it has: 1, 2, 3)");
  BOOST_TEST(
      error_for({"env.type=tmaze"}) ==
      "--only env.type=tmaze: sweep.yaml has no key env.type; filters take: config, policy, seed, algo.lr");
  BOOST_TEST(error_for({"policy"}).find("--only policy: expected KEY=VALUE[,VALUE...]") == 0u);
  BOOST_TEST(error_for({"seed=1,"}) == "--only seed=1,: an empty value; expected KEY=VALUE[,VALUE...]");
  BOOST_TEST(error_for({"policy=mlp", "config=tmaze_gru"}) ==
             "--only policy=mlp --only config=tmaze_gru: no run of sweep.yaml passes every filter");
}

BOOST_AUTO_TEST_CASE(sweep_file_errors_name_the_file_line_and_key) {
  const std::string cfg = config("cartpole_mlp");
  BOOST_TEST(
      error_of("configs: [" + cfg + "]\nseeds: [1]\nseed: [2]\n").find("sweep.yaml:3:1: seed: unknown key") !=
      std::string::npos);
  BOOST_TEST(error_of("seeds: [1]\n").find("configs: required key is missing") != std::string::npos);
  BOOST_TEST(error_of("configs: [" + cfg + ", configs/none_*.yaml]\nseeds: [1]\n").find("sweep.yaml:1:") !=
             std::string::npos);
  BOOST_TEST(error_of("configs: [configs/none_*.yaml]\nseeds: [1]\n").find("matches no config file") !=
             std::string::npos);
  BOOST_TEST(error_of("configs: [no/such.yaml]\nseeds: [1]\n").find("no such config file: no/such.yaml") !=
             std::string::npos);
  BOOST_TEST(error_of("configs: [" + cfg + "]\nseeds: [1, 1]\n")
                 .find("sweep.yaml:2:12: seeds: seed 1 is listed twice") != std::string::npos);
  BOOST_TEST(error_of("configs: [" + cfg + "]\nseeds: [1]\noverrides: [runtime.seed=3]\n")
                 .find("runtime.seed is set per run by the sweep") != std::string::npos);
  BOOST_TEST(
      error_of("configs: [" + cfg + "]\nseeds: [1]\nseeds: [2]\n") ==
      "sweep.yaml:3:1: seeds: duplicate key, first at sweep.yaml:2:1 (only one of them would be used)");
  BOOST_TEST(error_of("configs: [" + cfg + "]\nseeds: [1]\noverrides: [~runtime.seed]\n")
                 .find("runtime.seed is set per run by the sweep") != std::string::npos);
  BOOST_TEST(error_of("configs: [" + cfg + "]\nseeds: [1]\noverrides: [algo.lr]\n")
                 .find("'algo.lr' is not key.path=value or ~key.path") != std::string::npos);
  BOOST_TEST(error_of("configs: [" + cfg + "]\nseeds: [1]\njobs: 0\n")
                 .find("sweep.yaml:3:7: jobs: value 0 is out of range") != std::string::npos);
  const SweepSpec ok = parse_sweep("configs: [" + cfg + "]\nseeds: [1]\n", "sweep.yaml");
  BOOST_CHECK_EXCEPTION(
      expand_sweep(ok, {"runtime.out_dir=x"}, "out"), ConfigError, [](const ConfigError& e) {
        return std::string(e.what()).find("runtime.out_dir is set per run by the sweep") != std::string::npos;
      });
}

namespace {

RunResult result(const std::string& env, const std::string& difficulty, const std::string& policy,
                 uint64_t seed, double final_return, std::map<std::string, std::string> settings = {}) {
  RunResult r;
  r.run.config = "configs/" + env + "_" + policy + ".yaml";
  r.run.config_label = env + "_" + policy;
  r.run.env_type = env;
  r.run.difficulty = difficulty;
  r.run.policy = policy;
  r.run.seed = seed;
  settings["type"] = env;
  if (!difficulty.empty()) settings["difficulty"] = difficulty;
  r.run.env_settings = settings;
  r.run.run_dir = policy == "random" ? "" : "runs/" + r.run.config_label + "_s" + std::to_string(seed);
  r.final_return = final_return;
  r.env_steps = 1000;
  r.wall_s = 1.5;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_table_has_mean_min_max_over_seeds_per_env_and_policy) {
  const std::vector<RunResult> results{
      result("repeat", "easy", "mlp", 1, 500),    result("repeat", "easy", "mlp", 2, 499.5),
      result("repeat", "easy", "mamba1", 1, 1),   result("repeat", "easy", "mamba1", 2, 2),
      result("repeat", "easy", "mamba1", 3, 4.5), result("repeat", "easy", "random", 1, -0.01234),
      result("repeat", "hard", "zeta", 1, 0.5),   result("repeat", "easy", "gru", 1, -1e-5)};
  const std::string md = results_markdown({}, results, "Sweep of today");
  BOOST_TEST_MESSAGE(md);
  BOOST_TEST(md.rfind("Sweep of today\n", 0) == 0u);
  BOOST_TEST(md.find("over seeds 1, 2, 3 ") != std::string::npos);
  // Columns: mamba1, mamba3, gru, mlp, random, then the others; 3 significant digits.
  BOOST_TEST(
      md.find("| env | difficulty | mamba1 | gru | mlp | random | zeta |\n|---|---|---|---|---|---|---|\n") !=
      std::string::npos);
  BOOST_TEST(
      md.find("| repeat | easy | 2.50 [1.00, 4.50] | -1.00e-05 [-1.00e-05, -1.00e-05] | 500 [500, 500] | "
              "-0.0123 [-0.0123, -0.0123] | |\n") != std::string::npos);
  BOOST_TEST(md.find("| repeat | hard | | | | | 0.500 [0.500, 0.500] |\n") != std::string::npos);

  const std::vector<std::string> csv = split(runs_csv({}, results), '\n');
  BOOST_TEST(csv[0] == "config,env,difficulty,policy,seed,final_return,env_steps,wall_s,run_dir");
  BOOST_TEST(csv[2] == "configs/repeat_mlp.yaml,repeat,easy,mlp,2,499.5,1000,1.5,runs/repeat_mlp_s2");
  BOOST_TEST(csv[6] == "configs/repeat_random.yaml,repeat,easy,random,1,-0.01234,1000,1.5,");
}

BOOST_AUTO_TEST_CASE(rows_that_share_a_label_name_the_env_settings_that_differ) {
  std::vector<RunResult> results{result("tmaze", "", "gru", 1, 1, {{"length", "10"}}),
                                 result("tmaze", "", "gru", 1, 0.5, {{"length", "20"}})};
  // A grid key other than env.difficulty is a column; env.difficulty is the difficulty column.
  for (RunResult& r : results) r.run.grid_values = {"0.001", "easy"};
  const std::string md = results_markdown({"algo.lr", "env.difficulty"}, results, "h");
  BOOST_TEST_MESSAGE(md);
  BOOST_TEST(md.find("| env | algo.lr | gru |") != std::string::npos);
  BOOST_TEST(md.find("| tmaze (length=10) | 0.001 | 1.00 [1.00, 1.00] |") != std::string::npos);
  BOOST_TEST(md.find("| tmaze (length=20) | 0.001 | 0.500 [0.500, 0.500] |") != std::string::npos);
  BOOST_TEST(split(runs_csv({"algo.lr", "env.difficulty"}, results), '\n')[0] ==
             "config,env,difficulty,algo.lr,policy,seed,final_return,env_steps,wall_s,run_dir");
}

namespace {

// The numbers of an SVG attribute `points="x,y x,y ..."` after `marker`.
std::vector<std::pair<double, double>> points_after(const std::string& svg, const std::string& marker) {
  const size_t at = svg.find(marker);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "no " << marker << " in the SVG");
  const size_t begin = svg.find("points=\"", at) + 8;
  std::vector<std::pair<double, double>> pts;
  for (const std::string& p : split(svg.substr(begin, svg.find('"', begin) - begin), ' '))
    if (!p.empty())
      pts.emplace_back(std::stod(p.substr(0, p.find(','))), std::stod(p.substr(p.find(',') + 1)));
  return pts;
}

// True when every gap between ticks is one step of 1, 2 or 5 x 10^k and every tick a multiple of it.
bool round_ticks(const std::vector<double>& ticks) {
  if (ticks.size() < 2) return false;
  const double step = ticks[1] - ticks[0];
  const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  bool ok =
      std::fabs(mantissa - 1) < 1e-9 || std::fabs(mantissa - 2) < 1e-9 || std::fabs(mantissa - 5) < 1e-9;
  for (size_t i = 0; i < ticks.size(); ++i) {
    ok = ok && std::fabs(ticks[i] - ticks[0] - step * static_cast<double>(i)) < step * 1e-6;
    ok = ok && std::fabs(ticks[i] / step - std::round(ticks[i] / step)) < 1e-6;
  }
  return ok;
}

// A tick label's value: "1.5M" -> 1.5e6.
double tick_value(const std::string& label) {
  size_t used = 0;
  const double v = std::stod(label, &used);
  const std::string suffix = label.substr(used);
  return v * (suffix == "k" ? 1e3 : suffix == "M" ? 1e6 : suffix == "G" ? 1e9 : 1);
}

std::vector<double> tick_values(const std::string& svg, const std::string& cls) {
  std::vector<double> ticks;
  const std::regex re("class=\"" + cls + "\"[^>]*>([^<]*)<");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    ticks.push_back(tick_value((*it)[1]));
  return ticks;
}

}  // namespace

BOOST_AUTO_TEST_CASE(plots_have_round_ticks_and_a_band_that_encloses_the_mean) {
  for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{
           {0, 1}, {-0.53, 0.97}, {0, 15'000'000}, {16384, 409600}, {3.2, 3.3}, {-512, 12}}) {
    const std::vector<double> t = nice_ticks(lo, hi);
    BOOST_TEST(round_ticks(t), "[" << lo << ", " << hi << "]");
    BOOST_TEST(t.size() >= 3u);
    BOOST_TEST(t.size() <= 11u);
    BOOST_TEST(t.front() >= lo);
    BOOST_TEST(t.back() <= hi);
  }
  // Seeds logged at different env steps: they meet on the union of their steps.
  const CurveBand b = curve_band({{{0, 0}, {10, 10}}, {{0, 2}, {5, 2}, {10, 2}}});
  BOOST_TEST(b.x == (std::vector<double>{0, 5, 10}), boost::test_tools::per_element());
  BOOST_TEST(b.mean == (std::vector<double>{1, 3.5, 6}), boost::test_tools::per_element());
  BOOST_TEST(b.lo == (std::vector<double>{0, 2, 2}), boost::test_tools::per_element());
  BOOST_TEST(b.hi == (std::vector<double>{2, 5, 10}), boost::test_tools::per_element());

  TempDir dir("plots");
  std::vector<RunResult> results;
  for (uint64_t seed : {1, 2, 3}) {
    RunResult r = result("tmaze", "", "mamba1", seed, 0.9);
    for (int i = 1; i <= 50; ++i) {
      const double x = 16384.0 * i + 1000.0 * static_cast<double>(seed);  // seeds log at different steps
      r.curve.emplace_back(x, std::tanh(x / 3e5) - 0.4 + 0.1 * std::sin(static_cast<double>(i * seed)));
    }
    results.push_back(r);
    results.push_back(result("tmaze", "", "random", seed, 0.01 * static_cast<double>(seed)));
  }
  const std::vector<std::string> plots = write_sweep_plots(dir.path.string(), {}, results);
  BOOST_REQUIRE(plots.size() == 1u);
  BOOST_TEST(plots[0] == (dir.path / "tmaze.svg").string());
  const std::string svg = read_text(plots[0]);
  BOOST_TEST(round_ticks(tick_values(svg, "xtick")));
  BOOST_TEST(round_ticks(tick_values(svg, "ytick")));
  BOOST_TEST(svg.find("class=\"zero\"") != std::string::npos);  // the zero line: returns cross 0
  BOOST_TEST(svg.find(">mamba1</text>") != std::string::npos);            // the legend
  BOOST_TEST(svg.find(">random</text>") != std::string::npos);
  // The band's upper edge runs forward, its lower edge back; both at the line's x in pixels.
  const auto line = points_after(svg, "class=\"line\"");
  const auto band = points_after(svg, "class=\"band\"");
  BOOST_REQUIRE(band.size() == 2 * line.size());
  for (size_t i = 0; i < line.size(); ++i) {
    const auto& upper = band[i];
    const auto& lower = band[band.size() - 1 - i];
    BOOST_TEST(upper.first == line[i].first);
    BOOST_TEST(lower.first == line[i].first);
    BOOST_TEST(upper.second <= line[i].second + 1e-6);  // SVG y grows downwards
    BOOST_TEST(lower.second >= line[i].second - 1e-6);
  }
}

BOOST_AUTO_TEST_CASE(the_random_floor_averages_the_first_whole_episodes_of_every_env) {
  const auto env = make_vec_env(ConfigNode(YAML::Load("{type: cartpole, num_envs: 16}"), "test"));
  // Enough episodes when the standard error is met at once: ceil(1000 / 16) = 63 from each env.
  const RandomFloor once = measure_random_floor(*env, 7, 1000, 100.0);
  BOOST_TEST(once.episodes == 63 * 16);
  // Otherwise 63 per env doubled while within 4096 episodes: 252 per env.
  const RandomFloor f = measure_random_floor(*env, 7, 1000, 0.01, 4096);
  BOOST_TEST(f.episodes == 252 * 16);
  BOOST_TEST(f.std_error < 0.3);
  // CartPole-v1 under uniformly random actions lasts about 22.3 steps (reward 1 per step);
  // 1.0 is over 5 standard errors.
  BOOST_TEST(std::fabs(f.mean_return - 22.3) < 1.0, f.mean_return);
  BOOST_TEST(f.env_steps >= static_cast<long long>(f.mean_return * static_cast<double>(f.episodes)));
  BOOST_TEST(measure_random_floor(*env, 7, 1000, 0.01, 4096).mean_return ==
             f.mean_return);  // the seed decides
  BOOST_TEST(measure_random_floor(*env, 8, 1000, 0.01, 4096).mean_return != f.mean_return);
}

namespace {

Ran run(const std::vector<std::string>& argv, const TempDir& dir, const std::string& name) {
  return run_to_end(argv, (dir.path / (name + ".out")).string());
}

const std::string kShort = "algo.total_env_steps=4096";

double final_return_of(const std::string& train_output) {
  std::smatch m;
  BOOST_REQUIRE_MESSAGE(std::regex_search(train_output, m, std::regex("final mean_return=([-0-9.e+na]+)")),
                        train_output);
  return std::stod(m[1]);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_sweep_runs_each_config_and_seed_as_a_direct_train_would) {
  TempDir dir("e2e");
  const std::vector<std::string> configs{"cartpole_mlp", "tmaze_mlp"};
  const std::string sweep = dir.write(
      "sweep.yaml", "configs: [" + config(configs[0]) + ", " + config(configs[1]) +
                        "]\nseeds: [3, 4]\nrandom_floor: true\nout_dir: " + (dir.path / "unused").string() +
                        "\n");
  const std::string out = (dir.path / "out").string();
  const std::vector<std::string> argv{MAMBARL_TEST_BIN, "sweep", sweep, "--jobs", "2", "--out", out, kShort};

  std::vector<std::string> dry = argv;
  dry.push_back("--dry-run");
  const Ran listed = run(dry, dir, "dry");
  BOOST_REQUIRE_MESSAGE(listed.exit_code == 0, listed.out);
  const std::vector<std::string> lines = split(listed.out, '\n');
  BOOST_REQUIRE(lines.size() == 4u);
  BOOST_TEST(lines[0].find(" train " + config("cartpole_mlp") + " runtime.seed=3 runtime.out_dir=" + out +
                           "/cartpole_mlp_s3 " + kShort) != std::string::npos,
             lines[0]);
  BOOST_TEST(!fs::exists(out));  // a dry run makes nothing

  const Ran swept = run(argv, dir, "sweep");
  BOOST_TEST_MESSAGE(swept.out);
  BOOST_REQUIRE_MESSAGE(swept.exit_code == 0, swept.out);
  const auto returns_in_csv = [&] {  // "config policy seed" -> final_return
    std::map<std::string, double> returns;
    const std::vector<std::string> csv = split(read_text(out + "/runs.csv"), '\n');
    BOOST_REQUIRE(csv.size() == 1u + 4 + 4);  // 4 runs, then each env's random floor per seed
    for (size_t i = 1; i < csv.size(); ++i) {
      const std::vector<std::string> cells = split(csv[i], ',');
      BOOST_REQUIRE(cells.size() >= 8u);
      returns[cells[0] + " " + cells[3] + " " + cells[4]] = std::stod(cells[5]);
    }
    return returns;
  };
  std::map<std::string, double> swept_return = returns_in_csv();
  for (const std::string& c : configs)
    for (const int seed : {3, 4}) {
      const Ran direct =
          run({MAMBARL_TEST_BIN, "train", config(c), kShort, "runtime.seed=" + std::to_string(seed),
               "runtime.out_dir=" + (dir.path / "direct").string(), "--force"},
              dir, "direct");
      BOOST_REQUIRE_MESSAGE(direct.exit_code == 0, direct.out);
      const std::string key = config(c) + " mlp " + std::to_string(seed);
      BOOST_REQUIRE_MESSAGE(swept_return.count(key), key << " not in runs.csv");
      BOOST_TEST(swept_return[key] == final_return_of(direct.out), key);
      BOOST_TEST(fs::exists(out + "/" + c + "_s" + std::to_string(seed) + "/train.log"));
    }
  BOOST_TEST(swept_return.count(config("tmaze_mlp") + " random 4"));
  const std::string md = read_text(out + "/results.md");
  BOOST_TEST(md.find("| env | mlp | random |") != std::string::npos, md);
  BOOST_TEST(md.find("| cartpole | ") != std::string::npos);
  BOOST_TEST(md.find("--jobs 2 --out " + out) != std::string::npos);  // the exact command
  BOOST_TEST(fs::exists(out + "/cartpole.svg"));
  BOOST_TEST(fs::exists(out + "/tmaze.svg"));

  // --resume (a sweep stopped part-way, e.g. at a time limit): the finished
  // runs are read back, not run again; a run without its final line is run.
  const std::string kept_log = out + "/cartpole_mlp_s3/train.log", redone_log = out + "/tmaze_mlp_s4/train.log";
  std::ofstream(kept_log, std::ios::app) << "marker: this log must survive the resumed sweep\n";
  std::ofstream(redone_log, std::ios::trunc) << "a run cut off before its final line\n";
  std::vector<std::string> resumed_argv = argv;
  resumed_argv.push_back("--resume");
  const Ran resumed = run(resumed_argv, dir, "resumed");
  BOOST_REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.out);
  BOOST_TEST(resumed.out.find("cartpole_mlp_s3 (kept from the earlier sweep)") != std::string::npos, resumed.out);
  BOOST_TEST(resumed.out.find("tmaze_mlp_s4 (kept") == std::string::npos, resumed.out);
  BOOST_TEST(read_text(kept_log).find("marker: this log must survive") != std::string::npos);
  BOOST_TEST(read_text(redone_log).find("final mean_return=") != std::string::npos);
  BOOST_TEST((returns_in_csv() == swept_return));
}

BOOST_AUTO_TEST_CASE(a_failing_run_fails_the_sweep_naming_it) {
  TempDir dir("fail");
  const std::string sweep =
      dir.write("sweep.yaml", "configs: [" + config("cartpole_mlp") + "]\nseeds: [1, 2]\njobs: 1\n");
  const std::string out = (dir.path / "out").string();
  const Ran r = run({MAMBARL_TEST_BIN, "sweep", sweep, "--out", out, kShort, "algo.bogus=1"}, dir, "bad");
  BOOST_TEST(r.exit_code == 1, r.out);
  BOOST_TEST(r.out.find("run cartpole_mlp_s1 failed (exit status 1)") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("runtime.seed=1 runtime.out_dir=" + out + "/cartpole_mlp_s1 " + kShort +
                        " algo.bogus=1") != std::string::npos,
             r.out);
  BOOST_TEST(r.out.find("algo.bogus: unknown key") != std::string::npos, r.out);  // the end of its log
  BOOST_TEST(r.out.find("1 run(s) failed; 1 run(s) not started") != std::string::npos, r.out);
  BOOST_TEST(!fs::exists(out + "/results.md"));

  const Ran missing = run({MAMBARL_TEST_BIN, "sweep", (dir.path / "none.yaml").string()}, dir, "missing");
  BOOST_TEST(missing.exit_code == 1);
  BOOST_TEST(missing.out.find("none.yaml: cannot open sweep file") != std::string::npos, missing.out);
  const Ran usage = run({MAMBARL_TEST_BIN, "sweep", sweep, "--jobs", "0"}, dir, "usage");
  BOOST_TEST(usage.exit_code == 2);
  BOOST_TEST(usage.out.find("mambarl sweep: --jobs: expected a whole number in [1, 4096], got '0'") != std::string::npos, usage.out);
}

// SIGTERM to a sweep (a job scheduler's time limit, `kill`) reaches its runs
// once: each stops as `mambarl train` stops, with its checkpoint, no new run
// starts, and the sweep exits 143 saying how to go on; `--resume` then
// continues the stopped run from its checkpoint and starts the one that never
// ran, and ends where a sweep that never stopped ends (sync mode resumes bit
// for bit).
BOOST_AUTO_TEST_CASE(a_signal_stops_the_runs_and_resume_continues_them_bit_exactly) {
  TempDir dir("signal");
  const std::string sweep =
      dir.write("sweep.yaml", "configs: [" + config("cartpole_mlp") + "]\nseeds: [1, 2]\njobs: 1\n");
  // 1000 updates of 16 envs x 32 steps: seconds, far more than pass between
  // seeing update 2 and the signal landing.
  const std::vector<std::string> budget{"env.num_envs=16", "algo.chunk_len=32",
                                        "algo.total_env_steps=512000"};
  const auto sweep_argv = [&](const std::string& out) {
    std::vector<std::string> argv{MAMBARL_TEST_BIN, "sweep", sweep, "--out", (dir.path / out).string()};
    argv.insert(argv.end(), budget.begin(), budget.end());
    return argv;
  };
  const Ran whole = run(sweep_argv("whole"), dir, "whole");
  BOOST_REQUIRE_MESSAGE(whole.exit_code == 0, whole.out);

  const std::string log = (dir.path / "stopped.out").string();
  const pid_t pid = spawn(sweep_argv("out"), {}, log);
  BOOST_REQUIRE_GT(pid, 0);
  const fs::path first = dir.path / "out" / "cartpole_mlp_s1";
  wait_for_updates(pid, first / "metrics.csv", 2, log);
  BOOST_REQUIRE_EQUAL(::kill(pid, SIGTERM), 0);
  BOOST_TEST_REQUIRE(exit_status(pid, log) == 143, read_text(log));
  const std::string text = read_text(log);
  BOOST_TEST(text.find("interrupted by SIGTERM: 0 run(s) finished, 1 stopped") != std::string::npos, text);
  BOOST_TEST(text.find("1 not started; no report written. Continue with: ") != std::string::npos, text);
  BOOST_TEST(text.find(" --resume\n") != std::string::npos, text);
  BOOST_TEST(read_text((first / "train.log").string()).find("\ninterrupted by SIGTERM at update ") !=
             std::string::npos);
  BOOST_TEST(fs::exists(first / "checkpoint.safetensors"));
  BOOST_TEST(!fs::exists(dir.path / "out" / "cartpole_mlp_s2"));
  BOOST_TEST(!fs::exists(dir.path / "out" / "runs.csv"));

  std::vector<std::string> resume_argv = sweep_argv("out");
  resume_argv.push_back("--resume");
  const Ran resumed = run(resume_argv, dir, "resumed");
  BOOST_REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.out);
  BOOST_TEST(resumed.out.find("cartpole_mlp_s1: continuing from its checkpoint") != std::string::npos,
             resumed.out);
  BOOST_TEST(resumed.out.find("cartpole_mlp_s2: continuing") == std::string::npos, resumed.out);
  const std::string first_log = read_text((first / "train.log").string());
  BOOST_TEST(first_log.find("(bit-exact: sync mode)") != std::string::npos, first_log);
  // The same rows but for wall time and folder: config ... final_return, env_steps.
  const auto results = [](const std::string& csv) {
    std::vector<std::string> rows;
    for (const std::string& line : split(read_text(csv), '\n')) {
      const std::vector<std::string> cells = split(line, ',');
      rows.push_back(cells.size() >= 7 ? cells[4] + "," + cells[5] + "," + cells[6] : line);
    }
    return rows;
  };
  BOOST_TEST((results((dir.path / "out" / "runs.csv").string()) ==
              results((dir.path / "whole" / "runs.csv").string())));
}

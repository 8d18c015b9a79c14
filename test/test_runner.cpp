// The runner's pieces: GAE, experiment configs (a table of broken files),
// the metrics log, the bounded queue, the stalled-actor watchdog, the refusal
// of an out_dir holding an earlier run, and the memory estimate.
#define BOOST_TEST_MODULE runner
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "envs/vec_env.hpp"
#include "policy/io/safetensors.hpp"
#include "test/hide_gpus.hpp"
#include "tools/actor_watchdog.hpp"
#include "tools/bench/steady_rate.hpp"
#include "tools/bounded_queue.hpp"
#include "tools/evaluate.hpp"
#include "tools/experiment.hpp"
#include "tools/gae.hpp"
#include "tools/learner_loop.hpp"
#include "tools/memory_estimate.hpp"
#include "tools/metrics_log.hpp"
#include "tools/policy_session.hpp"
#include "tools/return_normalizer.hpp"
#include "tools/ranks.hpp"
#include "tools/trainer.hpp"

using namespace mambarl;
namespace fs = std::filesystem;

namespace {
fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("mambarl_test_runner_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
}  // namespace

BOOST_AUTO_TEST_CASE(gae_matches_hand_computation) {
  // One env, T=4: step 1 terminates, step 3 is truncated (bootstrap from V(final obs)).
  const int T = 4, B = 1;
  const float r[] = {1, 2, 3, 4}, v[] = {0.5f, 0.25f, 1.0f, 2.0f}, fv[] = {0, 0, 0, 7.0f}, nv[] = {9.0f};
  const uint8_t term[] = {0, 1, 0, 0}, trunc[] = {0, 0, 0, 1};
  float adv[4], ret[4];
  const double g = 0.9, l = 0.8;
  compute_gae(GaeInputs{T, B, r, v, term, trunc, fv, nv}, g, l, adv, ret);
  const double a3 = 4 + g * 7.0 - 2.0;          // truncated: bootstrap V(final)=7, no carry
  const double a2 = 3 + g * 2.0 - 1.0 + g * l * a3;  // next value V_3 = 2 (same episode)
  const double a1 = 2 + 0 - 0.25;               // terminated: no bootstrap, no carry
  const double a0 = 1 + g * 0.25 - 0.5 + g * l * a1;
  BOOST_CHECK_CLOSE(adv[3], a3, 1e-4);
  BOOST_CHECK_CLOSE(adv[2], a2, 1e-4);
  BOOST_CHECK_CLOSE(adv[1], a1, 1e-4);
  BOOST_CHECK_CLOSE(adv[0], a0, 1e-4);
  for (int t = 0; t < T; ++t) BOOST_CHECK_CLOSE(ret[t], adv[t] + v[t], 1e-4);
  // Without any episode end the last step bootstraps from next_values.
  const uint8_t none[] = {0, 0, 0, 0};
  compute_gae(GaeInputs{T, B, r, v, none, none, fv, nv}, g, l, adv, ret);
  BOOST_CHECK_CLOSE(adv[3], 4 + g * 9.0 - 2.0, 1e-4);
}

// A table of broken experiment files: each must fail with one clear line that
// names the file, the line and the key — never a crash or a silent default.
struct BadConfig {
  const char* yaml;
  const char* expect;  // substring of the error (after "bad.yaml:")
};

// Writes each broken file, loads and validates it (env and policy included),
// and checks for one line naming the file and containing `expect`.
template <size_t N>
void expect_config_errors(const BadConfig (&cases)[N], const std::string& name) {
  const fs::path dir = temp_dir(name);
  const std::string path = (dir / "bad.yaml").string();
  for (size_t n = 0; n < N; ++n) {
    std::ofstream(path) << cases[n].yaml;
    BOOST_TEST_CONTEXT("case " << n << ": " << cases[n].yaml) {
      try {
        validate_experiment(load_experiment(path, {std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN}));
        BOOST_ERROR("no error for a broken config");
      } catch (const Error& e) {
        const std::string what = e.what();
        BOOST_CHECK_MESSAGE(what.find(path) != std::string::npos, "error does not name the file: " << what);
        BOOST_CHECK_MESSAGE(what.find(cases[n].expect) != std::string::npos,
                            "error '" << what << "' lacks '" << cases[n].expect << "'");
        BOOST_CHECK_MESSAGE(what.find('\n') == std::string::npos, "error is not one line: " << what);
      }
    }
  }
  fs::remove_all(dir);
}

// The value targets come out standardised by the statistics of every target
// seen so far, and the head's outputs go back through the same statistics.
BOOST_AUTO_TEST_CASE(return_normalizer_standardises_by_the_running_statistics) {
  std::mt19937 g(3);
  std::normal_distribution<float> d(4.f, 3.f);
  const int T = 8, B = 50;
  const size_t n = static_cast<size_t>(T) * B;
  std::vector<float> first(n), second(n);
  for (float& x : first) x = d(g);
  for (float& x : second) x = 2.f * d(g);  // another scale: the merge must weigh both chunks
  const auto mean_var = [](const std::vector<float>& x) {
    double m = 0, v = 0;
    for (const float e : x) m += e;
    m /= static_cast<double>(x.size());
    for (const float e : x) v += (e - m) * (e - m);
    return std::make_pair(m, v / static_cast<double>(x.size()));
  };
  ReturnNormalizer norm;
  std::vector<float> head = {0.f, 1.f, -2.f};
  norm.denormalize(head.data(), head.size());  // initial statistics (0, 1): no change
  BOOST_TEST((head == std::vector<float>{0.f, 1.f, -2.f}));

  std::vector<float> out = first;
  norm.normalize(out.data(), n, T);
  const auto [m1, v1] = mean_var(out);
  BOOST_TEST(std::abs(m1) < 1e-6);
  BOOST_TEST(std::abs(v1 - 1.0) < 1e-5);

  std::vector<float> both = first;
  both.insert(both.end(), second.begin(), second.end());
  const auto [m_all, v_all] = mean_var(both);
  out = second;
  norm.normalize(out.data(), n, T);
  const std::vector<double> st = norm.state();
  BOOST_TEST(std::abs(st[0] - m_all) < 1e-9 * std::abs(m_all));
  BOOST_TEST(std::abs(st[1] - v_all) < 1e-9 * v_all);
  BOOST_TEST(st[2] == 2.0 * n);
  for (size_t i = 0; i < n; i += 37)
    BOOST_TEST(std::abs(out[i] - (second[i] - m_all) / std::sqrt(v_all)) < 1e-5);
  // A standardised value read back in reward units is the target it stood for.
  norm.denormalize(out.data(), n);
  for (size_t i = 0; i < n; i += 37) BOOST_TEST(std::abs(out[i] - second[i]) < 1e-5 * std::max(1.f, std::abs(second[i])));
  // What a checkpoint keeps and restores.
  ReturnNormalizer resumed;
  BOOST_TEST(resumed.set_state(st));
  BOOST_TEST(resumed.state() == st);
  BOOST_TEST(!resumed.set_state({1.0, 2.0}));
}

// GPU learners under several ranks (LearnerLoop's even_shares): every rank
// gets B / minibatches of its own columns per minibatch, in the shuffled
// order, each exactly once per epoch; one rank gets the global runs.
BOOST_AUTO_TEST_CASE(even_shares_give_every_rank_one_minibatch_shape) {
  const int N = 3, B = 4, minibatches = 2, share = B / minibatches;
  std::vector<int> order(N * B);
  for (int i = 0; i < N * B; ++i) order[static_cast<size_t>(i)] = (7 * i + 5) % (N * B);  // a permutation
  std::vector<int> cols;
  for (int r = 0; r < N; ++r) {
    std::vector<int> mine_in_order;  // this rank's columns as the shuffle meets them, local
    for (const int g : order)
      if (g >= r * B && g < (r + 1) * B) mine_in_order.push_back(g - r * B);
    std::vector<int> all;
    for (int mb = 0; mb < minibatches; ++mb) {
      even_share_columns(order, r * B, B, minibatches, mb, cols);
      BOOST_REQUIRE_EQUAL(cols.size(), static_cast<size_t>(share));
      all.insert(all.end(), cols.begin(), cols.end());
    }
    BOOST_CHECK_MESSAGE(all == mine_in_order, "rank " << r << ": not its columns in the shuffled order");
  }
  // One rank: minibatch mb is the mb-th run of the shuffle itself.
  std::vector<int> one(8);
  for (int i = 0; i < 8; ++i) one[static_cast<size_t>(i)] = (3 * i + 1) % 8;
  for (int mb = 0; mb < 4; ++mb) {
    even_share_columns(one, 0, 8, 4, mb, cols);
    BOOST_CHECK(cols == std::vector<int>(one.begin() + 2 * mb, one.begin() + 2 * mb + 2));
  }
}

BOOST_AUTO_TEST_CASE(broken_configs_give_clear_errors) {
  const BadConfig cases[] = {
      {"env: {type: cartpole\n", "malformed YAML"},
      {"- a\n- b\n", "must be a YAML map"},
      {"policy: {type: mamba1}\n", "env: required section is missing"},
      {"env: {type: cartpole}\n", "policy: required section is missing"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nalgorithm: {}\n", "3:1: algorithm: unknown key"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nalgo: {lr: fast}\n", "algo.lr: cannot read 'fast' as a number"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nalgo: {lr: -1}\n", "algo.lr: value -1 is out of range"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nalgo: {gamma: 1.5}\n", "algo.gamma: value 1.5 is out of range"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nalgo: {epochs: 0}\n", "algo.epochs: value 0 is out of range"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nalgo: {chunk_len: 2.5}\n", "algo.chunk_len: cannot read '2.5' as an integer"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nalgo: {lr_schedule: cosine}\n", "algo.lr_schedule: 'cosine' is not one of constant|linear"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nalgo: {on_nonfinite: ignore}\n", "algo.on_nonfinite"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nalgo: {clip: 0.2}\n", "algo.clip: unknown key"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nalgo: [1, 2]\n", "algo: expected a map"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {device: tpu}\n", "runtime.device: 'tpu' is not one of cpu|cuda|auto"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {dtype: float16}\n", "runtime.dtype: 'float16' is not one of float32|bfloat16"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {dtype: bfloat16}\n",
       "3:18: runtime.dtype: bfloat16 weights need the GPU actor, but this run is on the CPU (runtime.device: cpu)"},
      // This suite hides every GPU (test/hide_gpus.hpp): cuda falls back, and bf16 cannot follow it.
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {device: cuda, dtype: bfloat16}\n",
       "runtime.dtype: bfloat16 weights need the GPU actor, but this run is on the CPU ("},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {learner_dtype: float64}\n",
       "runtime.learner_dtype: 'float64' is not one of float32|bfloat16|float16"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {learner_dtype: float16}\n",
       "3:26: runtime.learner_dtype: float16 GEMMs need the GPU learner, but this run is on the CPU (runtime.device: cpu)"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {device: cuda, learner_dtype: bfloat16}\n",
       "runtime.learner_dtype: bfloat16 GEMMs need the GPU learner, but this run is on the CPU ("},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {sync: maybe}\n", "runtime.sync: cannot read 'maybe' as a boolean"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {seed: -3}\n", "runtime.seed"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {num_actors: 0}\n", "runtime.num_actors: value 0 is out of range"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {out_dir: \"\"}\n", "runtime.out_dir: must not be empty"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {metrics_format: xml}\n", "runtime.metrics_format"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {outdir: x}\n", "runtime.outdir: unknown key"},
      // A trailing carriage return would be written back unquoted into the
      // checkpoint's config and read back without it (found by fuzz_experiment).
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {out_dir: \"runs/x\\r\"}\n",
       "3:20: runtime.out_dir: control character 0xd"},
      {"env: {type: cartpole}\npolicy: {type: mamba1}\nruntime: {extra_plugins: [a.so, \"b\\x01.so\"]}\n",
       "runtime.extra_plugins[1]: control character 0x1"},
      {"env: {type: cartpole, \"num\\u007f\": 3}\npolicy: {type: mamba1}\n", "env.num\x7f: control character 0x7f"},
  };
  expect_config_errors(cases, "bad_configs");
}

// Env and policy sections are validated by their owners, reached through the
// same experiment: errors still name file:line and the key.
BOOST_AUTO_TEST_CASE(broken_env_and_policy_sections_give_clear_errors) {
  const BadConfig cases[] = {
      {"env: {type: cartpol}\npolicy: {type: mamba1}\n", "cartpol"},
      {"env: {type: cartpole, num_envs: 0}\npolicy: {type: mamba1}\n", "env.num_envs"},
      {"env: {type: cartpole, colour: red}\npolicy: {type: mamba1}\n", "env.colour: unknown key"},
      {"env: {type: stateless_cartpole, difficulty: extreme}\npolicy: {type: mamba1}\n", "env.difficulty"},
      {"env: {type: tmaze, length: 0}\npolicy: {type: mamba1}\n", "env.length"},
      {"env: {type: cartpole}\npolicy: {type: mamba2}\n", "policy.type: 'mamba2' is not a policy of"},
      {"env: {type: cartpole}\npolicy: {type: mamba1, d_model: -1}\n", "policy.d_model: value -1 is out of range"},
      {"env: {type: cartpole}\npolicy: {type: mamba1, headdim: 8}\n", "policy.headdim: unknown key"},
      {"env: {type: cartpole}\npolicy: {type: mamba3, d_model: 12, headdim: 16}\n", "headdim"},
      {"env: {type: cartpole}\npolicy: {type: mamba3, ngroups: 3}\n", "ngroups"},
      {"env: {type: cartpole}\npolicy: {type: mamba1, d_state: 0}\n", "policy.d_state: value 0 is out of range"},
      {"env: {type: cartpole}\npolicy: {type: gru, n_layers: many}\n", "policy.n_layers: cannot read 'many' as an integer"},
  };
  expect_config_errors(cases, "bad_sections");
  const fs::path dir = temp_dir("bad_plugin");
  // A missing plugin file is named too.
  {
    const std::string path = (dir / "ok.yaml").string();
    std::ofstream(path) << "env: {type: cartpole}\npolicy: {type: mamba1}\n";
    const Experiment exp = load_experiment(path, {"runtime.plugin=/nonexistent/libnothing.so"});
    BOOST_CHECK_EXCEPTION(validate_experiment(exp), Error, [](const Error& e) {
      return std::string(e.what()).find("/nonexistent/libnothing.so") != std::string::npos;
    });
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(overrides_apply_and_bad_overrides_are_named) {
  const fs::path dir = temp_dir("overrides");
  const std::string path = (dir / "x.yaml").string();
  std::ofstream(path) << "env: {type: cartpole}\npolicy: {type: mamba1}\nalgo: {lr: 0.001}\n";
  const Experiment e = load_experiment(path, {"algo.lr=0.01", "runtime.seed=7", "algo.epochs=2"});
  BOOST_TEST(e.algo.lr == 0.01);
  BOOST_TEST(e.algo.epochs == 2);
  BOOST_TEST(e.runtime.seed == 7u);
  BOOST_CHECK_THROW(load_experiment(path, {"algo.lr"}), ConfigError);
  BOOST_CHECK_THROW(load_experiment(path, {"algo.lr.x=1"}), ConfigError);
  BOOST_CHECK_THROW(load_experiment(path, {"algo.lrr=1"}), ConfigError);
  BOOST_CHECK_THROW(load_experiment((dir / "missing.yaml").string(), {}), ConfigError);
  const auto refused_naming = [&](const std::string& override, const std::string& expect) {
    try {
      load_experiment(path, {override});
      BOOST_ERROR("no error for override " << override);
    } catch (const ConfigError& e) {
      BOOST_CHECK_MESSAGE(std::string(e.what()).find(expect) != std::string::npos, e.what());
    }
  };
  refused_naming("runtime.out_dir=runs/x\r", "runtime.out_dir: control character 0xd");
  refused_naming("runtime.extra_plugins=[a.so, b.so\r]", "runtime.extra_plugins[1]: control character 0xd");
  refused_naming("algo.l\x01r=1", "control character 0x1");
  // CRLF line endings are line breaks, not part of the values.
  std::ofstream(path) << "env: {type: cartpole}\r\npolicy: {type: mamba1}\r\nruntime:\r\n  out_dir: runs/x\r\n";
  BOOST_TEST(load_experiment(path, {}).runtime.out_dir == "runs/x");
  fs::remove_all(dir);
}

// The message of the Error `f` throws ("" and a test failure when none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    BOOST_TEST_MESSAGE(e.what());
    return e.what();
  }
  BOOST_ERROR("no mambarl::Error");
  return "";
}

// A message meant for the user carries no internal check text.
void check_user_facing(const std::string& msg) {
  BOOST_TEST(msg.find("failed at") == std::string::npos, msg);
  BOOST_TEST(msg.find(".cpp:") == std::string::npos, msg);
}

// ~key deletes a key; every error about a key an override decided names that
// override, not the file the key is no longer from.
BOOST_AUTO_TEST_CASE(deletion_overrides_and_errors_naming_the_override) {
  const fs::path dir = temp_dir("deletions");
  const std::string path = (dir / "x.yaml").string();
  std::ofstream(path) << "env: {type: cartpole}\npolicy: {type: mamba1}\nalgo: {lr: 0.5, epochs: 2}\n";
  const Experiment e = load_experiment(path, {"~algo.lr"});
  BOOST_TEST(!e.root["algo"]["lr"].IsDefined());
  BOOST_TEST(e.algo.lr == AlgoConfig{}.lr);
  BOOST_TEST(e.algo.epochs == 2);
  // Deleted, then set again: the later override wins.
  BOOST_TEST(load_experiment(path, {"~algo", "algo.epochs=3"}).algo.epochs == 3);
  const auto refused = [&](std::vector<std::string> overrides) {
    return error_of([&] { load_experiment(path, overrides); });
  };
  BOOST_TEST(refused({"~algo.nothing"}) ==
             "command line: override '~algo.nothing': algo.nothing is not in the config (nothing to delete)");
  BOOST_TEST(refused({"~algo.lr.x"}) ==
             "command line: override '~algo.lr.x': algo.lr.x is not in the config (nothing to delete)");
  BOOST_TEST(refused({"~algo.lr=1"}) ==
             "command line: override '~algo.lr=1': a deletion takes no value (write ~key.path)");
  BOOST_TEST(refused({"~env"}) == "command line: override '~env': env: required section is missing");
  BOOST_TEST(refused({"algo.lr=-1"}) ==
             "command line: override 'algo.lr=-1': algo.lr: value -1 is out of range [0, 1]");
  BOOST_TEST(refused({"algo={lr: 2}"}) ==
             "command line: override 'algo={lr: 2}': algo.lr: value 2 is out of range [0, 1]");
  BOOST_TEST(refused({"algo=[1]"}) == "command line: override 'algo=[1]': algo: expected a map");
  BOOST_TEST(
      refused({"runtime.device=tpu"}) ==
      "command line: override 'runtime.device=tpu': runtime.device: 'tpu' is not one of cpu|cuda|auto");
  BOOST_TEST(refused({"algo.lrr=1"})
                 .rfind("command line: override 'algo.lrr=1': algo.lrr: unknown key (known: ", 0) == 0u);
  // A key the override did not touch is still named at its line in the file.
  std::ofstream(path) << "env: {type: cartpole}\npolicy: {type: mamba1}\nalgo: {lr: 0.5, epochs: 0}\n";
  BOOST_TEST(refused({"algo.lr=0.1"}) == path + ":3:25: algo.epochs: value 0 is out of range [1, 1000]");
  // A later override replaces an earlier one's claim: the last one is named.
  BOOST_TEST(refused({"algo.lr=-1", "algo={epochs: 0}"}) ==
             "command line: override 'algo={epochs: 0}': algo.epochs: value 0 is out of range [1, 1000]");
  fs::remove_all(dir);
}

// Switching a section's type by override leaves the old type's keys from the
// file behind: the unknown-key error names them and how to drop them.
BOOST_AUTO_TEST_CASE(switching_the_type_by_override_says_how_to_drop_the_old_keys) {
  const fs::path dir = temp_dir("type_switch");
  const std::string path = (dir / "m.yaml").string();
  std::ofstream(path) << "env: {type: tmaze, length: 5}\n"
                         "policy: {type: mamba1, d_model: 8, n_layers: 1, d_state: 4, expand: 2}\n";
  const std::string plugin = std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN;
  const auto refused = [&](std::vector<std::string> overrides) {
    overrides.push_back(plugin);
    return error_of([&] { validate_experiment(load_experiment(path, overrides)); });
  };
  BOOST_TEST(
      refused({"policy.type=gru"}) ==
      path +
          ":2:49: policy.d_state: unknown key (known: type, d_model, n_layers, log_std_init, start_embedding); "
          "policy.type was switched from mamba1 by the override 'policy.type=gru': d_state, expand are not "
          "gru keys; drop them with ~policy.d_state ~policy.expand");
  const std::string env_hint = refused({"env.type=cartpole"});
  BOOST_TEST(env_hint.rfind(path + ":1:20: env.length: unknown key (known: ", 0) == 0u, env_hint);
  BOOST_TEST(
      env_hint.find("; env.type was switched from tmaze by the override 'env.type=cartpole': length is not a "
                    "cartpole key; drop it with ~env.length") != std::string::npos,
      env_hint);
  // A key the override itself added is named by its override, with no hint to drop it.
  BOOST_TEST(refused({"env.type=cartpole", "~env.length", "env.size=3"})
                 .rfind("command line: override 'env.size=3': env.size: unknown key (known: ", 0) == 0u);
  // Dropping them makes the switched config valid.
  validate_experiment(
      load_experiment(path, {"policy.type=gru", "~policy.d_state", "~policy.expand", plugin}));
  // Setting the type the file already has switches nothing: the plain unknown-key error.
  std::ofstream(path) << "env: {type: tmaze, colour: red}\npolicy: {type: mamba1}\n";
  const std::string same = refused({"env.type=tmaze"});
  BOOST_TEST(same.rfind(path + ":1:20: env.colour: unknown key (known: ", 0) == 0u, same);
  BOOST_TEST(same.find("switched") == std::string::npos, same);
  fs::remove_all(dir);
}

// yaml-cpp keeps both copies of a key and every lookup finds the first: a
// second `algo:` section would be ignored without a word.
BOOST_AUTO_TEST_CASE(duplicate_keys_name_both_lines) {
  const fs::path dir = temp_dir("duplicates");
  const std::string path = (dir / "dup.yaml").string();
  std::ofstream(path) << "env: {type: cartpole}\npolicy:\n  type: mamba1\n  d_model: 8\n  d_model: 16\n";
  BOOST_TEST(error_of([&] { load_experiment(path, {}); }) ==
             path + ":5:3: policy.d_model: duplicate key, first at " + path +
                 ":4:3 (only one of them would be used)");
  std::ofstream(path)
      << "env: {type: cartpole}\npolicy: {type: mamba1}\nalgo:\n  lr: 0.1\nalgo:\n  lr: 0.2\n";
  BOOST_TEST(error_of([&] { load_experiment(path, {}); }) ==
             path + ":5:1: algo: duplicate key, first at " + path + ":3:1 (only one of them would be used)");
  // Quoting does not make it another key.
  std::ofstream(path) << "env: {type: cartpole, num_envs: 2, \"num_envs\": 4}\npolicy: {type: mamba1}\n";
  BOOST_TEST(error_of([&] { load_experiment(path, {}); }) ==
             path + ":1:36: env.num_envs: duplicate key, first at " + path +
                 ":1:23 (only one of them would be used)");
  fs::remove_all(dir);
}

// The mistakes a user makes with a run's files get one plain line naming the
// path and what to do, without the internal check text.
BOOST_AUTO_TEST_CASE(user_mistakes_with_files_get_plain_messages) {
  const fs::path dir = temp_dir("user_errors");
  const std::string path = (dir / "tiny.yaml").string();
  std::ofstream(path) << "env: {type: cartpole, num_envs: 4}\n"
                         "policy: {type: mamba1, d_model: 8, n_layers: 1, d_state: 4}\n"
                         "algo: {total_env_steps: 64, chunk_len: 8, epochs: 1, minibatches: 2}\n";
  const std::string out = (dir / "out").string();
  const auto train = [&](std::vector<std::string> overrides, const TrainOptions& opts) {
    overrides.push_back(std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN);
    overrides.push_back("runtime.out_dir=" + out);
    std::ostringstream log;
    return run_training(load_experiment(path, overrides), opts, log);
  };
  TrainOptions resume;
  resume.resume = true;
  const std::string ckpt = out + "/checkpoint.safetensors";
  std::string msg = error_of([&] { train({}, resume); });
  BOOST_TEST(msg == "no checkpoint to resume: " + ckpt + " does not exist (train without --resume to start)");
  BOOST_TEST(!fs::exists(out));  // refused before anything was written
  check_user_facing(msg);

  train({}, TrainOptions{});
  msg = error_of([&] { train({"env.num_envs=8"}, resume); });
  BOOST_TEST(
      msg ==
      "cannot resume from " + ckpt +
          ": the checkpoint has 4 envs and the config 8 (env.num_envs at "
          "command line: override 'env.num_envs=8'); resume with env.num_envs=4, or train without --resume");
  check_user_facing(msg);

  const std::string ckpt_bytes = [&] {
    std::ifstream in(ckpt, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }();
  const std::string cut = (dir / "cut.safetensors").string();
  std::ofstream(cut, std::ios::binary) << ckpt_bytes.substr(0, ckpt_bytes.size() - 100);
  resume.resume_from = cut;
  msg = error_of([&] { train({}, resume); });
  BOOST_TEST(msg.rfind(cut + " is truncated: ", 0) == 0u, msg);
  check_user_facing(msg);

  EvalOptions eval;
  eval.weights = path;  // a config, not a checkpoint
  std::ostringstream eval_out;
  msg = error_of([&] { run_evaluation(eval, eval_out); });
  BOOST_TEST(msg.rfind(path + " is not a safetensors checkpoint (its first 8 bytes give a header length of ",
                       0) == 0u,
             msg);
  check_user_facing(msg);

  msg = error_of([&] { load_experiment(dir.string(), {}); });
  BOOST_TEST(msg == dir.string() + " is a directory (expected an experiment config file)");
  check_user_facing(msg);
  const std::string empty = (dir / "empty.yaml").string();
  std::ofstream{empty};
  msg = error_of([&] { load_experiment(empty, {}); });
  BOOST_TEST(msg == empty + " is empty (expected an experiment config with env: and policy: sections)");
  check_user_facing(msg);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(metrics_log_resume_cuts_back_and_drops_partial_lines) {
  const fs::path dir = temp_dir("metrics");
  const std::string path = (dir / "m.csv").string();
  {
    MetricsLog log(path, "csv", -1);
    for (int u = 1; u <= 5; ++u) log.write({{"update", u}, {"env_steps", 100.0 * u}, {"mean_return", u * 2.0}});
  }
  { std::ofstream(path, std::ios::app) << "6,600,1"; }  // a line cut mid-write (no newline)
  {
    MetricsLog log(path, "csv", 3);  // resume from a checkpoint at update 3
    BOOST_TEST(log.curve().size() == 3u);
    log.write({{"update", 4}, {"env_steps", 400}, {"mean_return", 9}});
  }
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(all == "update,env_steps,mean_return\n1,100,2\n2,200,4\n3,300,6\n4,400,9\n");
  fs::remove_all(dir);
}

// A run resumed by a version that logs another column set (here: one more)
// rewrites the header; the kept rows stay as they were.
BOOST_AUTO_TEST_CASE(metrics_log_resume_with_new_columns_rewrites_the_header) {
  const fs::path dir = temp_dir("metrics_cols");
  const std::string path = (dir / "m.csv").string();
  {
    MetricsLog log(path, "csv", -1);
    for (int u = 1; u <= 2; ++u) log.write({{"update", u}, {"env_steps", 100.0 * u}, {"mean_return", 1}});
  }
  {
    MetricsLog log(path, "csv", 2);
    log.write({{"update", 3}, {"env_steps", 300}, {"mean_return", 1}, {"learn_s", 0.5}});
    log.write({{"update", 4}, {"env_steps", 400}, {"mean_return", 1}, {"learn_s", 0.25}});
  }
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(all == "update,env_steps,mean_return,learn_s\n1,100,1\n2,200,1\n3,300,1,0.5\n4,400,1,0.25\n");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(bounded_queue_never_exceeds_its_bound) {
  // Four fast producers against a deliberately slow consumer (the learner):
  // the queue fills to its bound and must stay there, never above it.
  constexpr size_t kBound = 3;
  constexpr int kProducers = 4, kEach = 150;
  BoundedQueue<int> q(kBound);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      for (int i = 0; i < kEach; ++i) q.push(p * kEach + i);  // never closed: always true
    });
  std::vector<int> last(kProducers, -1);
  int v = 0, popped = 0;
  while (popped < kProducers * kEach && q.pop(v)) {
    ++popped;
    const int p = v / kEach;
    BOOST_REQUIRE_GT(v % kEach, last[static_cast<size_t>(p)]);  // FIFO per producer
    last[static_cast<size_t>(p)] = v % kEach;
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // the slow learner
  }
  for (auto& t : producers) t.join();
  BOOST_TEST(popped == kProducers * kEach);
  // Reaching the bound shows the producers really were held back (not a vacuous pass).
  BOOST_TEST(q.high_water() == kBound);
}

BOOST_AUTO_TEST_CASE(bounded_queue_pop_for_times_out_and_sees_close) {
  BoundedQueue<int> q(2);
  int v = 0;
  const auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST((q.pop_for(v, std::chrono::milliseconds(20)) == BoundedQueue<int>::Pop::timeout));
  BOOST_TEST((std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(20)));
  q.push(7);
  BOOST_TEST((q.pop_for(v, std::chrono::milliseconds(20)) == BoundedQueue<int>::Pop::item));
  BOOST_TEST(v == 7);
  q.close();
  BOOST_TEST((q.pop_for(v, std::chrono::seconds(10)) == BoundedQueue<int>::Pop::closed));
}

BOOST_AUTO_TEST_CASE(watchdog_reports_the_longest_busy_actor_past_the_limit) {
  using Clock = ActorWatchdog::Clock;
  ActorWatchdog w(3, 2.0);
  const Clock::time_point t0 = Clock::now();
  BOOST_TEST(!w.check(t0 + std::chrono::hours(1)));  // idle actors (waiting on queues) never stall
  w.begin_chunk(1, t0);
  w.begin_chunk(2, t0 + std::chrono::seconds(1));
  BOOST_TEST(!w.check(t0 + std::chrono::milliseconds(1900)));
  const auto s = w.check(t0 + std::chrono::milliseconds(3500));
  BOOST_REQUIRE(s);
  BOOST_TEST(s->actor == 1);
  BOOST_TEST(s->stalled_s == 3.5, boost::test_tools::tolerance(1e-9));
  w.end_chunk(1);  // it handed its chunk over: actor 2 is now the only one past the limit
  const auto s2 = w.check(t0 + std::chrono::milliseconds(3500));
  BOOST_REQUIRE(s2);
  BOOST_TEST(s2->actor == 2);
  w.end_chunk(2);
  BOOST_TEST(!w.check(t0 + std::chrono::hours(1)));
}

// A plugin can add env types through the C ABI; `env.type` then reaches them
// like a bundled one, with their own key checks, stepping and saved state.
BOOST_AUTO_TEST_CASE(plugins_add_env_types) {
  const fs::path dir = temp_dir("plugin_env");
  const std::string path = (dir / "coin.yaml").string();
  std::ofstream(path) << "env: {type: coin_guess, num_envs: 3, length: 5}\npolicy: {type: mlp, d_model: 8, n_layers: 1}\n";
  const std::vector<std::string> plugins = {std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN,
                                            std::string("runtime.extra_plugins=[") + MAMBARL_TEST_ENV_PLUGIN + "]"};
  const Experiment exp = load_experiment(path, plugins);
  validate_experiment(exp);
  const auto session = load_plugins(exp);  // loading the same plugin again is harmless
  auto env = make_vec_env(exp.section("env"));
  BOOST_TEST(env->spec().id == "coin_guess");
  // Written back: the shared keys resolved, the plugin's own as given (the ABI has no table of them).
  const YAML::Node resolved = resolved_env_config(exp.section("env"));
  BOOST_TEST(resolved["backend"].as<std::string>() == "cpu");
  BOOST_TEST(resolved["length"].as<int>() == 5);
  BOOST_TEST(env->spec().obs_dim == 2);
  env->reset(4);
  const std::vector<float> right_guess = {env->obs()[1], env->obs()[3], env->obs()[5]};  // 1 = tails shown
  env->step(right_guess.data());
  for (int b = 0; b < 3; ++b) BOOST_TEST(env->reward()[b] == 0.2f);
  const std::vector<uint8_t> saved = env->save_state();
  std::vector<float> zeros(3, 0.0f), after_a, after_b;
  for (int i = 0; i < 4; ++i) env->step(zeros.data());
  after_a.assign(env->obs(), env->obs() + 6);
  BOOST_TEST(env->truncated()[0] == 1);  // 5 steps
  env->load_state(saved);
  for (int i = 0; i < 4; ++i) env->step(zeros.data());
  after_b.assign(env->obs(), env->obs() + 6);
  BOOST_TEST(after_a == after_b);
  const float bad[3] = {0, 2, 0};
  BOOST_CHECK_EXCEPTION(env->step(bad), Error,
                        [](const Error& e) { return std::string(e.what()).find("got action 2") != std::string::npos; });

  // The plugin env's own key check, reported at the env section of the file.
  std::ofstream(path) << "env: {type: coin_guess, lenght: 5}\npolicy: {type: mlp}\n";
  BOOST_CHECK_EXCEPTION(validate_experiment(load_experiment(path, plugins)), ConfigError, [&](const Error& e) {
    const std::string w = e.what();
    return w.find(path + ":1:") != std::string::npos && w.find("lenght") != std::string::npos;
  });
  // An env type that clashes with a bundled one is refused, naming the file.
  const std::vector<std::string> clash = {std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN,
                                          std::string("runtime.extra_plugins=[") + MAMBARL_TEST_ENV_PLUGIN_CLASH + "]"};
  BOOST_CHECK_EXCEPTION(validate_experiment(load_experiment(path, clash)), Error, [](const Error& e) {
    const std::string w = e.what();
    return w.find("env_plugin_clash") != std::string::npos && w.find("'cartpole' is already registered") != std::string::npos;
  });
  fs::remove_all(dir);
}

// runtime.device: cuda on a machine without a usable GPU (this suite hides
// every GPU: test/hide_gpus.hpp) trains on the CPU after one line saying why,
// and the resolved device is what config.yaml and the checkpoint record;
// auto picks the CPU the same way. gru on cuda is an error (config table above).
BOOST_AUTO_TEST_CASE(cuda_without_a_gpu_falls_back_to_the_cpu_and_trains) {
  const fs::path dir = temp_dir("fallback");
  const std::string path = (dir / "tiny.yaml").string();
  std::ofstream(path) << "env: {type: cartpole, num_envs: 4}\n"
                         "policy: {type: mamba1, d_model: 8, n_layers: 1, d_state: 4}\n"
                         "algo: {total_env_steps: 64, chunk_len: 8, epochs: 1, minibatches: 2}\n";
  for (const std::string device : {"cuda", "auto"}) {
    BOOST_TEST_CONTEXT("runtime.device: " << device) {
      const fs::path out = dir / device;
      const Experiment exp = load_experiment(path, {std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN,
                                                    "runtime.out_dir=" + out.string(), "runtime.device=" + device});
      std::ostringstream log;
      const TrainSummary s = run_training(exp, TrainOptions{}, log);
      const std::string text = log.str();
      BOOST_TEST_MESSAGE(text);
      const std::string why = device == "cuda" ? "runtime.device: cuda, but " : "runtime.device: auto chose the CPU: ";
      const std::string no_gpu = MAMBARL_TEST_PLUGIN_HAS_CUDA ? "no usable CUDA device (cudaGetDeviceCount: "
                                                              : "this build of mambarl_policies has no CUDA engine";
      const size_t at = text.find(why + no_gpu);
      BOOST_TEST(at != std::string::npos);
      BOOST_TEST(text.find(why, at + 1) == std::string::npos);  // said once
      if (device == "cuda") BOOST_TEST(text.find(": falling back to the CPU\n") != std::string::npos);
      BOOST_TEST(text.find(", device cpu, dtype float32,") != std::string::npos);
      BOOST_TEST(s.env_steps >= 64);
      BOOST_TEST(fs::exists(s.checkpoint));
      const YAML::Node resolved = YAML::LoadFile((out / "config.yaml").string());
      BOOST_TEST(resolved["runtime"]["device"].as<std::string>() == "cpu");
      BOOST_TEST(resolved["runtime"]["dtype"].as<std::string>() == "float32");
    }
  }
  fs::remove_all(dir);
}

// A tiny CPU run into `out`: the config behind the out_dir and memory tests.
Experiment tiny_experiment(const fs::path& dir, const fs::path& out, std::vector<std::string> overrides = {}) {
  const std::string path = (dir / "tiny.yaml").string();
  std::ofstream(path) << "env: {type: cartpole, num_envs: 4}\n"
                         "policy: {type: mamba1, d_model: 8, n_layers: 1, d_state: 4}\n"
                         "algo: {total_env_steps: 64, chunk_len: 8, epochs: 1, minibatches: 2}\n"
                         "runtime: {device: cpu}\n";
  overrides.push_back(std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN);
  overrides.push_back("runtime.out_dir=" + out.string());
  return load_experiment(path, overrides);
}

// An out_dir holding an earlier run's checkpoint or metrics is refused without
// --resume, naming the folder and both ways on, and left untouched; --force
// replaces the run (its metrics start again) and keeps files that are not a run's.
BOOST_AUTO_TEST_CASE(an_earlier_run_in_out_dir_is_refused_unless_resumed_or_forced) {
  const fs::path dir = temp_dir("overwrite"), out = dir / "run";
  const Experiment exp = tiny_experiment(dir, out);
  std::ostringstream log;
  run_training(exp, TrainOptions{}, log);
  const auto rows = [&] {
    std::ifstream f(out / "metrics.csv");
    return std::count(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>(), '\n');
  };
  const auto first_rows = rows();
  BOOST_TEST(first_rows == 1 + 64 / 32);  // header + one row per update of 4 envs x 8 steps
  const auto refused = [&](const ConfigError& e) {
    const std::string w = e.what();
    BOOST_TEST_MESSAGE(w);
    return w.find("runtime.out_dir: '" + out.string() + "' already holds a previous run") != std::string::npos &&
           w.find("--resume continues it, --force replaces it") != std::string::npos;
  };
  BOOST_CHECK_EXCEPTION(run_training(exp, TrainOptions{}, log), ConfigError, refused);
  BOOST_TEST(rows() == first_rows);  // untouched
  // Metrics without a checkpoint (a run killed before its first one) count too.
  fs::remove(out / "checkpoint.safetensors");
  BOOST_CHECK_EXCEPTION(run_training(exp, TrainOptions{}, log), ConfigError, refused);

  std::ofstream(out / "notes.txt") << "the user's own file\n";
  TrainOptions force;
  force.force = true;
  std::ostringstream forced_log;
  run_training(exp, force, forced_log);
  BOOST_TEST(forced_log.str().find("--force: removed the previous run's files in " + out.string()) != std::string::npos);
  BOOST_TEST(rows() == first_rows);  // a new run, not appended to the old one
  BOOST_TEST(fs::exists(out / "notes.txt"));
  BOOST_TEST(fs::exists(out / "checkpoint.safetensors"));
  fs::remove_all(dir);
}

// A run writes `env:` back resolved, in config.yaml and in the checkpoint's
// experiment: the shared keys and the type's own, defaults filled in. A
// checkpoint from before, whose experiment holds `env:` as the config gave
// it, still evaluates and resumes.
BOOST_AUTO_TEST_CASE(a_run_writes_env_resolved_and_older_checkpoints_still_resume) {
  const fs::path dir = temp_dir("resolved_env"), out = dir / "run";
  std::ostringstream log;
  const TrainSummary first = run_training(tiny_experiment(dir, out), TrainOptions{}, log);
  const YAML::Node env = YAML::LoadFile((out / "config.yaml").string())["env"];
  BOOST_TEST(env["type"].as<std::string>() == "cartpole");
  BOOST_TEST(env["num_envs"].as<int>() == 4);
  BOOST_TEST(env["backend"].as<std::string>() == "cpu");  // absent from tiny.yaml: the defaults
  BOOST_TEST(env["prev_action"].as<bool>() == false);
  SafetensorsFile ck = read_safetensors(first.checkpoint);
  YAML::Node stored = YAML::Load(ck.metadata.at("experiment"));
  BOOST_TEST(YAML::Dump(stored["env"]) == YAML::Dump(env));

  // The checkpoint as an older build wrote it.
  stored["env"] = YAML::Load("{type: cartpole, num_envs: 4}");
  ck.metadata["experiment"] = YAML::Dump(stored);
  write_safetensors(first.checkpoint, ck);
  EvalOptions eval;
  eval.weights = first.checkpoint;
  eval.episodes = 2;
  std::ostringstream eval_log;
  BOOST_TEST(run_evaluation(eval, eval_log).returns.size() == 2u);
  TrainOptions resume;
  resume.resume = true;
  std::ostringstream resume_log;
  const TrainSummary resumed = run_training(tiny_experiment(dir, out, {"algo.total_env_steps=128"}), resume, resume_log);
  BOOST_TEST(resume_log.str().find("resumed from " + first.checkpoint) != std::string::npos, resume_log.str());
  BOOST_TEST(resumed.env_steps == 128);
  fs::remove_all(dir);
}

// The estimate puts each buffer where it lives and scales it with its shape:
// async mode keeps two chunks per actor, activations follow T x B/minibatches,
// runtime.device cuda moves the learner to the GPU, env.backend cuda the envs
// and chunks too.
// bench e2e's steady rate: the slope of a straight line exactly, with the
// slow first 10% of the points (start-up) left out.
BOOST_AUTO_TEST_CASE(steady_rate_is_the_slope_after_the_first_tenth) {
  std::vector<double> wall, steps;
  for (int i = 0; i < 20; ++i) {
    wall.push_back(i == 0 ? 5.0 : 5.0 + 0.5 * i);  // update 1 took 5 s (graph captures)
    steps.push_back(1000.0 * (i + 1));
  }
  wall[1] = 5.2;  // also start-up: the second of the first 10%
  const SteadyRate r = steady_rate(wall, steps);
  BOOST_TEST(r.first == 2u);
  BOOST_TEST(r.per_s == 2000.0, boost::test_tools::tolerance(1e-12));
  BOOST_CHECK_THROW(steady_rate({1, 2}, {10, 20}), Error);
}

BOOST_AUTO_TEST_CASE(memory_estimate_follows_the_config) {
  MemoryInputs in;
  in.num_envs = 1024;
  in.chunk_len = 64;
  in.minibatches = 4;
  in.obs_dim = 4;
  in.act_width = 1;
  in.state_size = 128;
  in.num_params = 10000;
  in.policy_type = "mamba1";
  in.d_model = 64;
  in.n_layers = 2;
  in.env_state_bytes = 100;
  const auto part = [](const MemoryEstimate& e, const std::string& what, bool device = false) {
    for (const auto& [name, n] : device ? e.device_parts : e.host_parts)
      if (name == what) return n;
    return size_t{0};
  };
  const MemoryEstimate sync = estimate_training_memory(in);
  BOOST_TEST(sync.device == 0u);
  BOOST_TEST(part(sync, "learner activations") == size_t{64} * 256 * 64 * 2 * 24 * 4);
  BOOST_TEST(part(sync, "envs") == size_t{1024} * (100 + 11 * 4 + 2));
  MemoryInputs async = in;
  async.sync = false;
  async.actors = 4;
  BOOST_TEST(part(estimate_training_memory(async), "rollout chunks") == 2 * part(sync, "rollout chunks"));
  MemoryInputs fewer_mb = in;
  fewer_mb.minibatches = 1;
  BOOST_TEST(part(estimate_training_memory(fewer_mb), "learner activations") == 4 * part(sync, "learner activations"));
  MemoryInputs longer = in;  // algo.bptt_len: three chunks of context before each
  longer.bptt_len = 256;
  const MemoryEstimate with_context = estimate_training_memory(longer);
  BOOST_TEST(part(with_context, "learner activations") == 4 * part(sync, "learner activations"));
  // The worker's context and each chunk's copy of it: obs (4 floats) and a flag
  // per step, and 3 start states per env.
  BOOST_TEST(part(with_context, "rollout chunks") ==
             part(sync, "rollout chunks") + 2 * (size_t{192} * 1024 * (4 * 4 + 1) + size_t{3} * 1024 * 128 * 4));
  MemoryInputs gpu = in;
  gpu.policy_on_device = true;
  const MemoryEstimate on_gpu = estimate_training_memory(gpu);
  BOOST_TEST(part(on_gpu, "learner activations", true) == part(sync, "learner activations"));
  BOOST_TEST(part(on_gpu, "envs") == part(sync, "envs"));
  gpu.envs_on_device = true;
  const MemoryEstimate all_gpu = estimate_training_memory(gpu);
  BOOST_TEST(part(all_gpu, "rollout chunks", true) == part(sync, "rollout chunks"));
  BOOST_TEST(all_gpu.host == 0u);
  BOOST_TEST(sync.host == all_gpu.device);
}

// A million envs on a 4096-step chunk cannot fit in any machine this runs on
// (the learner's activations alone are terabytes): refused in seconds, before
// anything large is allocated, with the estimate and what is available.
BOOST_AUTO_TEST_CASE(a_config_that_cannot_fit_in_memory_is_refused_fast) {
  const fs::path dir = temp_dir("memory");
  const Experiment exp =
      tiny_experiment(dir, dir / "run", {"env.num_envs=1000000", "algo.chunk_len=4096", "algo.minibatches=1"});
  std::ostringstream log;
  const auto t0 = std::chrono::steady_clock::now();
  BOOST_CHECK_EXCEPTION(run_training(exp, TrainOptions{}, log), ConfigError, [](const ConfigError& e) {
    const std::string w = e.what();
    BOOST_TEST_MESSAGE(w);
    return w.find("env.num_envs: 1000000 envs with algo.chunk_len 4096 need an estimated ") != std::string::npos &&
           w.find(" of host memory (learner activations ") != std::string::npos &&
           w.find(" available; lower env.num_envs, algo.chunk_len or algo.bptt_len") != std::string::npos;
  });
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10.0);
  fs::remove_all(dir);
}

// Every metrics row splits its update's wall time into collect_s (the
// rollout, sync mode) and learn_s (the update): both present, non-negative,
// and together within the wall time between two rows.
BOOST_AUTO_TEST_CASE(metrics_rows_split_the_update_into_collect_and_learn) {
  const fs::path dir = temp_dir("phases");
  const std::string path = (dir / "tiny.yaml").string();
  std::ofstream(path) << "env: {type: cartpole, num_envs: 8}\n"
                         "policy: {type: mamba1, d_model: 8, n_layers: 1, d_state: 4}\n"
                         "algo: {total_env_steps: 640, chunk_len: 16, epochs: 1, minibatches: 2}\n";
  const Experiment exp = load_experiment(path, {std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN,
                                                "runtime.out_dir=" + (dir / "run").string()});
  std::ostringstream log;
  run_training(exp, TrainOptions{}, log);
  std::ifstream in(dir / "run" / "metrics.csv");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  for (std::istringstream cells(line); std::getline(cells, line, ',');) header.push_back(line);
  const auto col = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    BOOST_REQUIRE_MESSAGE(it != header.end(), "metrics.csv has no column " << name);
    return static_cast<size_t>(it - header.begin());
  };
  const size_t wall = col("wall_s"), collect = col("collect_s"), learn = col("learn_s");
  double prev_wall = 0;
  int rows = 0;
  while (std::getline(in, line)) {
    std::vector<double> v;
    for (std::istringstream cells(line); std::getline(cells, line, ',');) v.push_back(std::stod(line));
    BOOST_REQUIRE_EQUAL(v.size(), header.size());
    BOOST_TEST(v[collect] >= 0.0);
    BOOST_TEST(v[learn] > 0.0);
    BOOST_TEST(v[collect] + v[learn] <= v[wall] - prev_wall + 1e-6);
    prev_wall = v[wall];
    ++rows;
  }
  BOOST_TEST(rows == 5);  // 640 steps in chunks of 8 x 16
  fs::remove_all(dir);
}

// env.backend: cuda needs the policy on the GPU, in async mode one actor and
// a policy lag of 1 allowed, and an env type with a CUDA version; each mistake is a ConfigError naming the keys
// involved, raised before any GPU work (this suite hides every GPU, so the
// checks cannot depend on one). runtime.device: auto that lands on the CPU
// runs the envs there too, after one line saying so.
BOOST_AUTO_TEST_CASE(env_backend_cuda_config_errors) {
  const fs::path dir = temp_dir("env_backend");
  const std::string path = (dir / "tiny.yaml").string();
  std::ofstream(path) << "env: {type: cartpole, num_envs: 4, backend: cuda}\n"
                         "policy: {type: mamba1, d_model: 8, n_layers: 1, d_state: 4}\n"
                         "algo: {total_env_steps: 64, chunk_len: 8, epochs: 1, minibatches: 2}\n";
  int runs = 0;  // each run its own out_dir: a finished one is not overwritten
  const auto run = [&](std::vector<std::string> overrides) {
    overrides.push_back(std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN);
    overrides.push_back("runtime.out_dir=" + (dir / ("out" + std::to_string(++runs))).string());
    std::ostringstream log;
    run_training(load_experiment(path, overrides), TrainOptions{}, log);
    return log.str();
  };
  const auto names = [](std::initializer_list<const char*> words) {
    return [words](const ConfigError& e) {
      const std::string w = e.what();
      BOOST_TEST_MESSAGE(w);
      for (const char* word : words)
        if (w.find(word) == std::string::npos) return false;
      return true;
    };
  };
  BOOST_CHECK_EXCEPTION(run({"runtime.device=cpu"}), ConfigError, names({"env.backend", "runtime.device", "cpu"}));
  // Async mode with GPU envs is one rollout graph, one chunk ahead of the learner.
  BOOST_CHECK_EXCEPTION(run({"runtime.device=cuda", "runtime.sync=false", "runtime.num_actors=2"}), ConfigError,
                        names({"runtime.num_actors", "2 actor threads", "env.backend"}));
  BOOST_CHECK_EXCEPTION(run({"runtime.device=cuda", "runtime.sync=false", "runtime.max_policy_lag=0"}), ConfigError,
                        names({"runtime.max_policy_lag", "runtime.sync: false", "1 update old"}));
  BOOST_CHECK_EXCEPTION(run({"runtime.device=cuda", "runtime.overlap_envs=on"}), ConfigError,
                        names({"runtime.overlap_envs", "env.backend"}));
  BOOST_CHECK_EXCEPTION(run({"runtime.device=cuda", "env.backend=gpu"}), ConfigError,
                        names({"env.backend", "'gpu' is not one of cpu|cuda"}));
  // No GPU is visible here, so cuda resolves to the CPU: an error, not a silent CPU-env run.
  BOOST_CHECK_EXCEPTION(run({"runtime.device=cuda"}), ConfigError, names({"env.backend", "runtime.device"}));
  // A plugin's env type has no CUDA version.
  std::ofstream(path) << "env: {type: coin_guess, num_envs: 4, length: 5, backend: cuda}\n"
                         "policy: {type: mlp, d_model: 8, n_layers: 1}\n"
                         "algo: {total_env_steps: 64, chunk_len: 8, epochs: 1, minibatches: 2}\n";
  BOOST_CHECK_EXCEPTION(
      run({"runtime.device=cuda", std::string("runtime.extra_plugins=[") + MAMBARL_TEST_ENV_PLUGIN + "]"}),
      ConfigError, names({"env.type", "coin_guess", "no CUDA version"}));
  // ... while backend: cpu reaches the plugin env without the runner's key.
  std::ofstream(path) << "env: {type: coin_guess, num_envs: 4, length: 5, backend: cpu}\n"
                         "policy: {type: mlp, d_model: 8, n_layers: 1}\n"
                         "algo: {total_env_steps: 64, chunk_len: 8, epochs: 1, minibatches: 2}\n";
  BOOST_TEST(run({std::string("runtime.extra_plugins=[") + MAMBARL_TEST_ENV_PLUGIN + "]"}).find(" envs on the CPU,") !=
             std::string::npos);
  // auto without a GPU: CPU envs, said once.
  std::ofstream(path) << "env: {type: cartpole, num_envs: 4, backend: cuda}\n"
                         "policy: {type: mamba1, d_model: 8, n_layers: 1, d_state: 4}\n"
                         "algo: {total_env_steps: 64, chunk_len: 8, epochs: 1, minibatches: 2}\n";
  const std::string text = run({"runtime.device=auto"});
  const std::string line = "env.backend: cuda, but runtime.device: auto chose the CPU: the envs run on the CPU\n";
  BOOST_TEST(text.find(line) != std::string::npos);
  BOOST_TEST(text.find(" envs on the CPU,") != std::string::npos);
  fs::remove_all(dir);
}

// A build without MPI started by mpirun as one of several ranks refuses to
// run, saying why (each rank would otherwise train alone on all the envs).
// With MPI, test_mpi runs the ranks instead.
BOOST_AUTO_TEST_CASE(several_ranks_without_mpi_are_refused) {
  if (built_with_mpi()) {
    BOOST_TEST_MESSAGE("this build has MPI: test_mpi runs several ranks");
    return;
  }
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  const std::string msg = error_of([] { make_ranks(); });
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  BOOST_TEST(
      msg.find("this process is one of 2 ranks (launched by mpirun), but this build of mambarl has no MPI") !=
          std::string::npos,
      msg);
  BOOST_TEST(launched_ranks() == 1);
  BOOST_TEST(make_ranks()->size() == 1);
}

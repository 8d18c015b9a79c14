// The config reference made from the sections' schemas (env, policy, algo,
// runtime): the committed page tools/CONFIG_KEYS.md is what
// `mambarl config --keys --markdown` writes now (so a key added to a table
// without refreshing the page fails here), `config --keys SECTION` lists that
// section alone and refuses an unknown one as a usage error, and the resolved
// sections a run writes into config.yaml read back to themselves. The tables
// drive the checks: an unknown key, a value out of range (named by file:line
// or by the override) and, with runtime.device cuda, a size the GPU kernels
// cannot hold (Mamba-3's d_state) are refused when the config is read.
#define BOOST_TEST_MODULE config_keys
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "envs/builtin_envs.hpp"
#include "envs/vec_env.hpp"
#include "kernels/kernel_limits.hpp"
#include "policy/policy_config.hpp"
#include "test/process_util.hpp"
#include "tools/config_keys.hpp"
#include "tools/experiment.hpp"

namespace fs = std::filesystem;
using namespace mambarl::test;

namespace {

// `mambarl args...`, its output (stdout and stderr) kept in a temporary file.
Ran run_mambarl(const std::vector<std::string>& args) {
  std::vector<std::string> argv{MAMBARL_TEST_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  const fs::path log = fs::temp_directory_path() / ("mambarl_test_config_keys_" + std::to_string(::getpid()));
  const Ran r = run_to_end(argv, log.string(), std::chrono::seconds(30));
  fs::remove(log);
  return r;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The `section:` map of experiment `text` after `overrides`, as the runner and the plugin see it.
mambarl::ConfigNode section_of(const std::string& text, const std::vector<std::string>& overrides,
                               const std::string& section) {
  return mambarl::parse_experiment(text, "x.yaml", overrides).section(section);
}

// The message of the ConfigError `f` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const mambarl::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(committed_page_is_current) {
  const char* src = std::getenv("MAMBARL_SOURCE_DIR");
  BOOST_REQUIRE_MESSAGE(src, "MAMBARL_SOURCE_DIR is not set (run through ctest)");
  const std::string page = std::string(src) + "/tools/CONFIG_KEYS.md";
  const Ran r = run_mambarl({"config", "--keys", "--markdown"});
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, "mambarl config --keys --markdown failed:\n" << r.out);
  BOOST_TEST(r.out == read_text(page), page << " differs from what the schemas give; refresh it from the "
                                            << "source folder with: build/bin/" << mambarl::kConfigKeysRefresh);
}

BOOST_AUTO_TEST_CASE(one_section_lists_its_keys_with_their_defaults) {
  const Ran algo = run_mambarl({"config", "--keys", "algo"});
  BOOST_REQUIRE_MESSAGE(algo.exit_code == 0, algo.out);
  BOOST_TEST(algo.out.rfind("algo:\n", 0) == 0u, algo.out);
  BOOST_TEST(!contains(algo.out, "runtime:"), algo.out);
  // A default copied from another key says so; a choice lists the choices.
  BOOST_TEST(contains(algo.out, "integer, default same as chunk_len, in [1, 65536]"), algo.out);
  BOOST_TEST(contains(algo.out, "string, default linear, in constant|linear"), algo.out);
  const Ran runtime = run_mambarl({"config", "--keys", "runtime"});
  BOOST_REQUIRE_MESSAGE(runtime.exit_code == 0, runtime.out);
  BOOST_TEST(contains(runtime.out, "learner_dtype"), runtime.out);
  BOOST_TEST(!contains(runtime.out, "algo:"), runtime.out);
}

// policy and env list their shared keys, then each type's (Mamba-3's d_state with its GPU limit).
BOOST_AUTO_TEST_CASE(typed_sections_list_each_types_keys) {
  const Ran policy = run_mambarl({"config", "--keys", "policy"});
  BOOST_REQUIRE_MESSAGE(policy.exit_code == 0, policy.out);
  BOOST_TEST(policy.out.rfind("policy:\n  type ", 0) == 0u, policy.out);
  BOOST_TEST(contains(policy.out, "string, default mamba1, in mamba1|mamba3|gru|mlp"), policy.out);
  BOOST_TEST(contains(policy.out, "policy, type mamba3:\n  d_state"), policy.out);
  BOOST_TEST(contains(policy.out, "integer, default 16, in [1, 256]; cuda: at most " +
                                      std::to_string(mambarl::cuda::kMamba3ScanMaxState)),
             policy.out);
  BOOST_TEST(contains(policy.out, "policy, type gru: no keys of its own"), policy.out);
  BOOST_TEST(!contains(policy.out, "algo:"), policy.out);
  const Ran env = run_mambarl({"config", "--keys", "env"});
  BOOST_REQUIRE_MESSAGE(env.exit_code == 0, env.out);
  BOOST_TEST(contains(env.out, "string, default none (required)"), env.out);
  BOOST_TEST(contains(env.out, "env, type tmaze:\n  length"), env.out);
  BOOST_TEST(contains(env.out, "string, default easy, in easy|medium|hard"), env.out);
  BOOST_TEST(contains(env.out, "boolean, default true for battleship, concentration, minesweeper, multiarmed_bandit, "
                             "noisy_stateless_cartpole; else false"),
             env.out);
}

BOOST_AUTO_TEST_CASE(unknown_section_is_a_usage_error_naming_it) {
  const Ran r = run_mambarl({"config", "--keys", "polcy"});
  BOOST_TEST(r.exit_code == 2, r.out);
  BOOST_TEST(contains(r.out, "unknown section 'polcy' (known: env, policy, algo, runtime)"), r.out);
}

// The written-back sections hold every key with its value: read again, they
// give the same config (defaults, a copied default, a list and an env type's
// own keys included).
BOOST_AUTO_TEST_CASE(resolved_sections_read_back_to_themselves) {
  const std::string text = "env: {type: tmaze}\npolicy: {type: mlp}\nalgo: {chunk_len: 16}\n";
  const auto resolved_yaml = [](const mambarl::Experiment& e) {
    return e.resolved_yaml(mambarl::resolved_env_config(e.section("env")), "type: mlp", "cpu");
  };
  for (const std::vector<std::string>& overrides :
       {std::vector<std::string>{},
        {"algo.bptt_len=48", "runtime.dtype=bfloat16", "runtime.extra_plugins=[a.so]", "env.length=7"}}) {
    const mambarl::Experiment first = mambarl::parse_experiment(text, "x.yaml", overrides);
    const std::string resolved = resolved_yaml(first);
    const mambarl::Experiment again = mambarl::parse_experiment(resolved, "config.yaml", {});
    BOOST_TEST(resolved_yaml(again) == resolved);
    BOOST_TEST(again.root["env"]["step_penalty"].as<float>() == 0.0f, resolved);
  }
  const mambarl::Experiment e = mambarl::parse_experiment(text, "x.yaml", {"runtime.dtype=bfloat16"});
  BOOST_TEST(e.algo.bptt_len == 16);
  BOOST_TEST(e.runtime.learner_dtype == "bfloat16");
  BOOST_TEST(e.algo.gamma == mambarl::AlgoConfig{}.gamma);
}

// The resolved `env:` holds the shared keys and the chosen type's own, each
// with its value (prev_action: the type's default), and no other type's keys.
BOOST_AUTO_TEST_CASE(resolved_env_holds_the_chosen_types_keys_with_their_values) {
  const auto env_of = [](const std::string& env, const std::vector<std::string>& overrides) {
    return section_of(env + "\npolicy: {type: mlp}\n", overrides, "env");
  };
  const auto keys_of = [](const YAML::Node& n) {
    std::vector<std::string> k;
    for (const auto& kv : n) k.push_back(kv.first.as<std::string>());
    return k;
  };
  const YAML::Node tmaze = mambarl::resolved_env_config(env_of("env: {type: tmaze, length: 5}", {}));
  BOOST_TEST(keys_of(tmaze) == (std::vector<std::string>{"type", "num_envs", "backend", "length", "step_penalty",
                                                         "prev_action"}),
             boost::test_tools::per_element());
  BOOST_TEST(tmaze["num_envs"].as<int>() == 16);
  BOOST_TEST(tmaze["backend"].as<std::string>() == "cpu");
  BOOST_TEST(tmaze["length"].as<int>() == 5);
  BOOST_TEST(tmaze["prev_action"].as<bool>() == false);
  const YAML::Node repeat =
      mambarl::resolved_env_config(env_of("env: {type: repeat_previous}", {"env.num_envs=8"}));
  BOOST_TEST(keys_of(repeat) == (std::vector<std::string>{"type", "num_envs", "backend", "difficulty", "prev_action"}),
             boost::test_tools::per_element());
  BOOST_TEST(repeat["num_envs"].as<int>() == 8);
  BOOST_TEST(repeat["difficulty"].as<std::string>() == "easy");
  // A type whose observation carries the previous action by default.
  const YAML::Node bandit = mambarl::resolved_env_config(env_of("env: {type: multiarmed_bandit}", {}));
  BOOST_TEST(bandit["prev_action"].as<bool>() == true);
  // NoisyStatelessCartPole too (its filter needs the push), not the noiseless one.
  const YAML::Node noisy = mambarl::resolved_env_config(env_of("env: {type: noisy_stateless_cartpole}", {}));
  BOOST_TEST(noisy["prev_action"].as<bool>() == true);
  const YAML::Node stateless = mambarl::resolved_env_config(env_of("env: {type: stateless_cartpole}", {}));
  BOOST_TEST(stateless["prev_action"].as<bool>() == false);
  // A key of another type is refused as when the envs are built.
  BOOST_TEST(error_of([&] {
               mambarl::resolved_env_config(env_of("env: {type: cartpole, length: 5}", {}));
             }).find("env.length: unknown key") != std::string::npos);
}

// A key of another type, or of no type, is refused naming file:line:col and the type's keys.
BOOST_AUTO_TEST_CASE(unknown_keys_of_typed_sections_name_the_known_ones) {
  const std::string m3 = error_of([] {
    mambarl::PolicyConfig::from_yaml(section_of("env: {type: cartpole}\npolicy: {type: mamba3, d_conv: 4}\n", {}, "policy"));
  });
  BOOST_TEST(m3.rfind("x.yaml:2:24: policy.d_conv: unknown key (known: type, d_model, n_layers, log_std_init, "
                      "start_embedding, d_state, expand, headdim, ngroups, rope_fraction, a_floor, is_outproj_norm, dt_min, dt_max)",
                      0) == 0u,
             m3);
  const std::string tmaze = error_of([] {
    mambarl::builtin_env("tmaze", section_of("env: {type: tmaze, difficulty: hard}\npolicy: {}\n", {}, "env"));
  });
  BOOST_TEST(tmaze.rfind("x.yaml:1:20: env.difficulty: unknown key (known: type, num_envs, backend, length, "
                         "step_penalty, prev_action)",
                         0) == 0u,
             tmaze);
}

// Out of range: the message names where the value came from (the file's
// line, or the override), the key, the value and the range.
BOOST_AUTO_TEST_CASE(out_of_range_values_name_the_key_the_place_and_the_range) {
  const std::string text = "env: {type: tmaze, length: 0}\npolicy:\n  type: mamba3\n  d_state: 300\n";
  const std::string file = error_of([&] { mambarl::PolicyConfig::from_yaml(section_of(text, {}, "policy")); });
  BOOST_TEST(file == "x.yaml:4:12: policy.d_state: value 300 is out of range [1, 256]", file);
  const std::string over =
      error_of([&] { mambarl::PolicyConfig::from_yaml(section_of(text, {"policy.d_state=0"}, "policy")); });
  BOOST_TEST(over == "command line: override 'policy.d_state=0': policy.d_state: value 0 is out of range [1, 256]",
             over);
  const std::string env = error_of([&] { mambarl::builtin_env("tmaze", section_of(text, {}, "env")); });
  BOOST_TEST(env == "x.yaml:1:28: env.length: value 0 is out of range [1, 100000]", env);
  const std::string choice = error_of(
      [&] { mambarl::builtin_env("minesweeper", section_of("env: {type: minesweeper, difficulty: extreme}\npolicy: {}\n", {}, "env")); });
  BOOST_TEST(choice == "x.yaml:1:38: env.difficulty: 'extreme' is not one of easy|medium|hard", choice);
}

// Mamba-3's training kernels hold d_state up to kMamba3ScanMaxState: with
// runtime.device cuda a larger one is refused when the config is read,
// naming the key, the value and the limit; the CPU takes it.
BOOST_AUTO_TEST_CASE(mamba3_d_state_beyond_the_gpu_kernels_is_refused_on_cuda) {
  const int limit = mambarl::cuda::kMamba3ScanMaxState;
  const std::string text = "env: {type: cartpole}\npolicy:\n  type: mamba3\n  d_state: " + std::to_string(2 * limit) + "\n";
  const std::string msg = error_of([&] { mambarl::PolicyConfig::from_yaml(section_of(text, {}, "policy"), true); });
  BOOST_TEST(msg.rfind("x.yaml:4:12: policy.d_state: value " + std::to_string(2 * limit) + " is more than " +
                           std::to_string(limit) + ", the most the GPU kernels hold (",
                       0) == 0u,
             msg);
  BOOST_TEST(contains(msg, "runtime.device is cuda"), msg);
  BOOST_TEST(mambarl::PolicyConfig::from_yaml(section_of(text, {}, "policy"), false).mamba3.d_state == 2 * limit);
  const std::string over = error_of([&] {
    mambarl::PolicyConfig::from_yaml(section_of(text, {"policy.d_state=" + std::to_string(limit + 2)}, "policy"), true);
  });
  BOOST_TEST(over.rfind("command line: override 'policy.d_state=" + std::to_string(limit + 2) + "': policy.d_state: ",
                        0) == 0u,
             over);
  // At the limit it is accepted; Mamba-1's d_state has no lower GPU limit than its range.
  BOOST_TEST(mambarl::PolicyConfig::from_yaml(section_of(text, {"policy.d_state=" + std::to_string(limit)}, "policy"), true)
                 .mamba3.d_state == limit);
  BOOST_TEST(mambarl::PolicyConfig::from_yaml(section_of(text, {"policy.type=mamba1", "policy.d_state=256"}, "policy"), true)
                 .mamba1.d_state == 256);
}

// Each type's resolved policy section holds every one of its keys and reads back to itself.
BOOST_AUTO_TEST_CASE(resolved_policy_sections_read_back_to_themselves) {
  for (const char* type : {"mamba1", "mamba3", "gru", "mlp"}) {
    const std::string text = std::string("env: {type: cartpole}\npolicy: {type: ") + type + ", d_model: 32}\n";
    const mambarl::PolicyConfig first = mambarl::PolicyConfig::from_yaml(section_of(text, {}, "policy"));
    YAML::Emitter a;
    a << first.to_yaml();
    const mambarl::PolicyConfig again = mambarl::PolicyConfig::from_yaml(
        mambarl::ConfigNode(YAML::Load(a.c_str()), "config.yaml", "policy"));
    YAML::Emitter b;
    b << again.to_yaml();
    BOOST_TEST(std::string(a.c_str()) == std::string(b.c_str()));
    size_t own = 0;  // the type's keys beside the 5 shared ones
    for (const mambarl::TypeKeys& t : mambarl::policy_config_section().types)
      if (t.types == type) own = t.keys.size();
    BOOST_TEST(first.to_yaml().size() == 5 + own, type);
  }
  // Mamba-1's dt_rank 0 stands for ceil(d_model / 16): written back as that.
  const mambarl::PolicyConfig m1 = mambarl::PolicyConfig::from_yaml(
      section_of("env: {type: cartpole}\npolicy: {type: mamba1, d_model: 40}\n", {}, "policy"));
  BOOST_TEST(m1.to_yaml()["dt_rank"].as<int>() == 3);
}

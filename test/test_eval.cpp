// `mambarl eval` and `mambarl export` as a user runs them: the binary as a
// child process on a checkpoint trained once for the suite (a few updates of
// configs/cartpole_mlp.yaml). Greedy evaluation repeats, --render shows the
// action, reward and return, exported weights run with --config (and not
// without), export never overwrites its input, and every bad option value is
// named with exit status 2.
#define BOOST_TEST_MODULE eval
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "test/process_util.hpp"

namespace fs = std::filesystem;
using namespace mambarl::test;

namespace {

const fs::path& work_dir() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("mambarl_test_eval_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

struct RemoveWorkDir {
  ~RemoveWorkDir() {
    std::error_code ec;
    fs::remove_all(work_dir(), ec);
  }
};

// `mambarl args...`; its output is kept in the work dir under `name`.
Ran run_mambarl(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> argv{MAMBARL_TEST_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_to_end(argv, (work_dir() / (name + ".out")).string());
}

std::string config_path() {
  const char* src = std::getenv("MAMBARL_SOURCE_DIR");
  BOOST_REQUIRE_MESSAGE(src, "MAMBARL_SOURCE_DIR is not set (run through ctest)");
  return std::string(src) + "/configs/cartpole_mlp.yaml";
}

// Trained once, for every test case.
const std::string& checkpoint() {
  static const std::string path = [] {
    const fs::path out = work_dir() / "run";
    const Ran r = run_mambarl(
        {"train", config_path(), "algo.total_env_steps=2048", "runtime.out_dir=" + out.string()}, "train");
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, "training failed:\n" << r.out);
    return (out / "checkpoint.safetensors").string();
  }();
  return path;
}

// Written once by `mambarl export`.
const std::string& exported() {
  static const std::string path = [] {
    const std::string out = (work_dir() / "weights.safetensors").string();
    const Ran r = run_mambarl({"export", checkpoint(), out}, "export");
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, "export failed:\n" << r.out);
    return out;
  }();
  return path;
}

// The "episode N: return R length L ..." lines of an eval, in order.
std::vector<std::string> episode_lines(const std::string& out) {
  std::vector<std::string> lines;
  const std::regex episode("^episode [0-9]+: return .*$", std::regex::multiline);
  for (std::sregex_iterator it(out.begin(), out.end(), episode), end; it != end; ++it)
    lines.push_back(it->str());
  return lines;
}

BOOST_TEST_GLOBAL_FIXTURE(RemoveWorkDir);

#define CHECK_HAS(text, part) \
  BOOST_TEST((text).find(part) != std::string::npos, "missing '" << (part) << "' in:\n" << (text))

}  // namespace

BOOST_AUTO_TEST_CASE(deterministic_eval_repeats_with_the_same_seed) {
  const std::vector<std::string> args{"eval",   checkpoint(), "--deterministic", "--episodes", "3",
                                      "--seed", "7"};
  const Ran a = run_mambarl(args, "greedy_a"), b = run_mambarl(args, "greedy_b");
  BOOST_REQUIRE_MESSAGE(a.exit_code == 0, a.out);
  BOOST_REQUIRE_MESSAGE(b.exit_code == 0, b.out);
  BOOST_TEST(episode_lines(a.out).size() == 3u);
  BOOST_TEST(episode_lines(a.out) == episode_lines(b.out), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(render_shows_action_reward_and_return_per_step) {
  const Ran r = run_mambarl({"eval", checkpoint(), "--render", "--episodes", "1", "--seed", "3"}, "render");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out);
  CHECK_HAS(r.out, "--- episode 1 step 0\n");
  // CartPole: a discrete action and +1 per step, so the return counts the steps.
  CHECK_HAS(r.out, " reward 1 return 1\n");
  CHECK_HAS(r.out, " reward 1 return 2\n");
  BOOST_TEST(std::regex_search(r.out, std::regex("\naction [01] reward 1 return [0-9]+\n")), r.out);
  const std::vector<std::string> episodes = episode_lines(r.out);
  BOOST_REQUIRE(episodes.size() == 1u);
  // The last step's running return is the episode's return.
  std::smatch m;
  BOOST_REQUIRE(std::regex_search(episodes[0], m, std::regex("return ([0-9]+) length ([0-9]+)")));
  BOOST_TEST(m[1].str() == m[2].str());
  CHECK_HAS(r.out, " return " + m[1].str() + "\nepisode 1: return " + m[1].str());
}

// The same weights, the same env seed, greedy: the same episodes whether they
// come from the checkpoint or from the exported file plus the config.
BOOST_AUTO_TEST_CASE(exported_weights_run_with_config_as_the_checkpoint_does) {
  const std::vector<std::string> opts{"--deterministic", "--episodes", "2", "--seed", "11"};
  std::vector<std::string> from_ckpt{"eval", checkpoint()},
      from_export{"eval", exported(), "--config", config_path()};
  from_ckpt.insert(from_ckpt.end(), opts.begin(), opts.end());
  from_export.insert(from_export.end(), opts.begin(), opts.end());
  const Ran c = run_mambarl(from_ckpt, "eval_checkpoint"), e = run_mambarl(from_export, "eval_export");
  BOOST_REQUIRE_MESSAGE(c.exit_code == 0, c.out);
  BOOST_REQUIRE_MESSAGE(e.exit_code == 0, e.out);
  BOOST_TEST(episode_lines(e.out).size() == 2u);
  BOOST_TEST(episode_lines(e.out) == episode_lines(c.out), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(exported_weights_without_config_are_refused) {
  const Ran r = run_mambarl({"eval", exported()}, "export_no_config");
  BOOST_TEST(r.exit_code == 1);
  CHECK_HAS(r.out, exported() + " holds exported weights");
  CHECK_HAS(r.out, "--config <experiment.yaml>");
}

BOOST_AUTO_TEST_CASE(config_policy_that_differs_from_the_weights_names_the_key) {
  const Ran r =
      run_mambarl({"eval", exported(), "--config", config_path(), "policy.d_model=48"}, "export_mismatch");
  BOOST_TEST(r.exit_code == 1);
  CHECK_HAS(r.out, "policy.d_model: 48, but the weights in " + exported() + " were trained with 32");
  const Ran t =
      run_mambarl({"eval", exported(), "--config", config_path(), "policy.type=gru"}, "export_type");
  BOOST_TEST(t.exit_code == 1);
  CHECK_HAS(t.out, "policy.type: 'gru', but the weights in " + exported() + " are of a mlp policy");
}

BOOST_AUTO_TEST_CASE(a_checkpoint_with_config_is_refused) {
  const Ran r = run_mambarl({"eval", checkpoint(), "--config", config_path()}, "checkpoint_config");
  BOOST_TEST(r.exit_code == 1);
  CHECK_HAS(r.out, "is a training checkpoint, which carries its own experiment");
}

// The input named again, as ./path from its folder, and through a symlink:
// each refused before anything is written, the checkpoint byte-identical.
BOOST_AUTO_TEST_CASE(export_onto_its_input_is_refused) {
  const std::string before = read_text(checkpoint());
  const fs::path link = work_dir() / "link.safetensors";
  fs::create_symlink(checkpoint(), link);
  const fs::path relative = fs::relative(checkpoint(), fs::current_path());
  for (const std::string& out : {checkpoint(), "./" + relative.string(), link.string()}) {
    BOOST_TEST_CONTEXT("output " << out) {
      const Ran r = run_mambarl({"export", checkpoint(), out}, "export_self");
      BOOST_TEST(r.exit_code == 1);
      CHECK_HAS(r.out, "mambarl export: error: the output '" + out + "' is the input checkpoint");
      BOOST_TEST((read_text(checkpoint()) == before));
    }
  }
  BOOST_TEST(fs::is_symlink(link));
}

BOOST_AUTO_TEST_CASE(bad_option_values_are_named_with_exit_status_2) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--episodes", "abc"}, "--episodes: expected a whole number >= 1, got 'abc'"},
      {{"--episodes", "2.5"}, "--episodes: expected a whole number >= 1, got '2.5'"},
      {{"--episodes", "0"}, "--episodes: expected a whole number >= 1, got '0'"},
      {{"--episodes", "99999999999"}, "--episodes: expected a whole number in [1, 2147483647], got '99999999999'"},
      {{"--seed", "-1"}, "--seed: expected a whole number >= 0, got '-1'"},
      {{"--seed", "5x"}, "--seed: expected a whole number >= 0, got '5x'"},
      {{"--seed"}, "--seed: 1 required UINT missing"},
      {{"--episodes"}, "--episodes: 1 required INT missing"},
      {{"--greedy"}, "The following argument was not expected: --greedy"},
      {{"greedy"}, "overrides: expected an override: key=value (algo.lr=1e-3) or ~key (~policy.d_state), got 'greedy'"},
  };
  for (const auto& [args, message] : cases) {
    BOOST_TEST_CONTEXT(message) {
      std::vector<std::string> argv{"eval", "no-such-file.safetensors"};
      argv.insert(argv.end(), args.begin(), args.end());
      const Ran r = run_mambarl(argv, "bad_args");
      BOOST_TEST(r.exit_code == 2);
      CHECK_HAS(r.out, "mambarl eval: " + message + "\n");
      BOOST_TEST(r.out.find("stoi") == std::string::npos);
    }
  }
}

// `bench train --policy` times that policy alone; --dtype, a GPU learner's
// precision, is refused on the CPU, whose learner has one.
BOOST_AUTO_TEST_CASE(bench_train_times_the_one_policy_asked_for) {
  const Ran one = run_mambarl({"bench", "train", "--policy", "mlp", "--reps", "1"}, "bench_policy");
  BOOST_REQUIRE_MESSAGE(one.exit_code == 0, one.out);
  CHECK_HAS(one.out, "\"policy\":\"mlp\"");
  BOOST_TEST(one.out.find("\"policy\":\"gru\"") == std::string::npos, one.out);
  const Ran cpu_dtype = run_mambarl({"bench", "train", "--dtype", "bfloat16"}, "bench_dtype");
  BOOST_TEST(cpu_dtype.exit_code == 1);
  CHECK_HAS(cpu_dtype.out, "bench train: --dtype is for --device cuda only (the CPU learner is float32)");
}

// The other commands' usage errors, each named after its (sub)command.
BOOST_AUTO_TEST_CASE(usage_errors_of_every_command_exit_2) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"trian"}, "mambarl: unknown command 'trian'"},
      {{"bench", "soak", "--minutes", "5x"}, "mambarl bench soak: --minutes: expected a number > 0, got '5x'"},
      {{"bench", "rollout", "--device", "gpu"}, "mambarl bench rollout: --device: gpu not in {cpu,cuda}"},
      {{"bench", "rollout", "--plot", "x.svg"}, "mambarl bench rollout: The following arguments were not expected: x.svg --plot"},
      {{"bench", "train", "--policy", "lstm"}, "mambarl bench train: --policy: lstm not in {mamba1,mamba3,gru,mlp}"},
      {{"bench", "train", "--dtype", "f16"}, "mambarl bench train: --dtype: f16 not in {float32,bfloat16,float16}"},
      {{"train", config_path(), "--resume", "--force"}, "mambarl train: --resume excludes --force"},
      {{"export", "a.safetensors"}, "mambarl export: out is required"},
  };
  for (const auto& [args, message] : cases) {
    BOOST_TEST_CONTEXT(message) {
      const Ran r = run_mambarl(args, "usage");
      BOOST_TEST(r.exit_code == 2);
      CHECK_HAS(r.out, message + "\n");
    }
  }
}

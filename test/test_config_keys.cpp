// The config reference made from the schemas of `algo:` and `runtime:`
// (tools/experiment.cpp): the committed page tools/CONFIG_KEYS.md is what
// `mambarl config --keys --markdown` writes now (so a key added to a table
// without refreshing the page fails here), `config --keys SECTION` lists that
// section alone and refuses an unknown one as a usage error, and the resolved
// sections a run writes into config.yaml read back to themselves.
#define BOOST_TEST_MODULE config_keys
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

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

BOOST_AUTO_TEST_CASE(unknown_section_is_a_usage_error_naming_it) {
  const Ran r = run_mambarl({"config", "--keys", "polcy"});
  BOOST_TEST(r.exit_code == 2, r.out);
  BOOST_TEST(contains(r.out, "unknown section 'polcy' (known: algo, runtime)"), r.out);
}

// The written-back sections hold every key with its value: read again, they
// give the same config (defaults, a copied default and a list included).
BOOST_AUTO_TEST_CASE(resolved_sections_read_back_to_themselves) {
  const std::string text = "env: {type: cartpole}\npolicy: {type: mlp}\nalgo: {chunk_len: 16}\n";
  for (const std::vector<std::string>& overrides :
       {std::vector<std::string>{}, {"algo.bptt_len=48", "runtime.dtype=bfloat16", "runtime.extra_plugins=[a.so]"}}) {
    const mambarl::Experiment first = mambarl::parse_experiment(text, "x.yaml", overrides);
    const std::string resolved = first.resolved_yaml("type: mlp", "cpu");
    const mambarl::Experiment again = mambarl::parse_experiment(resolved, "config.yaml", {});
    BOOST_TEST(again.resolved_yaml("type: mlp", "cpu") == resolved);
  }
  const mambarl::Experiment e = mambarl::parse_experiment(text, "x.yaml", {"runtime.dtype=bfloat16"});
  BOOST_TEST(e.algo.bptt_len == 16);
  BOOST_TEST(e.runtime.learner_dtype == "bfloat16");
  BOOST_TEST(e.algo.gamma == mambarl::AlgoConfig{}.gamma);
}

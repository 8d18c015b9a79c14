// Replays a fuzz target's committed inputs through its LLVMFuzzerTestOneInput,
// built with the ordinary compiler in the ordinary test pass: the seed corpus
// (test/fuzz/corpus/<target>/) and every input a fuzzer once crashed on
// (test/fuzz/regressions/<target>/, each fixed since). A regression coming back
// is an exception, a sanitizer report or a trap in the target, failing the suite.
#define BOOST_TEST_MODULE fuzz_replay
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> inputs_in(const std::string& dir) {
  std::vector<fs::path> files;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

void replay(const std::string& dir) {
  for (const fs::path& p : inputs_in(dir)) {
    BOOST_TEST_CONTEXT("input " << p.string()) {
      std::ifstream f(p, std::ios::binary);
      const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      BOOST_CHECK_NO_THROW(
          LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(seed_corpus_replays_cleanly) {
  // The seed corpus must exist: an empty directory would make this test pass vacuously.
  BOOST_REQUIRE_GE(inputs_in(MAMBARL_FUZZ_CORPUS).size(), 3u);
  replay(MAMBARL_FUZZ_CORPUS);
}

BOOST_AUTO_TEST_CASE(past_findings_stay_fixed) { replay(MAMBARL_FUZZ_REGRESSIONS); }

BOOST_AUTO_TEST_CASE(empty_input_is_refused_cleanly) {
  BOOST_CHECK_NO_THROW(LLVMFuzzerTestOneInput(nullptr, 0));
}

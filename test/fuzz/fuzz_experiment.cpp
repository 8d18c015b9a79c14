// libFuzzer target: the experiment loader (tools/experiment.cpp) with dotted
// command-line overrides. Input: the YAML text, then up to 8 overrides, all
// separated by NUL bytes. Any input may be refused, but only with a
// mambarl::Error (ConfigError naming file:line:key); anything else escaping
// (a yaml-cpp exception, std::out_of_range, a crash) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/base/check.hpp"
#include "tools/experiment.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t begin = 0;
  while (parts.size() < 9) {
    const size_t nul = in.find('\0', begin);
    parts.push_back(in.substr(begin, nul == std::string::npos ? std::string::npos : nul - begin));
    if (nul == std::string::npos) break;
    begin = nul + 1;
  }
  const std::vector<std::string> overrides(parts.begin() + 1, parts.end());
  try {
    const mambarl::Experiment e = mambarl::parse_experiment(parts[0], "<fuzz>.yaml", overrides);
    // A config that loads must also write itself back (stored in every checkpoint)
    // and read back the same way. The env and policy sections stand in as given:
    // this target builds only the loader, not the env types or the plugin.
    const std::string resolved = e.resolved_yaml(e.root["env"], "{type: mamba1}", e.runtime.device);
    const mambarl::Experiment again = mambarl::parse_experiment(resolved, "<fuzz resolved>.yaml", {});
    if (again.resolved_yaml(again.root["env"], "{type: mamba1}", again.runtime.device) != resolved)
      __builtin_trap();
  } catch (const mambarl::Error&) {
    // refused with a message: the expected outcome for most inputs
  }
  return 0;
}

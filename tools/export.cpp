#include "tools/export.hpp"

#include <filesystem>
#include <system_error>

#include "kernels/base/check.hpp"

namespace mambarl {

namespace {
// The checkpoint's own format moves here, and "format" becomes "pt", what HF
// tooling expects of a plain state dict.
constexpr const char* kSourceFormatKey = "source_format";
}  // namespace

void export_weights(const std::string& checkpoint, const std::string& out_path) {
  // equivalent() needs both files to exist; an output that does not exist
  // yet cannot be the input.
  std::error_code ec;
  MAMBARL_CHECK(
      !(std::filesystem::exists(out_path, ec) && std::filesystem::equivalent(checkpoint, out_path, ec)),
      "the output '" << out_path << "' is the input checkpoint '" << checkpoint
                     << "' (the same file): choose another output path");
  const SafetensorsFile in = read_safetensors(checkpoint);
  SafetensorsFile out;
  for (const char* key : {"format", "policy_config", "experiment"}) {
    const auto it = in.metadata.find(key);
    MAMBARL_CHECK(it != in.metadata.end(),
                  checkpoint << ": not a mambarl checkpoint (no '" << key << "' metadata)");
    out.metadata[key == std::string("format") ? kSourceFormatKey : key] = it->second;
  }
  out.metadata["format"] = "pt";
  for (const auto& t : in.tensors)
    if (t.name.rfind("optimizer.", 0) != 0 && t.name.rfind("runner.", 0) != 0) out.tensors.push_back(t);
  write_safetensors(out_path, out);
}

bool is_exported_weights(const SafetensorsFile& f) { return f.metadata.count(kSourceFormatKey) != 0; }

}  // namespace mambarl

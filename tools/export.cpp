#include "tools/export.hpp"

#include "kernels/check.hpp"
#include "policy/safetensors.hpp"

namespace mambarl {

void export_weights(const std::string& checkpoint, const std::string& out_path) {
  const SafetensorsFile in = read_safetensors(checkpoint);
  SafetensorsFile out;
  for (const char* key : {"format", "policy_config", "experiment"}) {
    const auto it = in.metadata.find(key);
    MAMBARL_CHECK(it != in.metadata.end(), checkpoint << ": not a mambarl checkpoint (no '" << key << "' metadata)");
    out.metadata[key == std::string("format") ? "source_format" : key] = it->second;
  }
  out.metadata["format"] = "pt";  // what HF tooling expects of a plain state dict
  for (const auto& t : in.tensors)
    if (t.name.rfind("optimizer.", 0) != 0 && t.name.rfind("runner.", 0) != 0) out.tensors.push_back(t);
  write_safetensors(out_path, out);
}

}  // namespace mambarl

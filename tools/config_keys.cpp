#include "tools/config_keys.hpp"

#include <algorithm>
#include <sstream>

namespace mambarl {

namespace {

// A table cell: a `|` (between choices) would end the cell; "" (any value of the type) is a dash.
std::string cell(const std::string& text) {
  if (text.empty()) return "-";
  std::string out;
  for (const char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::string config_keys_text(const std::vector<ConfigSection>& sections) {
  std::ostringstream os;
  for (const ConfigSection& s : sections) {
    os << s.name << ":\n";
    size_t width = 0;
    for (const KeyDoc& k : s.keys) width = std::max(width, k.key.size());
    for (const KeyDoc& k : s.keys) {
      os << "  " << k.key << std::string(width - k.key.size() + 2, ' ') << k.type << ", default " << k.default_text
         << ", " << (k.range.empty() ? "any" : "in " + k.range) << "\n"
         << "  " << std::string(width + 2, ' ') << k.doc << "\n";
    }
  }
  return os.str();
}

std::string config_keys_markdown(const std::vector<ConfigSection>& sections) {
  std::ostringstream os;
  os << "# Config keys\n\n"
     << "Generated from the schemas in tools/experiment.cpp by `" << kConfigKeysRefresh << "`;\n"
     << "the test `test_config_keys` fails when this page differs from what that command writes.\n"
     << "The `env:` and `policy:` sections are not listed here yet.\n";
  for (const ConfigSection& s : sections) {
    os << "\n## " << s.name << "\n\n"
       << "| key | type | default | range | |\n"
       << "|---|---|---|---|---|\n";
    for (const KeyDoc& k : s.keys)
      os << "| `" << s.name << "." << k.key << "` | " << k.type << " | `" << k.default_text << "` | "
         << cell(k.range) << " | " << cell(k.doc) << " |\n";
  }
  return os.str();
}

}  // namespace mambarl

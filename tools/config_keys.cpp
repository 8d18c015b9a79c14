#include "tools/config_keys.hpp"

#include <algorithm>
#include <sstream>

#include "envs/builtin_envs.hpp"
#include "policy/policy_config.hpp"
#include "tools/experiment.hpp"

namespace mambarl {

namespace {

// A table cell: a `|` (between choices) would end the cell; "" (any value of the type) is a dash.
std::string cell(const std::string& text) {
  if (text.empty()) return "-";
  std::string out;
  for (const char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// The keys of one block, aligned.
void keys_text(const std::vector<KeyDoc>& keys, std::ostream& os) {
  size_t width = 0;
  for (const KeyDoc& k : keys) width = std::max(width, k.key.size());
  for (const KeyDoc& k : keys) {
    os << "  " << k.key << std::string(width - k.key.size() + 2, ' ') << k.type << ", default " << k.default_text
       << ", " << (k.range.empty() ? "any" : "in " + k.range) << "\n"
       << "  " << std::string(width + 2, ' ') << k.doc << "\n";
  }
}

void keys_markdown(const std::string& section, const std::vector<KeyDoc>& keys, std::ostream& os) {
  os << "| key | type | default | range | |\n"
     << "|---|---|---|---|---|\n";
  for (const KeyDoc& k : keys)
    os << "| `" << section << "." << k.key << "` | " << k.type << " | `" << k.default_text << "` | "
       << cell(k.range) << " | " << cell(k.doc) << " |\n";
}

}  // namespace

std::vector<ConfigSection> config_sections() {
  std::vector<ConfigSection> s{env_config_section(), policy_config_section()};
  for (ConfigSection& runner : runner_config_sections()) s.push_back(std::move(runner));
  return s;
}

std::string config_keys_text(const std::vector<ConfigSection>& sections) {
  std::ostringstream os;
  for (const ConfigSection& s : sections) {
    os << s.name << ":\n";
    keys_text(s.keys, os);
    for (const TypeKeys& t : s.types) {
      os << s.name << ", type " << t.types << ":" << (t.keys.empty() ? " no keys of its own" : "") << "\n";
      keys_text(t.keys, os);
    }
  }
  return os.str();
}

std::string config_keys_markdown(const std::vector<ConfigSection>& sections) {
  std::ostringstream os;
  os << "# Config keys\n\n"
     << "Generated from the sections' schemas (envs/env_registry.cpp, envs/builtin_envs.cpp,\n"
     << "policy/policy_config.cpp, tools/experiment.cpp) by `" << kConfigKeysRefresh << "`;\n"
     << "the test `test_config_keys` fails when this page differs from what that command writes.\n"
     << "A section with a `type` takes the keys of its table and those of its type's; env types\n"
     << "added by a plugin read their own keys.\n";
  for (const ConfigSection& s : sections) {
    os << "\n## " << s.name << "\n\n";
    keys_markdown(s.name, s.keys, os);
    for (const TypeKeys& t : s.types) {
      os << "\n### " << s.name << ".type: " << t.types << "\n\n";
      if (t.keys.empty())
        os << "No keys of its own.\n";
      else
        keys_markdown(s.name, t.keys, os);
    }
  }
  return os.str();
}

}  // namespace mambarl

// Strict YAML access for every configurable object (envs, policies, runner).
//
// A ConfigNode is a YAML map plus where it came from (file, dotted key path,
// the overrides applied to it), so every error names "file:line:col: key.path:
// what is wrong", or the override that set the key instead of the file. Unknown keys
// are errors (a typo must not silently fall back to a default), and each
// optional key has its one written default at the call site of get().
// Header-only; lives beside check.hpp because envs, policy and tools all use it.
#pragma once

#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "kernels/base/check.hpp"
#include "kernels/base/override_log.hpp"

namespace mambarl {

class ConfigError : public Error {
 public:
  using Error::Error;
};

// "file:line:col" of a parsed node, or just "file" for one without a source
// position (a value or key set by an override).
inline std::string located(const std::string& file, const YAML::Mark& m) {
  std::ostringstream os;
  os << file;
  if (m.line >= 0) os << ":" << m.line + 1 << ":" << m.column + 1;
  return os.str();
}

class ConfigNode {
 public:
  ConfigNode() = default;
  // `overrides`: what apply_overrides() did to the tree `node` belongs to (null: none).
  ConfigNode(YAML::Node node, std::string file, std::string path = "",
             std::shared_ptr<const OverrideLog> overrides = nullptr)
      : node_(std::move(node)),
        file_(std::move(file)),
        path_(std::move(path)),
        overrides_(std::move(overrides)) {}

  const YAML::Node& yaml() const { return node_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  const std::shared_ptr<const OverrideLog>& overrides() const { return overrides_; }
  bool defined() const { return node_.IsDefined() && !node_.IsNull(); }
  bool has(const std::string& key) const { return defined() && node_.IsMap() && node_[key].IsDefined(); }

  std::string key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  // "file:line:col" of this node (or of `key` inside it, when present), or
  // "command line: override 'key=value'" when an override decided it.
  std::string where(const std::string& key = "") const {
    if (const OverrideLog::Entry* o = override_of(key)) return o->source;
    return located(file_, !key.empty() && has(key) ? node_[key].Mark() : node_.Mark());
  }

  // The override that set or deleted `key` (this node itself for ""), or nullptr.
  const OverrideLog::Entry* override_of(const std::string& key) const {
    if (!overrides_) return nullptr;
    return overrides_->find(key.empty() ? path_ : key_path(key));
  }

  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    throw ConfigError(where(key) + ": " + (key.empty() ? path_ : key_path(key)) + ": " + msg);
  }

  // The sub-map at `key` (an undefined node when absent; get() then gives defaults).
  ConfigNode child(const std::string& key) const {
    if (has(key) && !node_[key].IsMap() && !node_[key].IsNull()) fail(key, "expected a map");
    return ConfigNode(has(key) ? node_[key] : YAML::Node(YAML::NodeType::Undefined), file_, key_path(key),
                      overrides_);
  }

  template <typename T>
  T get(const std::string& key, const T& fallback) const {
    return has(key) ? convert<T>(key) : fallback;
  }
  template <typename T>
  T require(const std::string& key) const {
    if (!has(key)) fail(key, "required key is missing");
    return convert<T>(key);
  }
  // Like get(), and also checks lo <= value <= hi.
  template <typename T>
  T get_in(const std::string& key, const T& fallback, const T& lo, const T& hi) const {
    const T v = get<T>(key, fallback);
    if (v < lo || v > hi) {
      std::ostringstream os;
      os << "value " << v << " is out of range [" << lo << ", " << hi << "]";
      fail(key, os.str());
    }
    return v;
  }
  // A string that must be one of `choices`.
  std::string get_choice(const std::string& key, const std::string& fallback,
                         std::initializer_list<const char*> choices) const {
    const std::string v = get<std::string>(key, fallback);
    for (const char* c : choices)
      if (v == c) return v;
    fail(key, "'" + v + "' is not one of " + join(choices));
  }

  // Every key of this map must be in `known`.
  void check_known(std::initializer_list<const char*> known) const {
    check_known(std::vector<std::string>(known.begin(), known.end()));
  }
  void check_known(const std::vector<std::string>& known) const {
    if (!defined()) return;
    if (!node_.IsMap()) fail("", "expected a map");
    std::vector<YAML::Node> unknown;
    for (const auto& kv : node_) {
      bool ok = false;
      for (const auto& c : known) ok = ok || (kv.first.IsScalar() && kv.first.Scalar() == c);
      if (!ok) unknown.push_back(kv.first);
    }
    if (unknown.empty()) return;
    const std::string k = key_text(unknown.front());
    const OverrideLog::Entry* o = override_of(k);
    std::ostringstream os;
    os << (o ? o->source : located(file_, unknown.front().Mark())) << ": " << key_path(k)
       << ": unknown key (known: ";
    for (size_t i = 0; i < known.size(); ++i) os << (i ? ", " : "") << known[i];
    os << ")" << type_switch_hint(unknown);
    throw ConfigError(os.str());
  }

 private:
  // A key may be any YAML node (`? [a, b]`, `? {x: 1}`); ours are all plain strings.
  static std::string key_text(const YAML::Node& key) {
    return key.IsScalar() ? key.Scalar() : "<a non-scalar key>";
  }

  // After an override switched this map's `type` (policy.type=gru on a mamba1
  // config), the file's keys of the old type are the unknown ones: say which,
  // and how to drop them. "" when `type` came from the file.
  std::string type_switch_hint(const std::vector<YAML::Node>& unknown) const {
    const OverrideLog::Entry* sw = override_of("type");
    if (sw == nullptr || sw->path != key_path("type") || !node_["type"].IsScalar() ||
        sw->replaced == node_["type"].Scalar())  // set to what the file had: no switch
      return "";
    std::vector<std::string> old;  // set in the file, not by an override
    for (const YAML::Node& k : unknown)
      if (k.IsScalar() && override_of(k.Scalar()) == nullptr) old.push_back(k.Scalar());
    if (old.empty()) return "";
    const bool one = old.size() == 1;
    std::ostringstream os;
    os << "; " << key_path("type") << " was switched" << (sw->replaced.empty() ? "" : " from " + sw->replaced)
       << " by the override '" << sw->text << "': ";
    for (size_t i = 0; i < old.size(); ++i) os << (i ? ", " : "") << old[i];
    os << (one ? " is not a " : " are not ") << node_["type"].Scalar() << (one ? " key" : " keys")
       << "; drop " << (one ? "it" : "them") << " with";
    for (const std::string& k : old) os << " ~" << key_path(k);
    return os.str();
  }

  static std::string join(std::initializer_list<const char*> cs) {
    std::string s;
    for (const char* c : cs) s += (s.empty() ? "" : "|") + std::string(c);
    return s;
  }

  template <typename T>
  T convert(const std::string& key) const {
    const YAML::Node v = node_[key];
    if (!v.IsScalar()) fail(key, "expected a scalar value");
    try {
      return v.as<T>();
    } catch (const YAML::Exception&) {
      fail(key, "cannot read '" + v.Scalar() + "' as " + type_name<T>());
    }
  }

  template <typename T>
  static const char* type_name() {
    if constexpr (std::is_same_v<T, bool>) return "a boolean";
    else if constexpr (std::is_integral_v<T>) return "an integer";
    else if constexpr (std::is_floating_point_v<T>) return "a number";
    else return "a string";
  }

  YAML::Node node_;
  std::string file_;
  std::string path_;
  std::shared_ptr<const OverrideLog> overrides_;
};

// "" when `text` holds no control character other than tab and newline; else
// which one it is, for an error message.
inline std::string control_character_in(const std::string& text) {
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) {
      std::ostringstream os;
      os << "control character 0x" << std::hex << static_cast<int>(c)
         << " in a key or value (a stray carriage return? no setting takes control characters)";
      return os.str();
    }
  }
  return "";
}

// Refuses a YAML tree that is too deep or too big to walk: an alias inside
// its own anchor (`&a [*a]`) makes a cycle, and aliases of aliases multiply a
// few lines into billions of nodes. Every walk of the tree (copies, the
// resolved config written back, the checks) is only safe after this. Nodes
// are counted through aliases, as a walk would visit them.
// Also refuses control characters (other than tab and newline) in any key or
// value: no setting means one, and the resolved config stored in every
// checkpoint must read back as written; yaml-cpp writes a trailing carriage
// return unquoted, and reading it back drops it.
// And refuses a key given twice in one map: yaml-cpp keeps both, every lookup
// finds the first, and a second `algo:` section would be silently ignored.
// `path` names `n` in the messages (an override's key; "" for a whole file).
inline void check_yaml_bounds(const YAML::Node& n, const std::string& where, const std::string& path = "") {
  constexpr int kMaxDepth = 64;
  constexpr long kMaxNodes = 100000;
  long visited = 0;
  const auto check_text = [&](const YAML::Node& scalar, const std::string& path) {
    const std::string why = control_character_in(scalar.Scalar());
    if (why.empty()) return;
    throw ConfigError(located(where, scalar.Mark()) + ": " +
                      (path.empty() ? std::string("the top level") : path) + ": " + why);
  };
  const auto walk = [&](const auto& self, const YAML::Node& x, int depth, const std::string& path) -> void {
    if (depth > kMaxDepth)
      throw ConfigError(where + ": YAML nested deeper than " + std::to_string(kMaxDepth) +
                        " levels (an alias inside its own anchor?)");
    if (++visited > kMaxNodes)
      throw ConfigError(where + ": YAML expands to more than " + std::to_string(kMaxNodes) +
                        " nodes (aliases of aliases?)");
    if (x.IsScalar()) {
      check_text(x, path);
    } else if (x.IsSequence()) {
      size_t i = 0;
      for (const auto& item : x) self(self, item, depth + 1, path + "[" + std::to_string(i++) + "]");
    } else if (x.IsMap()) {
      std::unordered_map<std::string, YAML::Mark> seen;  // scalar key -> where it first appears
      for (const auto& kv : x) {
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "<a non-scalar key>";
        const std::string child = path.empty() ? key : path + "." + key;
        if (kv.first.IsScalar()) {
          const auto [first, fresh] = seen.emplace(key, kv.first.Mark());
          if (!fresh)
            throw ConfigError(located(where, kv.first.Mark()) + ": " + child + ": duplicate key, first at " +
                              located(where, first->second) + " (only one of them would be used)");
        }
        self(self, kv.first, depth + 1, child);
        self(self, kv.second, depth + 1, child);
      }
    }
  };
  walk(walk, n, 0, path);
}

// A copy of `n` whose nodes carry no source position: a value parsed from an
// override's text would otherwise claim line 1, column 1 of the config file.
inline YAML::Node without_marks(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar: {
      YAML::Node s(n.Scalar());
      s.SetTag(n.Tag());  // keeps "'3'" (tag "!") apart from "3" ("?")
      return s;
    }
    case YAML::NodeType::Sequence: {
      YAML::Node s(YAML::NodeType::Sequence);
      for (const auto& item : n) s.push_back(without_marks(item));
      return s;
    }
    case YAML::NodeType::Map: {
      YAML::Node m(YAML::NodeType::Map);
      for (const auto& kv : n) m[without_marks(kv.first)] = without_marks(kv.second);
      return m;
    }
    default:
      return YAML::Node(n.Type());
  }
}

// A command-line word that is an override ("a.b=3" or "~a.b") rather than a
// path or an option.
inline bool is_override(const std::string& word) {
  return word.find('=') != std::string::npos || (word.size() > 1 && word[0] == '~');
}

// Applies Hydra-style dotted overrides ("a.b.c=value") to a YAML tree, in
// order, creating maps on the way. The value is parsed as YAML, so `x=3` is an
// int, `x=true` a bool, `x=[1,2]` a sequence and `x='3'` a string. "~a.b.c"
// deletes that key, which must exist (Hydra's spelling): the way to drop the
// old type's keys after switching policy.type. Shared by the runner and the
// plugin so both see exactly the same config. `what` says where the overrides
// came from, for the error messages; `log` (optional) records which keys each
// override decided, for the messages of later checks (ConfigNode).
inline void apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides,
                            const std::string& what = "command line", OverrideLog* log = nullptr) {
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  for (const std::string& ov : overrides) {
    const std::string source = what + ": override '" + ov + "'";
    const auto bad = [&](const std::string& why) { throw ConfigError(source + ": " + why); };
    const bool deletion = !ov.empty() && ov[0] == '~';
    const size_t eq = ov.find('=');
    if (deletion && eq != std::string::npos) bad("a deletion takes no value (write ~key.path)");
    if (!deletion && eq == std::string::npos) bad("expected key.path=value or ~key.path (no '=')");
    const std::string key = deletion ? ov.substr(1) : ov.substr(0, eq);
    std::vector<std::string> parts;
    for (size_t begin = 0;;) {
      const size_t dot = key.find('.', begin);
      parts.push_back(key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
      if (parts.back().empty()) bad("empty key" + std::string(key.empty() ? "" : " component in '" + key + "'"));
      if (const std::string why = control_character_in(parts.back()); !why.empty()) bad(why);
      if (dot == std::string::npos) break;
      begin = dot + 1;
    }
    YAML::Node value;
    if (!deletion) {
      const std::string text = ov.substr(eq + 1);
      if (text.empty()) bad("no value after '=' (write key='' for an empty string)");
      try {
        const YAML::Node parsed = YAML::Load(text);
        check_yaml_bounds(parsed, source, key);
        value = without_marks(parsed);
      } catch (const YAML::Exception& e) {
        bad("cannot parse the value as YAML: " + e.msg);
      }
    }
    const auto missing = [&] { bad(key + " is not in the config (nothing to delete)"); };
    // YAML::Node's operator= writes through to the tree; reset() rebinds the
    // handle, which is what walking down needs.
    YAML::Node cur;
    cur.reset(root);
    std::string walked, replaced;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!cur.IsMap()) {
        if (deletion) missing();
        bad("'" + (walked.empty() ? std::string("the config") : walked) + "' is not a map");
      }
      const bool present = cur[parts[i]].IsDefined() && !cur[parts[i]].IsNull();
      if (i + 1 == parts.size()) {
        if (deletion) {
          if (!cur[parts[i]].IsDefined()) missing();
          cur.remove(parts[i]);
        } else {
          if (present && cur[parts[i]].IsScalar()) replaced = cur[parts[i]].Scalar();
          cur[parts[i]] = value;
        }
        break;
      }
      walked += (walked.empty() ? "" : ".") + parts[i];
      if (!present) {
        if (deletion) missing();
        cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      }
      YAML::Node next = cur[parts[i]];
      cur.reset(next);
    }
    if (log) log->record({key, source, ov, replaced});
  }
}

}  // namespace mambarl

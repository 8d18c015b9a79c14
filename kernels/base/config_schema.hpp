// A config section as one table of fields, so that each setting is written
// down once: its key, the struct member it fills, its range or choices and a
// one-line doc. The default is the member's initialiser (read from a
// default-constructed struct), never repeated here. From the table come the
// unknown-key check, the parsing with its checks (ConfigNode's messages:
// file:line:col or the override, and the key), the GPU kernels' limits, the
// resolved section written back into a run's config.yaml and a checkpoint,
// and the reference of `mambarl config --keys`.
//
// A row is one call: value() for a key with no range (bool, string, seed),
// number() for a range, choice() for a string from a list, list() for a list
// of strings, required() for a key without a default, optional() for one
// whose default is decided elsewhere. cuda_at_most() adds a GPU kernel's
// limit to a number row; nested() moves a sub-struct's rows into the struct
// that holds it. Checks that relate two keys stay as code after the table.
//
// Lives beside config_node.hpp, with the other base headers: the runner
// (tools/), the policy plugin (policy/, plugin/) and the envs all read their
// sections through it, and kernels/ includes nothing from those folders.
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "kernels/base/config_node.hpp"

namespace mambarl {

// One key as the reference shows it.
struct KeyDoc {
  std::string key;
  std::string type;          // integer | number | boolean | string | list of strings
  std::string default_text;  // as the config would spell it
  std::string range;         // "[lo, hi]", "a|b" (choices), or "" (any value of the type)
  std::string doc;
};

// The keys one value of a section's `type` (or several that take the same
// keys) adds to the section's own, for the reference.
struct TypeKeys {
  std::string types;  // "mamba3", or "autoencode, battleship, ..." for types sharing their keys
  std::vector<KeyDoc> keys;
};

// A section's keys, for the reference.
struct ConfigSection {
  std::string name;
  std::vector<KeyDoc> keys;     // every type's
  std::vector<TypeKeys> types;  // empty for a section without types
};

// A key whose default is another key's value (algo.bptt_len is
// algo.chunk_len unless set): that key's member and name. Its row comes after
// the one it copies, which the table reads first.
template <typename S, typename T>
struct SameAs {
  T S::*member = nullptr;
  const char* key = nullptr;
};
template <typename S, typename T>
SameAs<S, T> same_as(T S::*member, const char* key) {
  return {member, key};
}

template <typename S>
struct Field {
  Field(KeyDoc d, std::function<void(const ConfigNode&, S&)> r, std::function<void(const S&, YAML::Node&)> w)
      : doc(std::move(d)), read(std::move(r)), write(std::move(w)) {}

  KeyDoc doc;
  std::function<void(const ConfigNode&, S&)> read;  // an absent key leaves the default
  std::function<void(const S&, YAML::Node&)> write;
  std::function<double(const S&)> number;  // a number row's value, for cuda_at_most(); else empty
  // With runtime.device cuda: refuses a value the GPU kernels cannot hold (empty: no limit).
  std::function<void(const ConfigNode&, const S&)> check_cuda;
};

namespace schema_detail {

template <typename T>
std::string type_name() {
  if constexpr (std::is_same_v<T, bool>) return "boolean";
  else if constexpr (std::is_integral_v<T>) return "integer";
  else if constexpr (std::is_floating_point_v<T>) return "number";
  else return "string";
}

// The same spelling as ConfigNode's range messages.
template <typename T>
std::string text(const T& v) {
  std::ostringstream os;
  if constexpr (std::is_same_v<T, std::string>) os << (v.empty() ? "\"\"" : v);
  else os << std::boolalpha << v;
  return os.str();
}

template <typename S, typename T>
std::string default_text(T S::*member, SameAs<S, T> from) {
  return from.member ? "same as " + std::string(from.key) : text(S{}.*member);
}

// The read/write pair shared by every scalar row; `get` reads the key given the fallback.
template <typename S, typename T, typename Get>
Field<S> scalar(KeyDoc doc, T S::*member, SameAs<S, T> from, Get get) {
  const std::string key = doc.key;
  Field<S> f{std::move(doc),
             [=](const ConfigNode& n, S& s) { s.*member = get(n, key, from.member ? s.*from.member : s.*member); },
             [=](const S& s, YAML::Node& out) { out[key] = s.*member; }};
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
    f.number = [=](const S& s) { return static_cast<double>(s.*member); };
  return f;
}

}  // namespace schema_detail

// A key of any value of its type (a bool, a string, the seed).
template <typename S, typename T>
Field<S> value(const char* key, T S::*member, const char* doc) {
  return schema_detail::scalar<S, T>({key, schema_detail::type_name<T>(), schema_detail::text(S{}.*member), "", doc},
                                     member, {},
                                     [](const ConfigNode& n, const std::string& k, const T& fallback) {
                                       return n.get<T>(k, fallback);
                                     });
}

// A number in [lo, hi].
template <typename S, typename T>
Field<S> number(const char* key, T S::*member, T lo, T hi, const char* doc, SameAs<S, T> from = {}) {
  return schema_detail::scalar<S, T>(
      {key, schema_detail::type_name<T>(), schema_detail::default_text(member, from),
       "[" + schema_detail::text(lo) + ", " + schema_detail::text(hi) + "]", doc},
      member, from,
      [=](const ConfigNode& n, const std::string& k, const T& fallback) { return n.get_in<T>(k, fallback, lo, hi); });
}

// A string that must be one of `choices`.
template <typename S>
Field<S> choice(const char* key, std::string S::*member, std::vector<std::string> choices, const char* doc,
                SameAs<S, std::string> from = {}) {
  std::string range;
  for (const std::string& c : choices) range += (range.empty() ? "" : "|") + c;  // as in the error
  return schema_detail::scalar<S, std::string>(
      {key, "string", schema_detail::default_text(member, from), range, doc}, member, from,
      [=](const ConfigNode& n, const std::string& k, const std::string& fallback) {
        const std::string v = n.get<std::string>(k, fallback);
        if (std::find(choices.begin(), choices.end(), v) == choices.end())
          n.fail(k, "'" + v + "' is not one of " + range);  // ConfigNode::get_choice's words
        return v;
      });
}

// A list of non-empty strings; an empty one is left out of the resolved config.
template <typename S>
Field<S> list(const char* key, std::vector<std::string> S::*member, const char* doc) {
  const std::string k = key;
  return {{key, "list of strings", "[]", "", doc},
          [=](const ConfigNode& n, S& s) {
            if (!n.has(k)) return;
            const YAML::Node items = n.yaml()[k];
            if (!items.IsSequence()) n.fail(k, "expected a list of non-empty strings");
            for (const auto& item : items) {
              if (!item.IsScalar() || item.Scalar().empty()) n.fail(k, "expected a list of non-empty strings");
              (s.*member).push_back(item.Scalar());
            }
          },
          [=](const S& s, YAML::Node& out) {
            for (const std::string& item : s.*member) out[k].push_back(item);
          }};
}

// A key without a default: absent, it is an error.
template <typename S, typename T>
Field<S> required(const char* key, T S::*member, const char* doc) {
  const std::string k = key;
  return {{key, schema_detail::type_name<T>(), "none (required)", "", doc},
          [=](const ConfigNode& n, S& s) { s.*member = n.require<T>(k); },
          [=](const S& s, YAML::Node& out) { out[k] = s.*member; }};
}

// A key whose default someone else decides (`default_text` says who): absent,
// the member stays empty and is left out of the resolved config.
template <typename S, typename T>
Field<S> optional(const char* key, std::optional<T> S::*member, const char* default_text, const char* doc) {
  const std::string k = key;
  return {{key, schema_detail::type_name<T>(), default_text, "", doc},
          [=](const ConfigNode& n, S& s) {
            if (n.has(k)) s.*member = n.get<T>(k, T{});
          },
          [=](const S& s, YAML::Node& out) {
            if (s.*member) out[k] = *(s.*member);
          }};
}

// A number row whose value must also be at most `max` when runtime.device is
// cuda: a limit of the GPU kernels (`kernels`: where it is written down).
template <typename S>
Field<S> cuda_at_most(Field<S> f, long long max, const char* kernels) {
  MAMBARL_CHECK(f.number, "cuda_at_most(" << f.doc.key << "): not a number row");
  f.doc.range += "; cuda: at most " + std::to_string(max);
  const std::string key = f.doc.key, where = kernels;
  f.check_cuda = [key, where, max, value = f.number](const ConfigNode& n, const S& s) {
    const double v = value(s);
    if (v <= static_cast<double>(max)) return;
    std::ostringstream os;
    os << "value " << v << " is more than " << max << ", the most the GPU kernels hold (" << where
       << "); runtime.device is cuda";
    n.fail(key, os.str());
  };
  return f;
}

// A row of sub-struct `Inner` as a row of the struct `Outer` that holds it in `part`.
template <typename Outer, typename Inner>
Field<Outer> nested(Inner Outer::*part, Field<Inner> f) {
  Field<Outer> out{f.doc, [r = f.read, part](const ConfigNode& n, Outer& o) { r(n, o.*part); },
                   [w = f.write, part](const Outer& o, YAML::Node& y) { w(o.*part, y); }};
  if (f.number) out.number = [v = f.number, part](const Outer& o) { return v(o.*part); };
  if (f.check_cuda)
    out.check_cuda = [c = f.check_cuda, part](const ConfigNode& n, const Outer& o) { c(n, o.*part); };
  return out;
}
template <typename Outer, typename Inner>
std::vector<Field<Outer>> nested(Inner Outer::*part, const std::vector<Field<Inner>>& fields) {
  std::vector<Field<Outer>> out;
  for (const Field<Inner>& f : fields) out.push_back(nested(part, f));
  return out;
}

template <typename S>
class Schema {
 public:
  explicit Schema(std::vector<Field<S>> fields) : fields_(std::move(fields)) {
    for (const Field<S>& f : fields_) keys_.push_back(f.doc.key);
  }

  // The section's struct from `n` (an absent section gives every default):
  // unknown keys first, then each row in table order.
  S read(const ConfigNode& n) const {
    n.check_known(keys_);
    S s;
    fill(n, s);
    return s;
  }
  // Each row in table order into `s`, for a section whose known keys are
  // more than this table's (a `type`'s keys beside the shared ones): the
  // caller checks the unknown keys.
  void fill(const ConfigNode& n, S& s) const {
    for (const Field<S>& f : fields_) f.read(n, s);
  }
  // The GPU kernels' limits (cuda_at_most rows), for runtime.device cuda.
  void check_cuda(const ConfigNode& n, const S& s) const {
    for (const Field<S>& f : fields_)
      if (f.check_cuda) f.check_cuda(n, s);
  }

  // Every key with its value, in table order: the section of a run's config.yaml.
  YAML::Node write(const S& s) const {
    YAML::Node out(YAML::NodeType::Map);
    write(s, out);
    return out;
  }
  // The same, added to `out` (after the keys already there).
  void write(const S& s, YAML::Node& out) const {
    for (const Field<S>& f : fields_) f.write(s, out);
  }

  const std::vector<std::string>& keys() const { return keys_; }

  std::vector<KeyDoc> docs() const {
    std::vector<KeyDoc> d;
    for (const Field<S>& f : fields_) d.push_back(f.doc);
    return d;
  }

 private:
  std::vector<Field<S>> fields_;
  std::vector<std::string> keys_;
};

}  // namespace mambarl

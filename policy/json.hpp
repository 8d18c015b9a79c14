// A small strict JSON value, parser and compact writer: the subset safetensors headers use.
//
// Why our own: the project takes no third-party JSON dependency, and a checkpoint
// reader must treat its input as hostile. So the parser is strict RFC 8259 (no
// comments, trailing commas, NaN, leading zeros, lone surrogates or unescaped
// control characters; valid UTF-8 only; no duplicate object keys), bounds its
// recursion depth and its total number of values (memory), and names the byte
// offset of the first problem.
//
// Objects keep member order: safetensors writers list tensors in data order and
// our writer must reproduce a given order byte for byte. Numbers keep their
// source text so 64-bit data offsets survive exactly (a double rounds integers
// above 2^53).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mambarl {

struct JsonLimits {
  size_t max_depth = 64;  // nested arrays/objects: bounds the parser's recursion
  // Every value counts: a value costs ~120 bytes (plus vector slack) whatever its
  // text, so this caps a hostile document at ~60 MB. A safetensors tensor entry is
  // ~8 values, so the default still admits ~30k tensors.
  size_t max_values = size_t{1} << 18;
};

struct JsonMember;

class JsonValue {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  // Builders for the writer. Strings are UTF-8; dump() rejects invalid UTF-8.
  static JsonValue string(std::string utf8);
  static JsonValue number(uint64_t v);
  static JsonValue array();
  static JsonValue object();

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  // "null", "a bool", "a number", "a string", "an array", "an object": for error messages.
  const char* kind_phrase() const;

  // Each accessor throws mambarl::Error on a value of another kind.
  bool as_bool() const;
  const std::string& as_string() const;
  const std::string& number_text() const;  // the number exactly as written
  // The value when it is a number written as a non-negative integer literal
  // (no fraction, no exponent) that fits in 64 bits; nullopt for anything else.
  std::optional<uint64_t> as_uint64() const;
  double as_double() const;  // Number only; out-of-range literals give +-inf

  const std::vector<JsonValue>& items() const;        // Array
  const std::vector<JsonMember>& members() const;     // Object, in source order
  const JsonValue* find(std::string_view key) const;  // Object; nullptr if absent

  void push_back(JsonValue v);  // Array
  // Object; appends. Keys must be unique: the caller ensures it (dump() does not
  // check), so that building an n-member object stays O(n).
  void add(std::string key, JsonValue v);

  // Compact JSON (no whitespace), escaping only '"', '\\' and control characters,
  // the same bytes serde_json's to_string writes (the safetensors reference writer).
  std::string dump() const;

 private:
  friend class JsonParser;
  explicit JsonValue(Kind k) : kind_(k) {}
  void dump_to(std::string& out) const;

  Kind kind_ = Kind::Null;
  bool bool_ = false;
  std::string text_;                 // String contents or Number source text
  std::vector<JsonValue> items_;     // Array elements
  std::vector<JsonMember> members_;  // Object members
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

// Parses one JSON value; only JSON whitespace may follow it. Errors are
// mambarl::Error "<what> at byte <offset>: <problem>".
JsonValue parse_json(std::string_view text, const std::string& what, const JsonLimits& limits = {});

// Strict UTF-8: no overlong forms, no surrogates (U+D800..DFFF), nothing above U+10FFFF.
bool is_valid_utf8(std::string_view s);

// `s` as a JSON string literal, quotes included (s must be valid UTF-8).
std::string json_quote(std::string_view s);

}  // namespace mambarl

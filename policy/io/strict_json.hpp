// JSON that may come from a hostile file, read with nlohmann::json.
//
// nlohmann::json parses strict RFC 8259 (no comments, trailing commas, NaN,
// leading zeros, lone surrogates, raw control characters or ill-formed UTF-8)
// and keeps 64-bit integers exact, but on its own it accepts duplicate object
// keys (the last one wins), nests as deep as memory allows and stops at a NUL
// byte as if the text ended there. A checkpoint reader must refuse all three:
// a duplicate tensor name would read as a different file than other readers
// see, and depth and value count bound the memory a header can claim. So every
// parse of outside JSON goes through parse_json() below.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace mambarl {

struct JsonLimits {
  size_t max_depth = 64;  // nested arrays/objects
  // Every value counts, containers included. nlohmann holds a value in ~100
  // bytes with its map or vector node, so this caps a hostile document near
  // 30 MB; a safetensors tensor entry is ~8 values: ~30k tensors fit.
  size_t max_values = size_t{1} << 18;
};

// One JSON document, all of `text`. Errors are mambarl::UserError "<what>: <problem>",
// e.g. "x.safetensors: header JSON: duplicate key \"w\"". `root_keys`, when given,
// receives the root object's keys in document order (nlohmann::json keeps an
// object's keys sorted).
nlohmann::json parse_json(std::string_view text, const std::string& what, const JsonLimits& limits = {},
                          std::vector<std::string>* root_keys = nullptr);

// Compact JSON (no whitespace; only '"', '\\' and control characters escaped):
// the bytes serde_json's to_string writes, the safetensors reference writer.
// A string that is not valid UTF-8 is an error "<what>: ... not valid UTF-8".
std::string dump_json(const nlohmann::json& v, const std::string& what);

// `s` as a JSON string literal for an error message (ill-formed UTF-8 shown as U+FFFD).
std::string json_quote(std::string_view s);

// "null", "a bool", "a number", "a string", "an array", "an object": for error messages.
const char* kind_phrase(const nlohmann::json& v);

// An object whose values are all strings (checkpoint metadata crossing the
// plugin ABI). Errors start with `what`.
std::map<std::string, std::string> parse_string_map(std::string_view text, const std::string& what);

}  // namespace mambarl

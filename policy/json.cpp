#include "policy/json.hpp"

#include <algorithm>
#include <numeric>

#include "kernels/check.hpp"

namespace mambarl {

namespace {

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 if there is none.
// Follows the Unicode table of well-formed byte sequences (Table 3-7): the narrowed
// second-byte ranges after E0, ED, F0 and F4 exclude overlong forms, surrogates and
// code points above U+10FFFF.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t len = 0;
  unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() - i < len) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return len;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

void append_quoted(std::string& out, std::string_view s) {
  MAMBARL_CHECK(is_valid_utf8(s), "JSON writer: string is not valid UTF-8");
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string json_quote(std::string_view s) {
  std::string out;
  append_quoted(out, s);
  return out;
}

// ---- JsonValue ------------------------------------------------------------------

JsonValue JsonValue::string(std::string utf8) {
  JsonValue v(Kind::String);
  v.text_ = std::move(utf8);
  return v;
}

JsonValue JsonValue::number(uint64_t x) {
  JsonValue v(Kind::Number);
  v.text_ = std::to_string(x);
  return v;
}

JsonValue JsonValue::array() { return JsonValue(Kind::Array); }
JsonValue JsonValue::object() { return JsonValue(Kind::Object); }

namespace {
const char* kind_phrase_of(JsonValue::Kind k) {
  using Kind = JsonValue::Kind;
  switch (k) {
    case Kind::Null: return "null";
    case Kind::Bool: return "a bool";
    case Kind::Number: return "a number";
    case Kind::String: return "a string";
    case Kind::Array: return "an array";
    case Kind::Object: return "an object";
  }
  return "?";
}
}  // namespace

const char* JsonValue::kind_phrase() const { return kind_phrase_of(kind_); }

#define MAMBARL_JSON_EXPECT(k) \
  MAMBARL_CHECK(kind_ == Kind::k, "JSON value is " << kind_phrase() << ", not " << kind_phrase_of(Kind::k))

bool JsonValue::as_bool() const {
  MAMBARL_JSON_EXPECT(Bool);
  return bool_;
}

const std::string& JsonValue::as_string() const {
  MAMBARL_JSON_EXPECT(String);
  return text_;
}

const std::string& JsonValue::number_text() const {
  MAMBARL_JSON_EXPECT(Number);
  return text_;
}

std::optional<uint64_t> JsonValue::as_uint64() const {
  if (kind_ != Kind::Number) return std::nullopt;
  uint64_t v = 0;
  for (char c : text_) {
    if (c < '0' || c > '9') return std::nullopt;  // '-', '.', 'e': not a non-negative integer literal
    const auto digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return v;
}

const std::vector<JsonValue>& JsonValue::items() const {
  MAMBARL_JSON_EXPECT(Array);
  return items_;
}

const std::vector<JsonMember>& JsonValue::members() const {
  MAMBARL_JSON_EXPECT(Object);
  return members_;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  MAMBARL_JSON_EXPECT(Object);
  for (const auto& m : members_)
    if (m.key == key) return &m.value;
  return nullptr;
}

void JsonValue::push_back(JsonValue v) {
  MAMBARL_JSON_EXPECT(Array);
  items_.push_back(std::move(v));
}

void JsonValue::add(std::string key, JsonValue v) {
  MAMBARL_JSON_EXPECT(Object);
  members_.push_back(JsonMember{std::move(key), std::move(v)});
}

#undef MAMBARL_JSON_EXPECT

std::string JsonValue::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

void JsonValue::dump_to(std::string& out) const {
  switch (kind_) {
    case Kind::Null: out += "null"; break;
    case Kind::Bool: out += bool_ ? "true" : "false"; break;
    case Kind::Number: out += text_; break;
    case Kind::String: append_quoted(out, text_); break;
    case Kind::Array:
      out += '[';
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i) out += ',';
        items_[i].dump_to(out);
      }
      out += ']';
      break;
    case Kind::Object:
      out += '{';
      for (size_t i = 0; i < members_.size(); ++i) {
        if (i) out += ',';
        append_quoted(out, members_[i].key);
        out += ':';
        members_[i].value.dump_to(out);
      }
      out += '}';
      break;
  }
}

// ---- parser ---------------------------------------------------------------------

class JsonParser {
 public:
  JsonParser(std::string_view text, const std::string& what, const JsonLimits& limits)
      : text_(text), what_(what), limits_(limits) {}

  JsonValue parse_document() {
    skip_ws();
    JsonValue v = parse_value(0);
    skip_ws();
    if (pos_ != text_.size()) fail("unexpected " + describe_here() + " after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    MAMBARL_FAIL(what_ << " at byte " << pos_ << ": " << msg);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  unsigned char peek() const { return static_cast<unsigned char>(text_[pos_]); }

  std::string describe_here() const {
    if (at_end()) return "end of text";
    const unsigned char c = peek();
    if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    static const char kHex[] = "0123456789ABCDEF";
    return std::string("byte 0x") + kHex[c >> 4] + kHex[c & 0xF];
  }

  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  void expect(char c, const char* context) {
    if (at_end() || peek() != static_cast<unsigned char>(c))
      fail(std::string("expected '") + c + "' " + context + ", found " + describe_here());
    ++pos_;
  }

  JsonValue parse_value(size_t depth) {
    if (++values_ > limits_.max_values) fail("more than " + std::to_string(limits_.max_values) + " values");
    if (at_end()) fail("unexpected end of text, expected a value");
    switch (peek()) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': {
        JsonValue v(JsonValue::Kind::String);
        v.text_ = parse_string();
        return v;
      }
      case 't': return parse_literal("true", JsonValue::Kind::Bool, true);
      case 'f': return parse_literal("false", JsonValue::Kind::Bool, false);
      case 'n': return parse_literal("null", JsonValue::Kind::Null, false);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail("unexpected " + describe_here() + ", expected a value");
    }
  }

  void enter(size_t depth) {
    if (depth > limits_.max_depth)
      fail("nesting deeper than " + std::to_string(limits_.max_depth) + " levels");
  }

  JsonValue parse_object(size_t depth) {
    enter(depth);
    JsonValue obj(JsonValue::Kind::Object);
    std::vector<size_t> key_pos;  // byte offset of each key, to point at a duplicate
    ++pos_;                       // '{'
    skip_ws();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return obj;
    }
    for (;;) {
      if (at_end() || peek() != '"') fail("expected a string key, found " + describe_here());
      key_pos.push_back(pos_);
      std::string key = parse_string();
      skip_ws();
      expect(':', "after an object key");
      skip_ws();
      obj.members_.push_back(JsonMember{std::move(key), parse_value(depth)});
      skip_ws();
      if (!at_end() && peek() == ',') {
        ++pos_;
        skip_ws();
        continue;
      }
      expect('}', "or ',' in an object");
      break;
    }
    reject_duplicate_keys(obj.members_, key_pos);
    return obj;
  }

  // Sorting indices keeps this O(n log n): a linear scan per key would let a
  // hostile header with a million keys take hours.
  void reject_duplicate_keys(const std::vector<JsonMember>& members, const std::vector<size_t>& key_pos) {
    std::vector<size_t> order(members.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return members[a].key != members[b].key ? members[a].key < members[b].key : a < b;
    });
    for (size_t i = 1; i < order.size(); ++i) {
      if (members[order[i]].key == members[order[i - 1]].key) {
        pos_ = key_pos[order[i]];
        fail("duplicate key " + json_quote(members[order[i]].key));
      }
    }
  }

  JsonValue parse_array(size_t depth) {
    enter(depth);
    JsonValue arr(JsonValue::Kind::Array);
    ++pos_;  // '['
    skip_ws();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return arr;
    }
    for (;;) {
      arr.items_.push_back(parse_value(depth));
      skip_ws();
      if (!at_end() && peek() == ',') {
        ++pos_;
        skip_ws();
        continue;
      }
      expect(']', "or ',' in an array");
      break;
    }
    return arr;
  }

  JsonValue parse_literal(std::string_view word, JsonValue::Kind kind, bool b) {
    if (text_.substr(pos_, word.size()) != word)
      fail("invalid literal, expected '" + std::string(word) + "'");
    pos_ += word.size();
    JsonValue v(kind);
    v.bool_ = b;
    return v;
  }

  bool digit_here() const { return !at_end() && peek() >= '0' && peek() <= '9'; }

  void digits(const char* context) {
    if (!digit_here()) fail(std::string("expected a digit ") + context + ", found " + describe_here());
    while (digit_here()) ++pos_;
  }

  // RFC 8259: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  JsonValue parse_number() {
    const size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (!at_end() && peek() == '0') {
      ++pos_;
      if (digit_here()) fail("number has a leading zero");
    } else {
      digits("in a number");
    }
    if (!at_end() && peek() == '.') {
      ++pos_;
      digits("after '.'");
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      digits("in an exponent");
    }
    JsonValue v(JsonValue::Kind::Number);
    v.text_ = std::string(text_.substr(start, pos_ - start));
    return v;
  }

  uint32_t parse_hex4() {
    uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      if (at_end()) fail("unterminated \\u escape");
      const unsigned char c = peek();
      uint32_t d = 0;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        fail("expected a hex digit in a \\u escape, found " + describe_here());
      cp = cp * 16 + d;
      ++pos_;
    }
    return cp;
  }

  // After the "\u": one escape, or a UTF-16 surrogate pair spelled as two.
  uint32_t parse_unicode_escape() {
    const size_t start = pos_ - 2;
    uint32_t cp = parse_hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) {
      pos_ = start;
      fail("lone low surrogate in a \\u escape");
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (text_.substr(pos_, 2) != "\\u") {
        pos_ = start;
        fail("high surrogate not followed by a \\u low surrogate");
      }
      pos_ += 2;
      const uint32_t lo = parse_hex4();
      if (lo < 0xDC00 || lo > 0xDFFF) {
        pos_ = start;
        fail("high surrogate not followed by a low surrogate");
      }
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    return cp;
  }

  std::string parse_string() {
    std::string out;
    ++pos_;  // opening quote
    for (;;) {
      if (at_end()) fail("unterminated string");
      const unsigned char c = peek();
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c == '\\') {
        ++pos_;
        if (at_end()) fail("unterminated escape");
        const char e = static_cast<char>(peek());
        ++pos_;
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': append_utf8(out, parse_unicode_escape()); break;
          default: --pos_; fail("invalid escape \\" + describe_here());
        }
      } else if (c < 0x20) {
        fail("unescaped control character (" + describe_here() + ") in a string");
      } else {
        const size_t n = utf8_sequence_length(text_, pos_);
        if (n == 0) fail("invalid UTF-8 (" + describe_here() + ") in a string");
        out.append(text_.substr(pos_, n));
        pos_ += n;
      }
    }
  }

  std::string_view text_;
  const std::string& what_;
  const JsonLimits& limits_;
  size_t pos_ = 0;
  size_t values_ = 0;
};

JsonValue parse_json(std::string_view text, const std::string& what, const JsonLimits& limits) {
  return JsonParser(text, what, limits).parse_document();
}

}  // namespace mambarl

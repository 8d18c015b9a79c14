#include "policy/io/strict_json.hpp"

#include <set>

#include "kernels/base/check.hpp"

namespace mambarl {

using nlohmann::json;

namespace {

// nlohmann's message for a user: without its "[json.exception.parse_error.101] "
// tag, and without the bytes of the token it stopped in ("; last read: '...'"),
// which may be megabytes long or not UTF-8; the line and column say where.
std::string plain_message(const json::exception& e) {
  std::string m = e.what();
  const size_t tag_end = m.find("] ");
  if (m.rfind("[json.exception.", 0) == 0 && tag_end != std::string::npos) m.erase(0, tag_end + 2);
  const size_t last_read = m.find("; last read: '");
  if (last_read != std::string::npos) {
    const size_t expected = m.find("'; expected ", last_read);
    m.erase(last_read, expected == std::string::npos ? std::string::npos : expected + 1 - last_read);
  }
  return m;
}

}  // namespace

json parse_json(std::string_view text, const std::string& what, const JsonLimits& limits,
                std::vector<std::string>* root_keys) {
  // nlohmann takes a NUL byte for the end of the text, so "{}\0junk" would pass.
  const size_t nul = text.find('\0');
  MAMBARL_USER_CHECK(nul == std::string_view::npos,
                     what << ": a NUL byte at byte " << nul << " (JSON text has none outside escapes)");
  if (root_keys) root_keys->clear();
  size_t values = 0;
  std::vector<std::set<std::string>> open_objects;  // the keys read so far in each object being read
  // Called by the parser at every event; `depth` counts the containers already open.
  const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
    using Event = json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        MAMBARL_USER_CHECK(static_cast<size_t>(depth) < limits.max_depth,
                           what << ": nesting deeper than " << limits.max_depth << " levels");
        if (event == Event::object_start) open_objects.emplace_back();
        [[fallthrough]];
      case Event::value:
        MAMBARL_USER_CHECK(++values <= limits.max_values, what << ": more than " << limits.max_values << " values");
        break;
      case Event::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        MAMBARL_USER_CHECK(open_objects.back().insert(key).second, what << ": duplicate key " << json_quote(key));
        if (root_keys && depth == 1) root_keys->push_back(key);
        break;
      }
      case Event::object_end: open_objects.pop_back(); break;
      case Event::array_end: break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), check);
  } catch (const json::exception& e) {  // syntax, UTF-8, a number out of double's range
    throw UserError(what + ": " + plain_message(e));
  }
}

std::string dump_json(const json& v, const std::string& what) {
  try {
    return v.dump();
  } catch (const json::type_error& e) {  // the only one dump() throws: ill-formed UTF-8
    throw Error(what + ": not valid UTF-8 (" + plain_message(e) + ")");
  }
}

std::string json_quote(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

const char* kind_phrase(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a bool";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "a number";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::binary:
    case json::value_t::discarded: break;  // not made by the parser
  }
  return "an unexpected value";
}

std::map<std::string, std::string> parse_string_map(std::string_view text, const std::string& what) {
  const json v = parse_json(text, what);
  MAMBARL_USER_CHECK(v.is_object(), what << " is " << kind_phrase(v) << ", expected an object");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : v.items()) {
    MAMBARL_USER_CHECK(value.is_string(),
                       what << " '" << key << "' is " << kind_phrase(value) << ", expected a string");
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

}  // namespace mambarl

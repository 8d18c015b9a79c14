// Typed values of command-line options, so that a bad value is reported as
// the option, the text given and what was expected (exit status 2) instead of
// a library's parse message such as "stoi".
#pragma once

#include <charconv>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace mambarl {

// A command line the command cannot run with; main() prints it after the
// command's name and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `text` as a whole number >= min, all of it (no sign for unsigned T, no
// fraction, no trailing characters), in T's range.
template <typename T>
T parse_whole_number(const std::string& option, const std::string& text, T min) {
  static_assert(std::is_integral_v<T>, "whole numbers only");
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min)
    throw UsageError(option + " '" + text + "': expected a whole number >= " + std::to_string(min));
  return value;
}

}  // namespace mambarl

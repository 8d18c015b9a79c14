// What the command lines of mambarl and the standalone benches share on top
// of CLI11: value checks whose errors name the option, the text given and what
// was expected, and one exit status for every usage error.
//
// Why our own checks: CLI11's integer conversion reads "010" as octal and
// "-1" as 2^64-1 for an unsigned option, and its Range() error names neither
// the option's meaning nor the accepted form.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

namespace mambarl {

// For ->transform(): a whole number in [min, max], in decimal with nothing
// else ("2.5", "5x" and, for min 0, "-1" are refused). CLI11 then converts the
// number rewritten in plain decimal, so it reads exactly what was checked.
// (No description: CLI11 would append it to the type in every message; the
// option's help says the range.)
template <typename T>
CLI::Validator whole_number(T min, T max = std::numeric_limits<T>::max()) {
  static_assert(std::is_integral_v<T>, "whole numbers only");
  const std::string range = "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  // ">= 1" says it all unless the bound is the type's, which only a number past it meets.
  const std::string at_least = max == std::numeric_limits<T>::max() ? ">= " + std::to_string(min) : range;
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        T value{};
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc::result_out_of_range && ptr == end && text[0] != '-')
          return "expected a whole number " + range + ", got '" + text + "'";
        if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max)
          return "expected a whole number " + at_least + ", got '" + text + "'";
        text = std::to_string(value);
        return {};
      },
      "");
}

// For ->check(): a finite number > 0, all of the text ("5x", "inf" are refused).
inline CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc() || ptr != end || !(value > 0) || !std::isfinite(value))
          return "expected a number > 0, got '" + text + "'";
        return {};
      },
      "");
}

// Parses argv into `app`. Returns the exit status when the program is to stop
// now: 0 after printing --help, 2 after a usage error, printed on stderr as
// "<program> <subcommand...>: <what is wrong>" and where to read the options.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {  // --help
      app.exit(e);
      return 0;
    }
    // The subcommand whose arguments were being read when the error came.
    std::string command = app.get_name();
    const CLI::App* sub = &app;
    while (!sub->get_subcommands().empty()) {
      sub = sub->get_subcommands().back();
      command += " " + sub->get_name();
    }
    // CLI11 reports a missing subcommand before a word it did not know:
    // `mambarl trian` would read "A subcommand is required".
    const std::vector<std::string> unknown = sub->remaining();
    const bool has_subcommands = !sub->get_subcommands(nullptr).empty();
    std::cerr << command << ": "
              << (has_subcommands && !unknown.empty() ? "unknown command '" + unknown.front() + "'" : e.what()) << "\n"
              << "(" << command << " --help lists the options)" << std::endl;
    return 2;
  }
}

}  // namespace mambarl

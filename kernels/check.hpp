// Error checks shared by every layer of mambarl (header-only, no CUDA).
//
// MAMBARL_CHECK throws mambarl::Error carrying file, line, the failed expression
// and a streamed message, so a bad config or shape surfaces as one readable line
// instead of a crash. It always evaluates its condition (never compiled out), so
// it may guard user input. Nothing with a side effect belongs inside assert().
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace mambarl {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] inline void throw_check_failure(const char* file, int line, const char* expr,
                                             const std::string& msg) {
  std::ostringstream os;
  os << msg << " [" << expr << " failed at " << file << ":" << line << "]";
  throw Error(os.str());
}
}  // namespace detail

}  // namespace mambarl

// MAMBARL_CHECK(cond, "d_model must be positive, got " << d);
#define MAMBARL_CHECK(cond, stream_msg)                                                \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::ostringstream mambarl_check_os_;                                           \
      mambarl_check_os_ << stream_msg;                                                \
      ::mambarl::detail::throw_check_failure(__FILE__, __LINE__, #cond,               \
                                             mambarl_check_os_.str());                \
    }                                                                                 \
  } while (0)

// MAMBARL_FAIL("unknown env type '" << t << "'");
#define MAMBARL_FAIL(stream_msg) MAMBARL_CHECK(false, stream_msg)

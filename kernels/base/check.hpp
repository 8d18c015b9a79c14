// Error checks shared by every layer of mambarl (header-only, no CUDA).
//
// MAMBARL_CHECK throws mambarl::Error carrying file, line, the failed expression
// and a streamed message, so a bad config or shape surfaces as one readable line
// instead of a crash. It always evaluates its condition (never compiled out), so
// it may guard user input. Nothing with a side effect belongs inside assert().
//
// MAMBARL_USER_CHECK throws a UserError carrying the message alone: for the
// mistakes a user makes on the command line (a missing checkpoint, a config
// that is a directory), where "[fd.ok() failed at .../safetensors.cpp:336]"
// would only hide the one line that says what to do. Its message must then
// say everything itself: the path or key, and what is wrong with it.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace mambarl {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An Error whose message is complete for the user: no internal check text.
class UserError : public Error {
 public:
  using Error::Error;
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

// MAMBARL_USER_CHECK(fs::exists(p), "no checkpoint to resume: " << p << " does not exist");
#define MAMBARL_USER_CHECK(cond, stream_msg)                                           \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::ostringstream mambarl_check_os_;                                           \
      mambarl_check_os_ << stream_msg;                                                \
      throw ::mambarl::UserError(mambarl_check_os_.str());                            \
    }                                                                                 \
  } while (0)

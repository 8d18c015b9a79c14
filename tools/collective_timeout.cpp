#include "tools/collective_timeout.hpp"

#include <sstream>

#include "kernels/base/check.hpp"

namespace mambarl {

CollectiveTimeout::CollectiveTimeout(double seconds) : seconds_(seconds) {
  MAMBARL_CHECK(seconds > 0, "runtime.collective_timeout_s: " << seconds << " s must be positive");
}

std::string CollectiveTimeout::why(const std::string& what, const char* transport) const {
  std::ostringstream s;
  s << "spent more than " << seconds_ << " s (runtime.collective_timeout_s) in " << what << " (" << transport
    << "), waiting for the other ranks: one of them died or hangs";
  return s.str();
}

}  // namespace mambarl

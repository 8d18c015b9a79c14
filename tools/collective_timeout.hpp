// runtime.collective_timeout_s, one rule for both transports across
// data-parallel ranks: MPI's host collectives (tools/mpi_ranks.cpp) and the
// GPU learner's NCCL sums (tools/nccl_collective.cpp). Work that needs every
// rank waits for the slowest; a rank that has spent longer than the timeout
// in it decides another rank died or hangs (it cannot tell which: that rank
// is silent) and ends the job with why() rather than wait forever.
#pragma once

#include <chrono>
#include <limits>
#include <string>

namespace mambarl {

class CollectiveTimeout {
 public:
  using Clock = std::chrono::steady_clock;

  // No bound: what ranks wait with until the run has read its config.
  CollectiveTimeout() = default;
  // Throws unless seconds > 0 (the config key's range says so).
  explicit CollectiveTimeout(double seconds);

  double seconds() const { return seconds_; }
  // Whether work that began at `since` has run out of time at `now`.
  bool passed(Clock::time_point since, Clock::time_point now) const {
    return std::chrono::duration<double>(now - since).count() > seconds_;
  }
  // Why this rank gives up on `what` (the work, e.g. "the update's gradient
  // sum") over `transport` ("MPI", "NCCL"): names the key and the timeout.
  std::string why(const std::string& what, const char* transport) const;

 private:
  double seconds_ = std::numeric_limits<double>::infinity();
};

}  // namespace mambarl

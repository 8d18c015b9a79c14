// SIGINT / SIGTERM as a request to stop a training run cleanly. The handlers
// only store the signal number in a lock-free atomic (async-signal-safe); the
// trainer loop reads it between updates, finishes the update in flight, and
// ends the run as at its budget (checkpoint, metrics, curve). A second signal
// while the first is being honoured exits at once with 128 + signal (130 for
// SIGINT): the last checkpoint on disk is whole, since checkpoints are
// replaced atomically (policy/io/posix_file.hpp). One that comes within
// kRepeatWindowMs of the first is the same request delivered twice (a job
// scheduler signals each process of the job, a sweep its runs too) and is
// ignored.
#pragma once

namespace mambarl {

inline constexpr long long kRepeatWindowMs = 500;

// The first SIGINT or SIGTERM received while a StopOnSignals was alive; 0 if none.
int stop_signal();

// "SIGINT", "SIGTERM" or "signal <n>", for messages.
const char* signal_name(int sig);

// Installs the handlers (sigaction) for its lifetime and restores the previous
// ones after; one at a time per process. `mambarl train` holds one around the
// run; a library caller (the tests) that holds none never stops on a signal.
class StopOnSignals {
 public:
  StopOnSignals();
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
};

}  // namespace mambarl

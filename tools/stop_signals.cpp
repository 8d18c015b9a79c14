#include "tools/stop_signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <cstring>

#include "kernels/base/check.hpp"

namespace mambarl {

namespace {

std::atomic<int> g_stop{0};
std::atomic<long long> g_first_ns{0};  // CLOCK_MONOTONIC time of the first signal
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<long long>::is_always_lock_free,
              "a signal handler may only touch lock-free atomics");

long long monotonic_ns() {  // clock_gettime is async-signal-safe
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

struct sigaction g_old_int, g_old_term;
bool g_installed = false;

void on_signal(int sig) {
  int none = 0;
  if (g_stop.compare_exchange_strong(none, sig)) {  // first: the loop stops after this update
    g_first_ns.store(monotonic_ns());
    return;
  }
  // The same request delivered twice: a job scheduler signals every process of
  // the job, and `mambarl sweep` passes it on to its runs as well.
  if (monotonic_ns() - g_first_ns.load() < kRepeatWindowMs * 1000000LL) return;
  // Second: exit now. write() and _exit() are async-signal-safe; the message is a literal.
  static const char msg[] = "\nmambarl: second signal: exiting now; the last checkpoint written is intact\n";
  const ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
  (void)ignored;
  ::_exit(128 + sig);
}

}  // namespace

int stop_signal() { return g_stop.load(std::memory_order_relaxed); }

const char* signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "a signal";
}

StopOnSignals::StopOnSignals() {
  MAMBARL_CHECK(!g_installed, "StopOnSignals: already installed in this process");
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: a read or write the signal lands in resumes instead of failing with EINTR.
  sa.sa_flags = SA_RESTART;
  MAMBARL_CHECK(::sigaction(SIGINT, &sa, &g_old_int) == 0 && ::sigaction(SIGTERM, &sa, &g_old_term) == 0,
                "sigaction: " << std::strerror(errno));
  g_stop = 0;
  g_first_ns = 0;
  g_installed = true;
}

StopOnSignals::~StopOnSignals() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  g_installed = false;
}

}  // namespace mambarl

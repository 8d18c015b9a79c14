// Running `mambarl` as a child process, for the tests that kill it or wait for
// it to fail: spawn with extra environment variables and output to a file,
// wait with a deadline, SIGKILL.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace mambarl::test {

// Starts `argv` with `env` (NAME=value) added to ours; stdout and stderr go to `log_path`.
inline pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                   const std::string& log_path) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;  // parent (or -1: the caller checks)
  for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
  std::FILE* log = std::fopen(log_path.c_str(), "w");
  if (log == nullptr) ::_exit(126);
  ::dup2(::fileno(log), 1);
  ::dup2(::fileno(log), 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

// The raw wait status once `pid` has exited, or nullopt if it is still running at the deadline.
inline std::optional<int> wait_for(pid_t pid, std::chrono::duration<double> limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 || std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

inline int kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace mambarl::test

// Running `mambarl` as a child process, for the tests that kill it or wait for
// it to fail: spawn with extra environment variables and output to a file,
// wait with a deadline, SIGKILL.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
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

// What a child that ran to its end left: its exit code (-1 when a signal
// ended it) and its output (stdout and stderr).
struct Ran {
  int exit_code = -1;
  std::string out;
};

// Runs `argv` to its end with its output in `log_path`; a child still
// running after `limit` is killed and fails the test case.
inline Ran run_to_end(const std::vector<std::string>& argv, const std::string& log_path,
                      std::chrono::seconds limit = std::chrono::seconds(300)) {
  const pid_t pid = spawn(argv, {}, log_path);
  BOOST_REQUIRE_GT(pid, 0);
  const std::optional<int> status = wait_for(pid, limit);
  if (!status) kill_and_reap(pid);
  BOOST_REQUIRE_MESSAGE(status, argv[0] << " still running after " << limit.count() << " s:\n"
                                        << read_text(log_path));
  return Ran{WIFEXITED(*status) ? WEXITSTATUS(*status) : -1, read_text(log_path)};
}

}  // namespace mambarl::test

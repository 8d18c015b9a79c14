#include "policy/io/posix_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <thread>

#include "kernels/base/check.hpp"

namespace mambarl {

namespace {

// Removes the temp file unless the rename consumed it, so every failure path
// cleans up, exceptions included.
class TempFileGuard {
 public:
  explicit TempFileGuard(std::string path) : path_(std::move(path)) {}
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  ~TempFileGuard() {
    if (armed_) ::unlink(path_.c_str());
  }
  void disarm() { armed_ = false; }

 private:
  std::string path_;
  bool armed_ = true;
};

void fsync_directory_of(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  // After the rename the new file is already in place; only its durability across a
  // power loss is in doubt, so say exactly that.
  MAMBARL_CHECK(fd.ok() && ::fsync(fd.get()) == 0, path << ": written, but syncing directory " << dir
                                                        << " failed (" << errno_message()
                                                        << "): the rename may not survive a crash");
}

// MAMBARL_TEST_ATOMIC_WRITE_PAUSE_MS (see the header), read once.
void test_pause() {
  static const int ms = [] {
    const char* v = std::getenv("MAMBARL_TEST_ATOMIC_WRITE_PAUSE_MS");
    return v ? std::atoi(v) : 0;
  }();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace

std::string errno_message() { return std::generic_category().message(errno); }

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

int UniqueFd::close() {
  const int rc = ::close(fd_);
  fd_ = -1;
  return rc;
}

void write_all(int fd, const void* src, size_t n, const std::string& path) {
  const auto* p = static_cast<const char*>(src);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min(n, kMaxIoChunk));
    if (w < 0 && errno == EINTR) continue;
    MAMBARL_CHECK(w > 0, path << ": write failed: " << (w < 0 ? errno_message() : "wrote nothing"));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void write_file_atomically(const std::string& path, const std::function<void(int fd)>& body) {
  // The pid keeps concurrent writers of the same file in different processes
  // apart. O_TRUNC rather than O_EXCL: a temp left by a crashed run whose pid we
  // reuse (routine in containers) is ours to overwrite, not a reason to fail.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  TempFileGuard guard(tmp);
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    MAMBARL_CHECK(fd.ok(), path << ": cannot create temp file " << tmp << ": " << errno_message());
    test_pause();
    body(fd.get());
    test_pause();
    MAMBARL_CHECK(::fsync(fd.get()) == 0, path << ": fsync of " << tmp << " failed: " << errno_message());
    // close() can report a deferred write error (NFS, quota), so it is checked too.
    MAMBARL_CHECK(fd.close() == 0, path << ": close of " << tmp << " failed: " << errno_message());
  }
  MAMBARL_CHECK(::rename(tmp.c_str(), path.c_str()) == 0,
                path << ": cannot rename " << tmp << " over it: " << errno_message());
  guard.disarm();
  fsync_directory_of(path);
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  write_file_atomically(path, [&](int fd) { write_all(fd, contents.data(), contents.size(), path); });
}

int remove_stale_temp_files(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || at + 5 == name.size()) continue;
    const std::string digits = name.substr(at + 5);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const auto pid = static_cast<pid_t>(std::stol(digits));
    // kill(pid, 0) probes without signalling; ESRCH: no such process, so nobody is writing it.
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (std::filesystem::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace mambarl

// POSIX file helpers shared by every writer of run artefacts (checkpoints,
// metrics, curves, resolved configs): an owned descriptor, full writes, and
// all-or-nothing replacement of a file.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace mambarl {

// One read()/write() moves at most this much (Linux caps a call near 2 GiB anyway).
constexpr size_t kMaxIoChunk = size_t{1} << 30;

std::string errno_message();  // strerror of the current errno

// Owns a file descriptor; close() reports the error that a destructor would have to drop.
class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  int close();

 private:
  int fd_;
};

// Writes all n bytes (retrying short writes and EINTR); errors name `path`.
void write_all(int fd, const void* src, size_t n, const std::string& path);

// Replaces `path` atomically: body(fd) writes the new contents into
// `path`.tmp.<pid> in the same directory, which is fsynced, closed (checked)
// and renamed over `path`; then the directory is fsynced. On any failure
// (exceptions from body included) the temp file is removed and whatever was
// at `path` is untouched. Two threads of one process must not write the same
// path at once: they would share the temp file.
//
// Fault injection for the crash-safety test (test/test_crash_safety.cpp): when
// the environment variable MAMBARL_TEST_ATOMIC_WRITE_PAUSE_MS is a positive
// number, the writer sleeps that many milliseconds after creating the temp
// file and again after writing it (before fsync and rename), so that a kill
// lands inside a write. Unset (always, outside that test) it costs nothing.
void write_file_atomically(const std::string& path, const std::function<void(int fd)>& body);
void write_file_atomically(const std::string& path, const std::string& contents);

// Removes the temp files write_file_atomically() left in `dir` when its process
// was killed mid-write: names ending in ".tmp.<pid>" whose pid is not a live
// process. Returns how many were removed. A live writer's temp file is kept.
int remove_stale_temp_files(const std::string& dir);

}  // namespace mambarl

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
void write_file_atomically(const std::string& path, const std::function<void(int fd)>& body);
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace mambarl

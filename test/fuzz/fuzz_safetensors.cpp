// libFuzzer target: the safetensors checkpoint reader (policy/io/safetensors.cpp),
// which treats its file as hostile. The input is the whole file, served from a
// memfd (read_safetensors wants a path; /proc/self/fd/N is one without disk I/O).
// Refusal must be a mambarl::Error; what it accepts must be self-consistent.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/base/check.hpp"
#include "policy/io/safetensors.hpp"

namespace {

int memfd() {
  static const int fd = ::memfd_create("fuzz_safetensors", MFD_CLOEXEC);
  if (fd < 0) __builtin_trap();
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd();
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) __builtin_trap();
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    const mambarl::SafetensorsFile f = mambarl::read_safetensors(path);
    size_t total = 0;
    for (const mambarl::TensorRecord& t : f.tensors) {
      if (t.bytes.size() != t.numel() * mambarl::dtype_size(t.dtype)) __builtin_trap();
      if (f.find(t.name) == nullptr) __builtin_trap();
      total += t.bytes.size();
    }
    // The tensors tile the data section exactly, so they can never add up to more than the file.
    if (total > size) __builtin_trap();
    (void)f.at("\x01 not a tensor name");  // the error path listing the names present
  } catch (const mambarl::Error&) {
    // refused with a message naming the file
  }
  return 0;
}

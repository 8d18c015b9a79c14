// Reading typed values out of a fuzzer's byte string, for the fuzz targets in
// this folder. Past the end every read returns zeros, so any input (the empty
// one included) is a valid, fully defined sequence of choices. Our own small
// reader rather than clang's FuzzedDataProvider: the same targets are built by
// g++ for the regression replay suites.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace mambarl::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : p_(data), n_(size) {}

  template <typename T> T take() {
    T v{};
    const size_t k = n_ < sizeof(T) ? n_ : sizeof(T);
    if (k) std::memcpy(&v, p_, k);
    p_ += k;
    n_ -= k;
    return v;
  }
  bool flag() { return take<uint8_t>() & 1; }
  // A string of up to max_len bytes (its length taken first).
  std::string str(size_t max_len) {
    size_t len = take<uint8_t>() % (max_len + 1);
    if (len > n_) len = n_;
    std::string s(reinterpret_cast<const char*>(p_), len);
    p_ += len;
    n_ -= len;
    return s;
  }
  size_t left() const { return n_; }

 private:
  const uint8_t* p_;
  size_t n_;
};

}  // namespace mambarl::fuzz

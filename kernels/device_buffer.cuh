// Owning device and pinned-host arrays whose pointers never move.
//
// A captured CUDA graph bakes raw pointers in, so every buffer it touches is
// allocated once, at its final size, and freed only with its owner. There is
// no resize: a different size is a different buffer (move-assign a new one),
// and CudaGraph (kernels/cuda_graph.cuh) notices the new address at replay.
// Pinned host memory makes the per-step H2D/D2H copies asynchronous and
// lets them live inside the graph as memcpy nodes.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/cuda_check.cuh"

namespace mambarl {

// How many device arrays this process has allocated so far. Every device
// allocation of ours is a CudaArray (cuBLAS's workspace included), so tests
// prove "a replay allocates nothing" by this count staying put; the
// device-wide free memory (cudaMemGetInfo) also moves with other processes
// sharing the GPU.
inline std::atomic<long long>& device_allocation_count() {
  static std::atomic<long long> count{0};
  return count;
}

template <typename T, bool kPinnedHost>
class CudaArray {
 public:
  CudaArray() = default;
  explicit CudaArray(size_t n) : n_(n) {
    if (n == 0) return;
    void* p = nullptr;
    if constexpr (kPinnedHost)
      MAMBARL_CUDA_CHECK(cudaMallocHost(&p, n * sizeof(T)));
    else
      MAMBARL_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
    p_ = static_cast<T*>(p);
    if constexpr (!kPinnedHost) ++device_allocation_count();
  }
  ~CudaArray() { release(); }
  CudaArray(const CudaArray&) = delete;
  CudaArray& operator=(const CudaArray&) = delete;
  CudaArray(CudaArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  CudaArray& operator=(CudaArray&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }

  T* data() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

 private:
  void release() noexcept {
    // Errors at free time cannot be reported from a destructor; a sticky
    // device error will surface at the next checked call instead.
    if (!p_) return;
    if constexpr (kPinnedHost)
      (void)cudaFreeHost(p_);
    else
      (void)cudaFree(p_);
    p_ = nullptr;
  }

  T* p_ = nullptr;
  size_t n_ = 0;
};

template <typename T>
using DeviceBuffer = CudaArray<T, false>;
template <typename T>
using PinnedBuffer = CudaArray<T, true>;

// Blocking copies for set-up, checkpoints, accessors and tests, never inside
// a captured region: they run on `stream` and synchronise it before returning.
template <typename T>
void copy_to_host(T* host, const T* device, size_t n, cudaStream_t stream = nullptr) {
  if (n == 0) return;
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(host, device, n * sizeof(T), cudaMemcpyDeviceToHost, stream));
  MAMBARL_CUDA_CHECK(cudaStreamSynchronize(stream));
}

template <typename T>
std::vector<T> copy_to_host(const T* device, size_t n, cudaStream_t stream = nullptr) {
  std::vector<T> host(n);
  copy_to_host(host.data(), device, n, stream);
  return host;
}

template <typename T>
std::vector<T> copy_to_host(const DeviceBuffer<T>& d, cudaStream_t stream = nullptr) {
  return copy_to_host(d.data(), d.size(), stream);
}

// Use this, never a bare cudaMemcpy, for host-to-device uploads: from pageable
// memory cudaMemcpy may return before its DMA has landed (CUDA Runtime API,
// "API synchronization behavior"), and our streams are non-blocking, so a
// kernel on one of them could read the old bytes. Synchronising the copy's
// stream makes the data final before this returns.
template <typename T>
void copy_to_device(T* device, const T* host, size_t n, cudaStream_t stream = nullptr) {
  if (n == 0) return;
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(device, host, n * sizeof(T), cudaMemcpyHostToDevice, stream));
  MAMBARL_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// A new buffer holding host[0, n); at least one element, so that a kernel
// argument made from an empty array (a stateless mixer's state) is never null.
template <typename T>
DeviceBuffer<T> to_device(const T* host, size_t n, cudaStream_t stream = nullptr) {
  DeviceBuffer<T> d(std::max<size_t>(n, 1));
  copy_to_device(d.data(), host, n, stream);
  return d;
}

template <typename T>
DeviceBuffer<T> to_device(const std::vector<T>& host, cudaStream_t stream = nullptr) {
  return to_device(host.data(), host.size(), stream);
}

}  // namespace mambarl

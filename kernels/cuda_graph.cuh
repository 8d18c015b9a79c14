// A captured CUDA graph that knows what it baked in.
//
// A graph replays raw pointers and sizes recorded at capture. If a buffer it
// wrote into was reallocated since (a new address or size), or the batch it
// was captured for changed, a replay would silently read freed memory or the
// wrong rows. So a CudaGraph keeps a list of bindings (a name, the object
// that owns the memory, and what that object reported at capture) and
// compares them before every launch: a mismatch throws mambarl::Error naming
// the binding, never launches. The check is a few pointer compares, no
// allocation.
//
// CaptureGuard is the RAII half: it begins a capture on a stream and, if the
// recording code throws, ends and discards it, so the stream is usable again.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda_check.cuh"

namespace mambarl {

// What a binding compares: (address, size) of a buffer, or (null, value) of a scalar.
struct BindingIdentity {
  const void* ptr = nullptr;
  size_t size = 0;
  bool operator==(const BindingIdentity& o) const { return ptr == o.ptr && size == o.size; }
};

struct GraphBinding {
  const char* name = "";
  const void* owner = nullptr;                          // the buffer object or the scalar
  BindingIdentity (*read)(const void* owner) = nullptr;  // its identity now
  BindingIdentity captured;                             // its identity at capture

  // Any buffer with data() and bytes() (DeviceBuffer, PinnedBuffer).
  template <class Buffer>
  static GraphBinding buffer(const char* name, const Buffer& b) {
    GraphBinding g;
    g.name = name;
    g.owner = &b;
    g.read = [](const void* o) {
      const auto* buf = static_cast<const Buffer*>(o);
      return BindingIdentity{static_cast<const void*>(buf->data()), buf->bytes()};
    };
    g.captured = g.read(g.owner);
    return g;
  }
  // A size the graph was built for, e.g. the batch.
  static GraphBinding value(const char* name, const int& v) {
    GraphBinding g;
    g.name = name;
    g.owner = &v;
    g.read = [](const void* o) {
      return BindingIdentity{nullptr, static_cast<size_t>(*static_cast<const int*>(o))};
    };
    g.captured = g.read(g.owner);
    return g;
  }
};

class CaptureGuard {
 public:
  explicit CaptureGuard(cudaStream_t stream) : stream_(stream) {
    // Thread-local mode: an unsafe call (a sync, a cudaMalloc) from this
    // thread during capture is an error; other threads are unaffected.
    MAMBARL_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  }
  CaptureGuard(const CaptureGuard&) = delete;
  CaptureGuard& operator=(const CaptureGuard&) = delete;
  ~CaptureGuard() {
    if (ended_) return;
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(stream_, &g);
    if (g) (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();  // the capture's own error was already thrown
  }
  cudaGraph_t end() {
    cudaGraph_t g = nullptr;
    ended_ = true;
    MAMBARL_CUDA_CHECK(cudaStreamEndCapture(stream_, &g));
    return g;
  }

 private:
  cudaStream_t stream_;
  bool ended_ = false;
};

class CudaGraph {
 public:
  explicit CudaGraph(std::string name = "graph") : name_(std::move(name)) {}
  ~CudaGraph() { release(); }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  bool captured() const { return exec_ != nullptr; }

  // Captures everything record(stream) enqueues; `bindings` names what it bakes in.
  template <class Record>
  void capture(cudaStream_t stream, std::vector<GraphBinding> bindings, Record&& record) {
    release();
    cudaGraph_t graph = nullptr;
    {
      CaptureGuard guard(stream);
      record(stream);
      graph = guard.end();
    }
    const cudaError_t err = cudaGraphInstantiate(&exec_, graph, 0);
    (void)cudaGraphDestroy(graph);
    MAMBARL_CUDA_CHECK(err);
    bindings_ = std::move(bindings);
  }

  // Throws before launching if any binding changed since capture.
  void launch(cudaStream_t stream) const {
    MAMBARL_CHECK(exec_, "CUDA graph '" << name_ << "' was never captured");
    for (const auto& b : bindings_) {
      const BindingIdentity now = b.read(b.owner);
      if (now == b.captured) continue;
      if (!b.captured.ptr && !now.ptr)
        MAMBARL_FAIL("CUDA graph '" << name_ << "' was captured for " << b.name << " "
                                    << b.captured.size << ", now " << now.size
                                    << ": refusing to replay; build a new actor/graph");
      MAMBARL_FAIL("CUDA graph '" << name_ << "' was captured with buffer '" << b.name << "' at "
                                  << b.captured.ptr << " (" << b.captured.size << " bytes), now "
                                  << now.ptr << " (" << now.size
                                  << " bytes): it was reallocated; refusing to replay");
    }
    MAMBARL_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
  }

 private:
  void release() {
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
  }

  std::string name_;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<GraphBinding> bindings_;
};

}  // namespace mambarl

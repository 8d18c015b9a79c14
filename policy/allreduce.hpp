// The one seam through which a data-parallel learner sums across its
// replicas (plugin/DESIGN.md "Data-parallel training"): each replica trains
// on its share of a minibatch, and summing the loss statistics and the
// gradient makes every replica take the step one learner on the whole
// minibatch would. The transport is behind it: the runner's, reached through
// the plugin ABI's mambarl_collective (plugin/host_collective.hpp): MPI on
// host memory for the CPU learner, NCCL on device memory for the GPU learner.
// A learner without one (nullptr) trains alone.
#pragma once

#include <cstddef>

namespace mambarl {

class Allreduce {
 public:
  virtual ~Allreduce() = default;
  virtual int size() const = 0;  // replicas; 1 behaves as no reduction at all
  // In-place sums on every replica; all replicas call them in the same order.
  virtual void sum(double* x, size_t n) = 0;          // host scalars
  virtual void sum_gradient(float* g, size_t n) = 0;  // the flat gradient, host memory

  // Device memory (the GPU learner): the sums are only ENQUEUED on `stream`
  // (a cudaStream_t), without host synchronisation or allocation, so that
  // the learner captures them into its update graph. A transport that sums
  // host memory only says false, and the device calls throw.
  virtual bool sums_device_memory() const = 0;
  virtual void sum_device(double* x, size_t n, void* stream) = 0;
  virtual void sum_gradient_device(float* g, size_t n, void* stream) = 0;
};

}  // namespace mambarl

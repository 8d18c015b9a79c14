// The one seam through which a data-parallel learner sums across its
// replicas (plugin/DESIGN.md "Data-parallel training"): each replica trains
// on its share of a minibatch, and summing the loss statistics and the
// gradient makes every replica take the step one learner on the whole
// minibatch would. The transport is behind it: MPI on host memory today (the
// runner's, reached through the plugin ABI's mambarl_collective); a NCCL
// transport would implement sum_gradient on device memory next to it.
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
};

}  // namespace mambarl

// The host's mambarl_collective (plugin/mambarl_plugin.h) behind the
// learner's Allreduce seam (policy/allreduce.hpp): how a plugin's learner
// sums across data-parallel ranks through whatever transport the runner
// owns (MPI on the host, NCCL on the device), without linking either.
// A failed sum throws with the host's reason (the transport usually ends
// the job first).
#pragma once

#include "plugin/mambarl_plugin.h"
#include "policy/allreduce.hpp"

namespace mambarl {

class HostCollective final : public Allreduce {
 public:
  explicit HostCollective(const mambarl_collective& c);
  int size() const override { return c_.size; }
  void sum(double* x, size_t n) override;
  void sum_gradient(float* g, size_t n) override;
  // Whether the host's transport has device sums (sum_f64_device, ABI 8).
  bool sums_device_memory() const override { return c_.sum_f64_device != nullptr; }
  void sum_device(double* x, size_t n, void* stream) override;
  void sum_gradient_device(float* g, size_t n, void* stream) override;

 private:
  void check(mambarl_status st, const char* fn) const;
  mambarl_collective c_;
};

}  // namespace mambarl

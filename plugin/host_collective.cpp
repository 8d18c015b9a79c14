#include "plugin/host_collective.hpp"

#include <cstdint>

#include "kernels/base/check.hpp"
#include "plugin/tensor_view.hpp"

namespace mambarl {

HostCollective::HostCollective(const mambarl_collective& c) : c_(c) {
  MAMBARL_CHECK(c.size >= 1 && c.rank >= 0 && c.rank < c.size && c.sum_f64 && c.sum_gradient && c.last_error,
                "create: collective has rank " << c.rank << " of " << c.size << " or a null function");
}

void HostCollective::sum(double* x, size_t n) {
  check(c_.sum_f64(c_.ctx, x, static_cast<int64_t>(n)), "sum_f64");
}

void HostCollective::sum_gradient(float* g, size_t n) {
  check(c_.sum_gradient(c_.ctx, view_f32(g, {static_cast<int64_t>(n)}), nullptr), "sum_gradient");
}

void HostCollective::sum_device(double* x, size_t n, void* stream) {
  MAMBARL_CHECK(sums_device_memory(), "the host's collective sums host memory only (rank "
                                          << c_.rank << " of " << c_.size << "): no sum_f64_device");
  check(c_.sum_f64_device(c_.ctx, x, static_cast<int64_t>(n), stream), "sum_f64_device");
}

void HostCollective::sum_gradient_device(float* g, size_t n, void* stream) {
  check(c_.sum_gradient(c_.ctx, view_f32(g, {static_cast<int64_t>(n)}, MAMBARL_DEVICE_CUDA), stream),
        "sum_gradient");
}

void HostCollective::check(mambarl_status st, const char* fn) const {
  MAMBARL_CHECK(st == MAMBARL_OK,
                "collective " << fn << " failed on rank " << c_.rank << ": " << c_.last_error(c_.ctx));
}

}  // namespace mambarl

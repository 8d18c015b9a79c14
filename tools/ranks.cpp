#include "tools/ranks.hpp"

#include <chrono>
#include <cstdlib>
#include <string>

#include "kernels/base/check.hpp"

namespace mambarl {

#if MAMBARL_HAVE_MPI
std::unique_ptr<Ranks> make_mpi_ranks();  // tools/mpi_ranks.cpp
#endif

namespace {

class OneProcess final : public Ranks {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void sum(double*, size_t, const char*) override {}
  void sum(float*, size_t, const char*) override {}
  std::vector<std::vector<uint8_t>> all_gather(const std::vector<uint8_t>& mine, const char*) override {
    return {mine};
  }
  std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& mine, const char*) override {
    return {mine};
  }
  void end_every_rank(int) override {}
};

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : 0;
}

}  // namespace

const mambarl_collective* Ranks::collective() {
  if (size() == 1) return nullptr;
  abi_.rank = rank();
  abi_.size = size();
  abi_.ctx = this;
  abi_.sum_f64 = [](void* ctx, double* data, int64_t n) -> mambarl_status {
    static_cast<Ranks*>(ctx)->sum(data, static_cast<size_t>(n), kLearnerTotals);
    return MAMBARL_OK;
  };
  abi_.sum_gradient = [](void* ctx, mambarl_tensor g, void* stream) -> mambarl_status {
    // Host memory only: a device gradient needs a device transport (NCCL).
    if (g.device != MAMBARL_DEVICE_CPU || g.dtype != MAMBARL_DTYPE_F32 || g.ndim != 1 || stream != nullptr)
      return MAMBARL_ERROR;
    auto& self = *static_cast<Ranks*>(ctx);
    const auto t0 = std::chrono::steady_clock::now();
    self.sum(static_cast<float*>(g.data), static_cast<size_t>(g.shape[0]), kGradientSum);
    self.gradient_sum_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return MAMBARL_OK;
  };
  abi_.last_error = [](void*) -> const char* {
    return "the runner's MPI collective sums host float32 gradients only (a gradient on a CUDA device "
           "needs the NCCL transport, tools/nccl_collective.hpp)";
  };
  return &abi_;
}

bool Ranks::any(bool mine, const char* what) {
  double v = mine ? 1.0 : 0.0;
  sum(&v, 1, what);
  return v > 0;
}

std::string error_on_rank(const Ranks& ranks, const std::string& why) {
  return "error on rank " + std::to_string(ranks.rank()) + " of " + std::to_string(ranks.size()) + ": " + why;
}

int launched_ranks() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const int n = env_int(var); n > 0) return n;
  return 1;
}

std::unique_ptr<Ranks> make_ranks() {
  const int n = launched_ranks();
#if MAMBARL_HAVE_MPI
  if (n > 1) return make_mpi_ranks();
#else
  MAMBARL_USER_CHECK(n <= 1, "this process is one of "
                                 << n << " ranks (launched by mpirun), but this build of "
                                 << "mambarl has no MPI: install libopenmpi-dev "
                                 << "(tools/install_deps.sh) and reconfigure, or run one "
                                 << "process without mpirun");
#endif
  return one_process_ranks();
}

bool built_with_mpi() {
#if MAMBARL_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool built_with_nccl() {
#if MAMBARL_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Ranks> one_process_ranks() { return std::make_unique<OneProcess>(); }

}  // namespace mambarl

// The data-parallel ranks of a training run (README "Training on several
// processes"): `mpirun -np N mambarl train` starts N copies, each owning
// num_envs / N envs and a learner replica. Ranks is all the runner needs
// from the launcher: who am I, and sums and gathers across the copies. One
// process is a Ranks of size 1 whose operations do nothing, so the runner has
// a single code path; MPI is one implementation (tools/mpi_ranks.cpp, built
// when CMake finds MPI), and nothing else in the runner or the plugin
// includes <mpi.h>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "plugin/mambarl_plugin.h"
#include "tools/collective_timeout.hpp"

namespace mambarl {

// The learner's sums across ranks (through Ranks::collective(), or NCCL's
// host fallback), as a timeout's error names them.
inline constexpr char kLearnerTotals[] = "the learner's totals (advantage statistics, loss terms)";
inline constexpr char kGradientSum[] = "the update's gradient sum";

class Ranks {
 public:
  virtual ~Ranks() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place sums on every rank. Every rank makes the same calls in the same
  // order. `what` names the work ("the update's gradient sum") in the error
  // of a rank that waits in it longer than the collective timeout.
  virtual void sum(double* x, size_t n, const char* what) = 0;
  virtual void sum(float* x, size_t n, const char* what) = 0;
  // Every rank's bytes in rank order, on every rank (all_gather) or on rank 0
  // only (gather; the other ranks get an empty list).
  virtual std::vector<std::vector<uint8_t>> all_gather(const std::vector<uint8_t>& mine, const char* what) = 0;
  virtual std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& mine, const char* what) = 0;
  // all_gather of n trivially copyable values per rank: every rank's, one
  // after the other in rank order.
  template <typename T>
  std::vector<T> all_gather_values(const T* mine, size_t n, const char* what) {
    std::vector<uint8_t> bytes(n * sizeof(T));
    if (n) std::memcpy(bytes.data(), mine, bytes.size());
    std::vector<T> all;
    for (const auto& b : all_gather(bytes, what)) {
      all.resize(all.size() + b.size() / sizeof(T));
      if (!b.empty()) std::memcpy(all.data() + all.size() - b.size() / sizeof(T), b.data(), b.size());
    }
    return all;
  }
  // From now on a collective that waits longer than this for the other ranks
  // (runtime.collective_timeout_s: one of them died or hangs) ends the job,
  // naming this rank and `what`. Until then (the ranks exist before the
  // config is read) they wait without bound. One process never waits.
  void bound_collectives(const CollectiveTimeout& timeout) { timeout_ = timeout; }
  // Ends every rank of the job now (after this rank reported its error).
  [[noreturn]] void abort(int exit_code) {
    end_every_rank(exit_code);
    std::_Exit(exit_code);
  }

  // These ranks as the plugin ABI's collective, for the learner's sums (the
  // plugin never links MPI); null for one process, which trains alone.
  const mambarl_collective* collective();

  bool any(bool mine, const char* what);  // whether any rank says true
  bool is_root() const { return rank() == 0; }
  // Wall seconds this rank spent in the learner's gradient sums through
  // collective(), waiting for slower ranks included (`mambarl bench e2e`).
  double gradient_sum_seconds() const { return gradient_sum_s_; }

 protected:
  virtual void end_every_rank(int exit_code) = 0;  // MPI_Abort; nothing for one process
  const CollectiveTimeout& timeout() const { return timeout_; }

 private:
  mambarl_collective abi_{};
  double gradient_sum_s_ = 0;
  CollectiveTimeout timeout_;
};

// "error on rank r of N: <why>": how every error that ends the job starts.
std::string error_on_rank(const Ranks& ranks, const std::string& why);

// Runs body() and returns what it returns. An exception on one of several
// ranks is reported on stderr naming `command` and the rank, then ends every
// rank (the others would wait in their next collective forever); in one
// process it propagates as usual.
template <typename Body>
auto on_every_rank(Ranks& ranks, const char* command, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception& e) {
    if (ranks.size() == 1) throw;
    std::cerr << "mambarl " << command << ": " << error_on_rank(ranks, e.what()) << std::endl;
    ranks.abort(1);
  }
}

// How many ranks the launcher started (mpirun sets OMPI_COMM_WORLD_SIZE,
// MPICH and Slurm's PMI PMI_SIZE): 1 when not launched by one.
int launched_ranks();

// The ranks this process belongs to: MPI when launched as one of several
// ranks, otherwise one process. A build without MPI refuses several ranks.
std::unique_ptr<Ranks> make_ranks();

// Whether this build has MPI (CMake found it: MAMBARL_MPI).
bool built_with_mpi();

// Whether this build has NCCL, the GPU learner's transport under several
// ranks (CMake found it: MAMBARL_NCCL; tools/nccl_collective.hpp).
bool built_with_nccl();

// One process alone, whoever launched it.
std::unique_ptr<Ranks> one_process_ranks();

}  // namespace mambarl

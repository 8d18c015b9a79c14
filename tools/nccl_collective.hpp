// The GPU learner's transport across data-parallel ranks (README "Training
// on several GPUs"): a NCCL communicator of every rank, one GPU each, behind
// the plugin ABI's mambarl_collective. The plugin enqueues its device sums
// (advantage and loss totals, the flat gradient) through it inside the
// learner's captured update graph; host sums go through the ranks (MPI).
// This file pair is the only one that includes <nccl.h> (built when CMake
// finds NCCL: MAMBARL_NCCL).
//
// The communicator is bootstrapped over the ranks: rank 0 makes the unique
// id (ncclGetUniqueId) and the ranks' all_gather carries it to the others
// (for one process, no MPI at all: the GPU tests use that). A watchdog
// thread polls ncclCommGetAsyncError, and times each watched learner update:
// an asynchronous NCCL error, or an update still running after the timeout
// (a rank died or hangs, so the others wait in their sums forever), aborts
// the communicator and ends this process with an error naming the rank
// (by default; tests observe it instead); mpirun then ends the others.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "plugin/mambarl_plugin.h"
#include "tools/ranks.hpp"

namespace mambarl {

class NcclCollective {
 public:
  // What a watchdog failure does, on the watchdog thread, after the
  // communicator was aborted (nothing may use it afterwards). `error` names
  // the rank ("error on rank r of N: ..."). The default prints it and ends
  // this process with status 1.
  using OnFailure = std::function<void(const std::string& error)>;
  static void end_this_process(const std::string& error);

  // Joins the communicator of ranks.size() ranks on CUDA device `device`,
  // which becomes this thread's current device (the policy's engines run
  // there). Every rank calls it, in the same order relative to the ranks'
  // other collectives. timeout_s: the longest a watched update may run.
  NcclCollective(Ranks& ranks, int device, double timeout_s, OnFailure on_failure = end_this_process);
  ~NcclCollective();
  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  // The ABI's collective: host sums through the ranks, device sums (f64
  // totals, the f32 gradient) enqueued on the caller's stream through NCCL.
  // Valid while this object lives, which must outlive the policy using it.
  const mambarl_collective* collective() const;

  // While a Watch lives, the watchdog ends the job if it lives longer than
  // the timeout (`what` names the work in the error).
  class Watch {
   public:
    Watch(NcclCollective& c, const char* what);
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    NcclCollective& c_;
  };

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The GPU of this rank: its local rank on its host (OMPI_COMM_WORLD_LOCAL_RANK,
// MPI_LOCALRANKID or SLURM_LOCALID; 0 when none is set) modulo the devices
// this process sees. Throws when it sees none.
int rank_gpu();

// Whether this process sees a CUDA device (no error left behind when not).
bool this_process_sees_a_gpu();

}  // namespace mambarl

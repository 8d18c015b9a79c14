#include "tools/nccl_collective.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <mutex>
#include <thread>
#include <utility>

#include "kernels/base/check.hpp"
#include "kernels/cuda_check.cuh"
#include "tools/collective_timeout.hpp"

namespace mambarl {

namespace {

using Clock = CollectiveTimeout::Clock;

// How often the watchdog looks: a fraction of any sensible timeout, and rare
// enough to cost nothing (one ncclCommGetAsyncError call).
constexpr std::chrono::milliseconds kPoll{100};

void check_nccl(ncclResult_t r, const char* call, ncclComm_t comm) {
  if (r == ncclSuccess) return;
  const char* detail = ncclGetLastError(comm);
  MAMBARL_FAIL(call << ": " << ncclGetErrorString(r) << (detail && *detail ? std::string(" (") + detail + ")" : ""));
}

}  // namespace

struct NcclCollective::Impl {
  Ranks& ranks;
  CollectiveTimeout timeout;
  OnFailure on_failure;
  ncclComm_t comm = nullptr;
  bool aborted = false;  // by the watchdog: never destroyed then
  mambarl_collective abi{};
  std::string last_error;  // of the last failed ABI call (the main thread's)

  // The watchdog's state, under mu.
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;
  const char* watched = nullptr;  // the work a live Watch names; null: none
  Clock::time_point watched_since;
  std::thread watchdog;

  Impl(Ranks& r, double t, OnFailure f) : ranks(r), timeout(t), on_failure(std::move(f)) {}

  // Enqueues an in-place sum of n elements on `stream` (a cudaStream_t).
  void all_reduce(void* data, int64_t n, ncclDataType_t type, void* stream) {
    MAMBARL_CHECK(n >= 0 && data != nullptr && stream != nullptr,
                  "NCCL sum of " << n << " elements at " << data << " on stream " << stream
                                 << ": needs device memory and a stream");
    check_nccl(ncclAllReduce(data, data, static_cast<size_t>(n), type, ncclSum, comm,
                             static_cast<cudaStream_t>(stream)),
               "ncclAllReduce", comm);
  }

  // Aborting frees whatever waits in this rank's NCCL kernels; then the
  // owner's failure action (by default: end this process, and mpirun ends
  // the other ranks when this one exits with an error).
  void fail(const std::string& why) {
    (void)ncclCommAbort(comm);
    aborted = true;
    on_failure(error_on_rank(ranks, why));
  }

  // Why the watchdog must act now, or "" while all is well.
  std::string trouble() const {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &async);
    if (r != ncclSuccess) return std::string("ncclCommGetAsyncError: ") + ncclGetErrorString(r);
    if (async != ncclSuccess && async != ncclInProgress)
      return std::string("NCCL reported an asynchronous error in the learner's sums: ") +
             ncclGetErrorString(async) + " (" + ncclGetLastError(comm) + ")";
    if (watched && timeout.passed(watched_since, Clock::now())) return timeout.why(watched, "NCCL");
    return "";
  }

  void watch_loop() {
    std::unique_lock<std::mutex> lk(mu);
    while (!stopping) {
      wake.wait_for(lk, kPoll);
      if (stopping) return;
      if (const std::string why = trouble(); !why.empty()) {
        fail(why);
        return;  // the communicator is gone: nothing more to watch
      }
    }
  }

  static Impl& of(void* ctx) { return *static_cast<Impl*>(ctx); }
  // An ABI callback's body: exceptions become MAMBARL_ERROR and last_error.
  template <typename Body>
  static mambarl_status guarded(void* ctx, Body&& body) {
    Impl& self = of(ctx);
    try {
      body(self);
      return MAMBARL_OK;
    } catch (const std::exception& e) {
      self.last_error = e.what();
    }
    return MAMBARL_ERROR;
  }
};

void NcclCollective::end_this_process(const std::string& error) {
  std::cerr << "mambarl train: " << error << "; ending the job" << std::endl;
  std::_Exit(1);
}

NcclCollective::NcclCollective(Ranks& ranks, int device, double timeout_s, OnFailure on_failure)
    : impl_(std::make_unique<Impl>(ranks, timeout_s, std::move(on_failure))) {
  Impl& m = *impl_;
  MAMBARL_CUDA_CHECK(cudaSetDevice(device));
  // Rank 0's id reaches every rank through the ranks' own transport (MPI).
  ncclUniqueId id{};
  std::vector<uint8_t> mine;
  if (ranks.is_root()) {
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr);
    mine.assign(reinterpret_cast<const uint8_t*>(&id), reinterpret_cast<const uint8_t*>(&id) + sizeof(id));
  }
  const std::vector<std::vector<uint8_t>> all = ranks.all_gather(mine, "sending rank 0's NCCL id");
  MAMBARL_CHECK(!all.empty() && all[0].size() == sizeof(id),
                "NcclCollective: rank 0 sent a unique id of " << (all.empty() ? 0 : all[0].size())
                                                              << " bytes, expected " << sizeof(id));
  std::memcpy(&id, all[0].data(), sizeof(id));
  check_nccl(ncclCommInitRank(&m.comm, ranks.size(), id, ranks.rank()), "ncclCommInitRank", nullptr);

  m.abi.rank = ranks.rank();
  m.abi.size = ranks.size();
  m.abi.ctx = &m;
  m.abi.sum_f64 = [](void* ctx, double* data, int64_t n) {
    return Impl::guarded(ctx, [&](Impl& self) { self.ranks.sum(data, static_cast<size_t>(n), kLearnerTotals); });
  };
  m.abi.sum_gradient = [](void* ctx, mambarl_tensor g, void* stream) {
    return Impl::guarded(ctx, [&](Impl& self) {
      MAMBARL_CHECK(g.dtype == MAMBARL_DTYPE_F32 && g.ndim == 1,
                    "sum_gradient: the flat gradient is a (num_params) float32 view");
      if (g.device == MAMBARL_DEVICE_CUDA)
        self.all_reduce(g.data, g.shape[0], ncclFloat32, stream);
      else  // a CPU learner (runtime.device resolved to cpu) sums on the host
        self.ranks.sum(static_cast<float*>(g.data), static_cast<size_t>(g.shape[0]), kGradientSum);
    });
  };
  m.abi.sum_f64_device = [](void* ctx, double* data, int64_t n, void* stream) {
    return Impl::guarded(ctx, [&](Impl& self) { self.all_reduce(data, n, ncclFloat64, stream); });
  };
  m.abi.last_error = [](void* ctx) -> const char* { return Impl::of(ctx).last_error.c_str(); };
  m.watchdog = std::thread([&m] { m.watch_loop(); });
}

NcclCollective::~NcclCollective() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    m.stopping = true;
  }
  m.wake.notify_all();
  m.watchdog.join();
  if (!m.aborted) (void)ncclCommDestroy(m.comm);
}

const mambarl_collective* NcclCollective::collective() const { return &impl_->abi; }

NcclCollective::Watch::Watch(NcclCollective& c, const char* what) : c_(c) {
  std::lock_guard<std::mutex> lk(c_.impl_->mu);
  c_.impl_->watched = what;
  c_.impl_->watched_since = Clock::now();
}

NcclCollective::Watch::~Watch() {
  std::lock_guard<std::mutex> lk(c_.impl_->mu);
  c_.impl_->watched = nullptr;
}

bool this_process_sees_a_gpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess) return n > 0;
  (void)cudaGetLastError();
  return false;
}

int rank_gpu() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) (void)cudaGetLastError();  // not this thread's error to report later
  MAMBARL_USER_CHECK(e == cudaSuccess && n > 0,
                     "runtime.device: a data-parallel GPU learner needs a CUDA device on every rank, and "
                     "this rank sees none ("
                         << (e == cudaSuccess ? "cudaGetDeviceCount found 0" : cudaGetErrorString(e)) << ")");
  int local = 0;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* v = std::getenv(var)) {
      local = std::atoi(v);
      break;
    }
  return (local < 0 ? 0 : local) % n;
}

}  // namespace mambarl

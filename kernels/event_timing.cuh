// Device time per repetition of some enqueued work, from CUDA events (the
// engines' benches: GpuActor::time_steps_us, GpuLearner::time_updates_ms).
//
// All repetitions are enqueued back to back before the first sync, with an
// event after every `group` of them; each group's interval divided by
// `group` is one sample (its repetitions' device time, launch gaps included).
// Groups make each sample a mean over several short repetitions (an actor
// step is tens of µs); the median over groups still discards outliers. The
// event clock is not the limit: on the lent H200 it resolves tens of ns (a
// 13 µs device copy timed per copy reads 13.22, 13.41, 13.47, ...).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

// enqueue() puts one repetition on `stream`; returns `groups` samples, each
// the mean milliseconds per repetition over `group` consecutive repetitions.
template <class Enqueue>
std::vector<double> time_repetitions_ms(cudaStream_t stream, int groups, int group, Enqueue&& enqueue) {
  MAMBARL_CHECK(groups >= 1 && group >= 1,
                "time_repetitions_ms: groups and group must be >= 1, got " << groups << " and " << group);
  std::vector<cudaEvent_t> ev(static_cast<size_t>(groups) + 1, nullptr);
  struct Events {  // destroyed on every path, a failed check included
    std::vector<cudaEvent_t>& e;
    ~Events() {
      for (auto x : e)
        if (x) (void)cudaEventDestroy(x);
    }
  } guard{ev};
  for (auto& e : ev) MAMBARL_CUDA_CHECK(cudaEventCreate(&e));
  MAMBARL_CUDA_CHECK(cudaEventRecord(ev[0], stream));
  for (size_t i = 0; i < static_cast<size_t>(groups); ++i) {
    for (int r = 0; r < group; ++r) enqueue();
    MAMBARL_CUDA_CHECK(cudaEventRecord(ev[i + 1], stream));
  }
  MAMBARL_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms(static_cast<size_t>(groups));
  for (size_t i = 0; i < ms.size(); ++i) {
    float t = 0.f;
    MAMBARL_CUDA_CHECK(cudaEventElapsedTime(&t, ev[i], ev[i + 1]));
    ms[i] = static_cast<double>(t) / group;
  }
  return ms;
}

}  // namespace mambarl::cuda

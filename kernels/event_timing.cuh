// Device time of each of `reps` back-to-back repetitions of some enqueued
// work, from CUDA events (the engines' benches: GpuActor::time_steps_us,
// GpuLearner::time_updates_ms).
//
// One event between consecutive repetitions, all enqueued before the first
// sync: the device runs them back to back, so each interval is one
// repetition's device time including its share of launch gaps.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

// enqueue() puts one repetition on `stream`; returns milliseconds per repetition.
template <class Enqueue>
std::vector<double> time_repetitions_ms(cudaStream_t stream, int reps, Enqueue&& enqueue) {
  MAMBARL_CHECK(reps >= 1, "time_repetitions_ms: reps must be >= 1, got " << reps);
  std::vector<cudaEvent_t> ev(static_cast<size_t>(reps) + 1, nullptr);
  struct Events {  // destroyed on every path, a failed check included
    std::vector<cudaEvent_t>& e;
    ~Events() {
      for (auto x : e)
        if (x) (void)cudaEventDestroy(x);
    }
  } guard{ev};
  for (auto& e : ev) MAMBARL_CUDA_CHECK(cudaEventCreate(&e));
  MAMBARL_CUDA_CHECK(cudaEventRecord(ev[0], stream));
  for (size_t i = 0; i < static_cast<size_t>(reps); ++i) {
    enqueue();
    MAMBARL_CUDA_CHECK(cudaEventRecord(ev[i + 1], stream));
  }
  MAMBARL_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms(static_cast<size_t>(reps));
  for (size_t i = 0; i < ms.size(); ++i) {
    float t = 0.f;
    MAMBARL_CUDA_CHECK(cudaEventElapsedTime(&t, ev[i], ev[i + 1]));
    ms[i] = t;
  }
  return ms;
}

}  // namespace mambarl::cuda

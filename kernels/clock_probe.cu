#include "kernels/clock_probe.cuh"

#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

namespace {

constexpr long long kSpinCycles = 2000000;  // ~1 ms at boost clock

__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

}  // namespace

double sm_clock_mhz(cudaStream_t stream) {
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  MAMBARL_CUDA_CHECK(cudaEventCreate(&e0));
  MAMBARL_CUDA_CHECK(cudaEventCreate(&e1));
  MAMBARL_CUDA_CHECK(cudaEventRecord(e0, stream));
  spin_kernel<<<1, 1, 0, stream>>>(kSpinCycles);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  MAMBARL_CUDA_CHECK(cudaEventRecord(e1, stream));
  MAMBARL_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0.f;
  MAMBARL_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  (void)cudaEventDestroy(e0);
  (void)cudaEventDestroy(e1);
  return static_cast<double>(kSpinCycles) / (ms * 1e3);
}

}  // namespace mambarl::cuda

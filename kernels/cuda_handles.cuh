// Owning handles for a CUDA stream and a cuBLAS handle (RAII, checked at
// creation), shared by the GPU engines. Destruction errors cannot be reported
// from a destructor; a sticky device error surfaces at the next checked call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda_check.cuh"

namespace mambarl {

// A non-blocking stream: it never synchronises with the legacy default
// stream, so an engine's captured work is ordered only by its own stream.
class CudaStream {
 public:
  CudaStream() { MAMBARL_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~CudaStream() { (void)cudaStreamDestroy(s_); }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class CublasHandle {
 public:
  CublasHandle() { MAMBARL_CUBLAS_CHECK(cublasCreate(&h_)); }
  ~CublasHandle() { (void)cublasDestroy(h_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

}  // namespace mambarl

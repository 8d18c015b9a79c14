// CUDA and cuBLAS error checks that throw mambarl::Error (kernels/base/check.hpp).
//
// Every runtime call is wrapped: an error carries the CUDA error name and
// string, the failed expression and file:line, so a bad launch, an
// out-of-memory or a missing device reads as one line instead of a crash.
// MAMBARL_CUDA_LAUNCH_CHECK(stream) follows every kernel launch: it always
// reads the launch error (bad configuration, too much shared memory) and, in
// debug builds, also synchronises so that a fault is reported at the launch
// that caused it. It never synchronises a stream that is being captured into
// a graph (that would invalidate the capture).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <sstream>
#include <string>

#include "kernels/base/check.hpp"

namespace mambarl::detail {

[[noreturn]] inline void throw_cuda_error(const char* file, int line, const char* expr,
                                          cudaError_t err) {
  std::ostringstream os;
  os << "CUDA error " << cudaGetErrorName(err) << ": " << cudaGetErrorString(err);
  throw_check_failure(file, line, expr, os.str());
}

[[noreturn]] inline void throw_cublas_error(const char* file, int line, const char* expr,
                                            cublasStatus_t st) {
  std::ostringstream os;
  os << "cuBLAS error " << cublasGetStatusName(st) << ": " << cublasGetStatusString(st);
  throw_check_failure(file, line, expr, os.str());
}

inline void check_launch(const char* file, int line, cudaStream_t stream) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw_cuda_error(file, line, "kernel launch", err);
#ifndef NDEBUG
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const cudaError_t q = cudaStreamIsCapturing(stream, &capture);
  if (q != cudaSuccess) throw_cuda_error(file, line, "cudaStreamIsCapturing", q);
  if (capture == cudaStreamCaptureStatusNone) {
    const cudaError_t s = cudaStreamSynchronize(stream);
    if (s != cudaSuccess) throw_cuda_error(file, line, "kernel execution (debug sync)", s);
  }
#else
  (void)stream;
#endif
}

}  // namespace mambarl::detail

#define MAMBARL_CUDA_CHECK(expr)                                                   \
  do {                                                                             \
    const cudaError_t mambarl_cuda_err_ = (expr);                                  \
    if (mambarl_cuda_err_ != cudaSuccess)                                          \
      ::mambarl::detail::throw_cuda_error(__FILE__, __LINE__, #expr, mambarl_cuda_err_); \
  } while (0)

#define MAMBARL_CUBLAS_CHECK(expr)                                                 \
  do {                                                                             \
    const cublasStatus_t mambarl_cublas_st_ = (expr);                              \
    if (mambarl_cublas_st_ != CUBLAS_STATUS_SUCCESS)                               \
      ::mambarl::detail::throw_cublas_error(__FILE__, __LINE__, #expr, mambarl_cublas_st_); \
  } while (0)

#define MAMBARL_CUDA_LAUNCH_CHECK(stream) ::mambarl::detail::check_launch(__FILE__, __LINE__, (stream))

namespace mambarl::cuda {

// The most dynamic shared memory one block may opt in to on the current
// device (what cudaFuncSetAttribute can raise a kernel's limit to).
inline size_t max_smem_per_block_optin() {
  int dev = 0, limit = 0;
  MAMBARL_CUDA_CHECK(cudaGetDevice(&dev));
  MAMBARL_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return static_cast<size_t>(limit);
}

}  // namespace mambarl::cuda

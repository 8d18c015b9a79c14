#include "kernels/cuda_check.cuh"
#include "kernels/linear.cuh"
#include "kernels/rows.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void fill_kernel(size_t n, float value, float* __restrict__ out) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

__global__ void flags_to_mask_kernel(size_t n, const uint8_t* __restrict__ flags, float* __restrict__ out) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = flags[i] != 0 ? 1.f : 0.f;
}

// No __restrict__: out may alias a or b (each element is read before it is written).
__global__ void add_kernel(size_t n, const float* a, const float* b, float* out) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

__global__ void add_bias_rows_kernel(size_t total, int N, float* __restrict__ Y,
                                     const float* __restrict__ b) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) Y[i] += b[i % N];
}

}  // namespace

void fill(size_t n, float value, float* out, cudaStream_t stream) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, value, out);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void flags_to_mask(size_t n, const uint8_t* flags, float* out, cudaStream_t stream) {
  if (n == 0) return;
  flags_to_mask_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, flags, out);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void add(size_t n, const float* a, const float* b, float* out, cudaStream_t stream) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, a, b, out);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void add_bias_rows(int M, int N, float* Y, const float* b, cudaStream_t stream) {
  MAMBARL_CHECK(M > 0 && N > 0, "add_bias_rows: sizes must be positive (M " << M << ", N " << N << ")");
  const size_t total = static_cast<size_t>(M) * N;
  add_bias_rows_kernel<<<blocks_for(total), kThreads, 0, stream>>>(total, N, Y, b);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void column_sum(cublasHandle_t handle, int M, int N, const float* X, int ldx, const float* w, float* out) {
  // out (1, N) += w (1, M) · X (M, N), in f32 whatever the learner's GEMM
  // precision: a bias or norm gradient is one sum per column, cheap in f32.
  gemm(handle, GemmPrecision{}, false, false, 1, N, M, 1.f, w, M, X, ldx, 1.f, out, N);
}

}  // namespace mambarl::cuda

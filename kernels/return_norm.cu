#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/return_norm.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kReduceThreads = 1024;  // one block: a fixed reduction order

// tools/return_normalizer.hpp's return_std.
__device__ __forceinline__ double return_std(double var) { return sqrt(var + 1e-8); }

__global__ void denormalize_kernel(float* __restrict__ v, size_t n, const double* __restrict__ stats) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) v[i] = static_cast<float>(v[i] * return_std(stats[1]) + stats[0]);
}

// One block. block_sum hands every thread the same sums, so each carries the
// merged statistics; thread 0 stores them, after every thread has read the
// old ones (block_sum syncs the block).
__global__ void __launch_bounds__(kReduceThreads)
    normalize_kernel(float* __restrict__ r, size_t n, double* __restrict__ stats) {
  __shared__ double scratch[32];
  const double mean = stats[0], var = stats[1], count = stats[2];
  double s = 0;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) s += r[i];
  const double n_b = static_cast<double>(n), mean_b = block_sum(s, scratch) / n_b;
  double m2 = 0;  // two passes: the batch's squared deviations from its own mean
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = r[i] - mean_b;
    m2 += d * d;
  }
  const double m2_b = block_sum(m2, scratch);
  const double total = count + n_b, delta = mean_b - mean;
  const double var_all = (var * count + m2_b + delta * delta * count * n_b / total) / total;
  const double mean_all = mean + delta * n_b / total;
  const double inv_sd = 1.0 / return_std(var_all);
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) r[i] = static_cast<float>((r[i] - mean_all) * inv_sd);
  if (threadIdx.x == 0) stats[0] = mean_all, stats[1] = var_all, stats[2] = total;
}

}  // namespace

void denormalize_values(float* v, size_t n, const double* stats, cudaStream_t stream) {
  MAMBARL_CHECK(v && stats, "denormalize_values: a null buffer");
  if (n == 0) return;
  denormalize_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(v, n,
                                                                                                    stats);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void normalize_returns(float* returns, size_t n, double* stats, cudaStream_t stream) {
  MAMBARL_CHECK(returns && stats && n > 0, "normalize_returns: a null buffer or no returns");
  normalize_kernel<<<1, kReduceThreads, 0, stream>>>(returns, n, stats);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda

#include "kernels/return_norm.cuh"

#include "kernels/base/running_stats.hpp"
#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kReduceThreads = 1024;  // one block: a fixed reduction order

__global__ void denormalize_kernel(float* __restrict__ v, size_t n, const double* __restrict__ stats) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const RunningStats st{stats[0], stats[1], stats[2]};
  v[i] = static_cast<float>(v[i] * st.std_dev() + st.mean);
}

// One block. block_sum hands every thread the same sums, so each carries the
// merged statistics; thread 0 stores them, after every thread has read the
// old ones (block_sum syncs the block).
__global__ void __launch_bounds__(kReduceThreads)
    normalize_kernel(float* __restrict__ r, size_t n, double* __restrict__ stats) {
  __shared__ double scratch[32];
  RunningStats st{stats[0], stats[1], stats[2]};
  double s = 0;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) s += r[i];
  const double n_b = static_cast<double>(n), mean_b = block_sum(s, scratch) / n_b;
  double m2 = 0;  // two passes: the batch's squared deviations from its own mean
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = r[i] - mean_b;
    m2 += d * d;
  }
  const double m2_b = block_sum(m2, scratch);
  st.merge(n_b, mean_b, m2_b);
  const double inv_sd = 1.0 / st.std_dev();
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) r[i] = static_cast<float>((r[i] - st.mean) * inv_sd);
  if (threadIdx.x == 0) stats[0] = st.mean, stats[1] = st.var, stats[2] = st.count;
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

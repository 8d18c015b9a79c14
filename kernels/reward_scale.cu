#include "kernels/reward_scale.cuh"

#include "kernels/base/running_stats.hpp"
#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

namespace {

// One block: the statistics are a chain through t (each t's scale depends on
// every earlier t), and one block keeps the reduction order fixed. At B = 64k
// that is 64 envs per thread per t, well below the chunk's other work.
constexpr int kThreads = 1024;

__global__ void __launch_bounds__(kThreads) scale_rewards_kernel(RewardScaleArgs a, double gamma) {
  __shared__ double scratch[32];
  // Every thread carries the same running statistics (block_sum hands all of
  // them the same sums), so no thread waits for another's write; thread 0
  // stores them at the end.
  RunningStats st{a.stats[0], a.stats[1], a.stats[2]};
  const double n_b = static_cast<double>(a.B);
  for (int t = 0; t < a.T; ++t) {
    float* r = a.rewards + static_cast<size_t>(t) * a.B;
    const uint8_t* term = a.terminated + static_cast<size_t>(t) * a.B;
    const uint8_t* trunc = a.truncated + static_cast<size_t>(t) * a.B;
    double s = 0;
    for (int b = threadIdx.x; b < a.B; b += blockDim.x) {
      const double g = gamma * a.returns[b] + r[b];
      a.returns[b] = g;
      s += g;
    }
    const double mean_b = block_sum(s, scratch) / n_b;
    double m2 = 0;  // two passes: the batch's squared deviations from its own mean
    for (int b = threadIdx.x; b < a.B; b += blockDim.x) {
      const double d = a.returns[b] - mean_b;
      m2 += d * d;
    }
    const double m2_b = block_sum(m2, scratch);
    st.merge(n_b, mean_b, m2_b);
    const double inv_std = 1.0 / st.std_dev();
    for (int b = threadIdx.x; b < a.B; b += blockDim.x) {
      r[b] = static_cast<float>(r[b] * inv_std);
      if (term[b] || trunc[b]) a.returns[b] = 0.0;
    }
  }
  if (threadIdx.x == 0) a.stats[0] = st.mean, a.stats[1] = st.var, a.stats[2] = st.count;
}

}  // namespace

void scale_rewards(const RewardScaleArgs& a, double gamma, cudaStream_t stream) {
  MAMBARL_CHECK(a.T > 0 && a.B > 0, "scale_rewards: T and B must be positive, got " << a.T << " x " << a.B);
  MAMBARL_CHECK(a.rewards && a.terminated && a.truncated && a.stats && a.returns, "scale_rewards: a null buffer");
  scale_rewards_kernel<<<1, kThreads, 0, stream>>>(a, gamma);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda
